"""Embedding tables inside parameter-server checkpoint files (used by `checkpoint`).

In a shard's `.npz` each table adds arrays of kinds `embedding_ids` (int64 (n,)),
`embedding_rows` (float32 (n, dim)) and one `embedding_slot` per optimizer slot, named
`<table>/<slot>` ((n, width), the slot's dtype); the JSON header lists the tables under
`embedding_tables` ({name, dim, initializer, seed, rows}). A shard file holds only the rows that
hash to it (`embedding_shard`), so re-sharding to another number of servers is concatenating
every file's rows and selecting by `embedding_shard` again. Malformed content is a ValueError
(the caller turns it into a CheckpointError).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from elasticdl.runtime.ps.embedding_table import TableExport, TableSpec
from elasticdl.runtime.ps.partition import embedding_shard

KINDS = ("embedding_ids", "embedding_rows", "embedding_slot")


def encode(
    embeddings: Mapping[str, TableExport], add: Callable[[str, str, np.ndarray], None]
) -> list[dict[str, Any]]:
    """Hand every array to `add(kind, name, array)`; returns the header's table list."""
    tables = []
    for name, export in embeddings.items():
        add("embedding_ids", name, np.asarray(export.ids, dtype=np.int64))
        add("embedding_rows", name, np.asarray(export.rows, dtype=np.float32))
        for slot, values in export.slots.items():
            add("embedding_slot", f"{name}/{slot}", np.asarray(values))
        spec = export.spec
        tables.append(
            {
                "name": spec.name,
                "dim": spec.dim,
                "initializer": spec.initializer,
                "seed": spec.seed,
                "rows": int(np.size(export.ids)),
            }
        )
    return tables


def decode(
    header: Mapping[str, Any],
    arrays: Mapping[tuple[str, str], Callable[[], np.ndarray]],
    keep: Callable[[np.ndarray], np.ndarray] | None = None,
) -> dict[str, TableExport]:
    """Tables of one shard file; `arrays[(kind, name)]()` reads an array. `keep(ids)` (a boolean
    mask) drops rows this reader does not want (e.g. other shards' after re-sharding)."""
    out = {}
    for info in header.get("embedding_tables", []):
        spec = TableSpec(
            str(info["name"]), int(info["dim"]), str(info["initializer"]), int(info["seed"])
        )
        ids = np.asarray(arrays[("embedding_ids", spec.name)](), dtype=np.int64)
        rows = arrays[("embedding_rows", spec.name)]()
        if rows.shape != (ids.size, spec.dim):
            raise ValueError(
                f"table {spec.name!r} has rows of shape {rows.shape} for {ids.size} ids of "
                f"dim {spec.dim}"
            )
        prefix = spec.name + "/"
        slots = {
            name[len(prefix) :]: read()
            for (kind, name), read in arrays.items()
            if kind == "embedding_slot"
            and name.startswith(prefix)
            and "/" not in name[len(prefix) :]
        }
        if any(len(v) != ids.size for v in slots.values()):
            raise ValueError(f"table {spec.name!r} has slots of another length than its ids")
        if keep is not None:
            mask = keep(ids)
            ids, rows = ids[mask], rows[mask]
            slots = {k: v[mask] for k, v in slots.items()}
        out[spec.name] = TableExport(spec, ids, rows, slots)
    return out


def misplaced(embeddings: Mapping[str, TableExport], ps_id: int, num_ps: int) -> list[str]:
    """Tables holding rows that do not hash to shard `ps_id` of `num_ps`."""
    return [
        name
        for name, export in embeddings.items()
        if export.ids.size and (embedding_shard(export.ids, num_ps) != ps_id).any()
    ]


def merge(into: dict[str, TableExport], more: Mapping[str, TableExport]) -> None:
    """Add `more` (another shard's tables) to `into`; ValueError when the specs disagree."""
    for name, export in more.items():
        held = into.get(name)
        if held is None:
            into[name] = export
            continue
        if held.spec != export.spec:
            raise ValueError(f"table {name!r} is declared differently in two shard files")
        if not export.ids.size or not held.ids.size:
            # A shard without rows of the table may have no slots (written before the slots
            # were allocated with the table): nothing to merge.
            into[name] = held if held.ids.size else export
            continue
        if set(held.slots) != set(export.slots):
            raise ValueError(f"table {name!r} has other optimizer slots in two shard files")
        into[name] = TableExport(
            held.spec,
            np.concatenate([held.ids, export.ids]),
            np.concatenate([held.rows, export.rows]),
            {k: np.concatenate([v, export.slots[k]]) for k, v in held.slots.items()},
        )


def select(
    embeddings: Mapping[str, TableExport], ps_id: int, num_ps: int
) -> dict[str, TableExport]:
    """The rows of every table that shard `ps_id` of `num_ps` holds (every table is kept)."""
    out = {}
    for name, export in embeddings.items():
        mask = embedding_shard(export.ids, num_ps) == ps_id
        if mask.all():
            out[name] = export
            continue
        slots = {k: v[mask] for k, v in export.slots.items()}
        out[name] = TableExport(export.spec, export.ids[mask], export.rows[mask], slots)
    return out


def row_counts(embeddings: Mapping[str, TableExport]) -> dict[str, int]:
    return {name: int(export.ids.size) for name, export in embeddings.items()}
