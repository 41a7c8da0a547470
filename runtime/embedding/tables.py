"""The PS-backed embedding tables of a model: stable names, specs, trained rows.

Names: the k-th `Embedding` layer of a model (Keras layer order, which the model definition
fixes) gets the table `e{k:03d}/{layer name without counter suffix}`, e.g. `e000/embedding`;
every process building the same model definition agrees, whatever else it built before (see
`runtime/variables.py` for the same problem with variables).

Trained rows travel in `params.npz` beside the dense parameters, as two arrays per table:
`embedding:<table>:ids` (n,) int64 and `embedding:<table>:rows` (n, dim) float32.

A plain `keras.layers.Embedding` is never swapped for the PS-backed layer: it stays a dense
variable (held whole by one PS and updated whole by the optimizer). Use
`elasticdl.layers.Embedding` for tables whose rows a minibatch touches sparsely.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from elasticdl.runtime.embedding.lookup import TableLookup

TRAINED_PREFIX = "embedding:"
_COUNTER_SUFFIX = re.compile(r"_\d+$")


def embedding_layers(model: Any) -> dict[str, TableLookup]:
    """table name -> layer for every PS-backed `Embedding` in `model` (a Keras 3 or a Keras 2
    one); names them (see above)."""
    found: dict[str, TableLookup] = {}
    layers = [model] if isinstance(model, TableLookup) else []
    layers += list(model._flatten_layers(include_self=False, recursive=True))
    for layer in layers:
        if isinstance(layer, TableLookup):
            if not layer.table_name:
                base = _COUNTER_SUFFIX.sub("", layer.name)
                layer.table_name = f"e{len(found):03d}/{base}"
            found[layer.table] = layer
    return found


def table_specs(model: Any) -> list[Any]:
    """The `TableSpec` (name, dim, initializer, seed) of each table, to declare to the PS."""
    from elasticdl.runtime.ps.embedding_table import TableSpec

    return [
        TableSpec(name, layer.output_dim, layer.embeddings_initializer, layer.seed)
        for name, layer in embedding_layers(model).items()
    ]


def trained_arrays(tables: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """params.npz entries for table -> (ids, rows)."""
    out: dict[str, np.ndarray] = {}
    for name, (ids, rows) in tables.items():
        out[f"{TRAINED_PREFIX}{name}:ids"] = np.asarray(ids, np.int64)
        out[f"{TRAINED_PREFIX}{name}:rows"] = np.asarray(rows, np.float32)
    return out


def split_trained(values: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(dense values, table -> (ids, rows)) from params.npz entries."""
    dense: dict[str, np.ndarray] = {}
    tables: dict[str, dict[str, np.ndarray]] = {}
    for key, value in values.items():
        if key.startswith(TRAINED_PREFIX):
            name, _, part = key[len(TRAINED_PREFIX) :].rpartition(":")
            tables.setdefault(name, {})[part] = value
        else:
            dense[key] = value
    return dense, {n: (t["ids"], t["rows"]) for n, t in tables.items()}


def load_trained_rows(model: Any, tables: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Serve `model`'s tables from trained rows; a table with no saved rows serves zeros."""
    for name, layer in embedding_layers(model).items():
        ids, rows = tables.get(name, (np.zeros(0, np.int64), np.zeros((0, layer.output_dim))))
        layer.set_trained_rows(ids, rows)
