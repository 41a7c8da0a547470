"""The embedding tables of one parameter-server shard and the sparse optimizer that updates them.

Thread-safe with a lock of its own, so lookups do not wait for dense applications; `Parameters`
calls `apply`, `export` and `load` while holding its own lock (order: Parameters, then this),
which keeps a checkpoint's rows at exactly its version.

Tables are declared by the pushed model (`declare`): the first declaration creates a table, a
later one must agree (dim, initializer, seed) or is a ValueError. A shard holds only the rows
whose ids hash to it (`embedding_shard`); the servicer checks that, not this store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping

import numpy as np

from elasticdl.runtime.ps.embedding_table import EmbeddingTable, TableExport, TableSpec
from elasticdl.runtime.ps.sparse_optimizers import SparseOptimizer

_log = logging.getLogger(__name__)
READ_PAGE_BYTES = 32 << 20  # well below gRPC's message limit

SparseGrads = Mapping[str, tuple[np.ndarray, np.ndarray]]


class EmbeddingStore:
    """name -> `EmbeddingTable`, updated by one `SparseOptimizer` (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, EmbeddingTable] = {}
        self.optimizer: SparseOptimizer | None = None
        self.restored_version = -1
        self.restored_rows: dict[str, int] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tables)

    def specs(self) -> list[TableSpec]:
        with self._lock:
            return [t.spec for t in self._tables.values()]

    def rows(self) -> dict[str, int]:
        """Rows held per table."""
        with self._lock:
            return {name: len(t) for name, t in self._tables.items()}

    def nbytes(self) -> int:
        with self._lock:
            return sum(t.nbytes() for t in self._tables.values())

    def declare(self, specs: Iterable[TableSpec]) -> list[str]:
        """Create the tables not held yet; returns their names. A held table declared with
        another dim, initializer or seed is a ValueError (nothing is created then)."""
        specs = list(specs)
        with self._lock:
            for spec in specs:
                held = self._tables.get(spec.name)
                if held is not None and held.spec != spec:
                    raise ValueError(
                        f"embedding table {spec.name!r} is declared as {_describe(spec)} but "
                        f"held as {_describe(held.spec)} (another model's checkpoint?)"
                    )
            new = [s for s in specs if s.name not in self._tables]
            tables = {s.name: EmbeddingTable(s.name, s.dim, s.initializer, s.seed) for s in new}
            if self.optimizer is not None:
                # Slots from the start: every shard's export then has the optimizer's slots,
                # also of a table with no rows or no update on it yet (checkpoints merge).
                for table in tables.values():
                    table.use_optimizer(self.optimizer)
            self._tables.update(tables)
            return list(tables)

    def lookup(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows of `ids` in table `name` (created on first touch); ValueError if unknown."""
        with self._lock:
            return self._table(name).lookup(ids)

    def read(self, name: str, start: int, limit: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(ids, rows, rows held) of rows [start, start + limit) of table `name`; a page is
        cut to at most READ_PAGE_BYTES of rows."""
        with self._lock:
            table = self._table(name)
            limit = min(int(limit), max(1, READ_PAGE_BYTES // (4 * table.dim)))
            ids, rows = table.read(start, limit)
            return ids, rows, len(table)

    def check(self, grads: SparseGrads) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Validated (ids int64 (n,), values float32 (n, dim)) per table; ValueError naming
        the first unknown table or mis-shaped gradient."""
        out = {}
        for name, (ids, values) in grads.items():
            table = self._table(name)
            ids = np.asarray(ids).reshape(-1)
            values = np.asarray(values)
            if ids.dtype.kind not in "iu" and ids.size:
                raise ValueError(f"embedding gradient {name!r}: ids of dtype {ids.dtype}")
            if values.shape != (ids.size, table.dim):
                raise ValueError(
                    f"embedding gradient {name!r} has values of shape {values.shape} for "
                    f"{ids.size} ids; the table's rows have dim {table.dim}"
                )
            out[name] = (ids.astype(np.int64, copy=False), values.astype(np.float32, copy=False))
        return out

    def apply(self, grads: SparseGrads, learning_rate: float) -> None:
        """Apply checked gradients with the store's optimizer at `learning_rate`."""
        if not grads:
            return
        if self.optimizer is None:
            raise ValueError("embedding gradients arrived but no sparse optimizer is set")
        with self._lock:
            for name, (ids, values) in grads.items():
                self._tables[name].apply(ids, values, self.optimizer, learning_rate)

    def export(self) -> dict[str, TableExport]:
        with self._lock:
            return {name: t.export() for name, t in self._tables.items()}

    def check_same(self, specs: Iterable[TableSpec], origin: str = "") -> None:
        """ValueError unless `specs` are exactly the tables held (a later pushed model)."""
        held = {spec.name: spec for spec in self.specs()}
        pushed = {spec.name: spec for spec in specs}
        if held != pushed:
            differ = sorted(n for n in set(held) | set(pushed) if held.get(n) != pushed.get(n))
            where = f" (restored from checkpoint {origin})" if origin else ""
            raise ValueError(
                f"the pushed model's embedding tables do not match those held{where}: "
                f"{len(differ)} differ in name, dim, initializer or seed (e.g. {differ[:3]})"
            )

    def load(
        self, exports: Mapping[str, TableExport], source: str = "a checkpoint", version: int = -1
    ) -> None:
        """Create (or check) each table and set its rows and slots; remembers `version` and
        the rows per table in `restored_version` / `restored_rows`. Slots of another optimizer
        (other names) are dropped with a warning: those rows' state starts fresh."""
        self.declare(e.spec for e in exports.values())
        wanted = {s.name for s in self.optimizer.slot_specs()} if self.optimizer else set()
        with self._lock:
            for name, export in exports.items():
                slots = export.slots
                if slots and set(slots) != wanted:
                    _log.warning(
                        "embedding table %r in %s has slots %s, the optimizer needs %s: rows "
                        "restored, their optimizer state starts fresh",
                        name,
                        source,
                        sorted(slots),
                        sorted(wanted),
                    )
                    slots = {}
                table = self._tables[name]
                if self.optimizer is not None:
                    table.use_optimizer(self.optimizer)
                table.load(export.ids, export.rows, slots)
            self.restored_version = int(version)
            self.restored_rows = {n: int(e.ids.size) for n, e in exports.items()}

    def _table(self, name: str) -> EmbeddingTable:
        table = self._tables.get(name)
        if table is None:
            held = sorted(self._tables) or "none"
            raise ValueError(
                f"no embedding table named {name!r} (tables held: {held}); tables are declared "
                "with push_model"
            )
        return table


def _describe(spec: TableSpec) -> str:
    return f"dim {spec.dim}, initializer {spec.initializer!r}, seed {spec.seed}"
