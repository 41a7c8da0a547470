"""An embedding table on one parameter server: int64 id -> float32 row, pure numpy, no I/O.

Storage: rows live in growable 2-D arrays (`row r` of the table is `_rows[r]`; each optimizer
slot is an array of the same length), and an open-addressing hash index (linear probing,
capacity a power of two, load <= 1/2) maps id -> r. Every operation works on whole arrays of
ids: probing advances all unresolved ids one slot per round, so its cost is a few vectorised
passes, never a Python loop per id. Rows are never removed.

Rows are created on first touch (`lookup` or `apply`) by the table's initializer, a pure
function of (table name, seed, id) -- see `initializers` -- so concurrent first touches and a
relaunched server agree. Optimizer slots are created with the first `apply` (their initial
values from the optimizer) and move only for touched rows (see `sparse_optimizers`).

Not thread-safe: the caller serialises access (the PS's `EmbeddingStore` holds a lock).
`export()` / `load()` move (ids, rows, slots) in and out for checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from elasticdl.runtime.ps.initializers import parse_initializer, table_salt
from elasticdl.runtime.ps.partition import mix64
from elasticdl.runtime.ps.sparse_optimizers import SlotSpec, SparseOptimizer

INDEX_SALT = 0x1D_E7AB1E
_MIN_CAPACITY = 1024


@dataclass(frozen=True)
class TableSpec:
    """What declares a table (proto `EmbeddingTableInfo`): name, row width, initializer, seed."""

    name: str
    dim: int
    initializer: str = "uniform"
    seed: int = 0


@dataclass
class TableExport:
    """A table's content: `ids` (n,), `rows` (n, dim), `slots` name -> (n, width)."""

    spec: TableSpec
    ids: np.ndarray
    rows: np.ndarray
    slots: dict[str, np.ndarray] = field(default_factory=dict)


class EmbeddingTable:
    """id -> row map for int64 ids of any size (see the module docstring)."""

    def __init__(self, name: str, dim: int, initializer: str = "uniform", seed: int = 0) -> None:
        if int(dim) <= 0:
            raise ValueError(f"embedding table {name!r}: dim must be >= 1, got {dim}")
        self.spec = TableSpec(str(name), int(dim), initializer or "uniform", int(seed))
        self._init = parse_initializer(self.spec.initializer)
        self._salt = table_salt(self.spec.name, self.spec.seed)
        self._size = 0
        self._ids = np.empty(_MIN_CAPACITY, dtype=np.int64)
        self._rows = np.empty((_MIN_CAPACITY, self.dim), dtype=np.float32)
        self._slot_specs: tuple[SlotSpec, ...] = ()
        self._slots: dict[str, np.ndarray] = {}
        self._index_ids = np.empty(0, dtype=np.int64)
        self._index_rows = np.empty(0, dtype=np.int64)
        self._mask = 0
        self._scratch = np.empty(0, dtype=np.int64)
        self._rebuild_index(2 * _MIN_CAPACITY)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dim(self) -> int:
        return self.spec.dim

    @property
    def slot_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self._slot_specs)

    def __len__(self) -> int:
        return self._size

    def nbytes(self) -> int:
        """Bytes allocated for ids, rows, slots and the index (capacity, not just rows held)."""
        arrays = [self._ids, self._rows, self._index_ids, self._index_rows, self._scratch]
        arrays += self._slots.values()
        return int(sum(a.nbytes for a in arrays))

    # -- reads and updates ----------------------------------------------------------------
    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Rows of `ids` (float32, (len(ids), dim), a new array), creating missing ones."""
        rows = self.row_indices(ids)  # first: it may reallocate self._rows
        return take_rows(self._rows, rows)

    def row_indices(self, ids: np.ndarray, create: bool = True) -> np.ndarray:
        """Storage rows of `ids` (int64); missing ids are created, or -1 with create=False."""
        ids = _as_ids(ids)
        rows = self._find(ids)
        if create:
            missing = np.flatnonzero(rows < 0)
            if missing.size:
                new, inverse = np.unique(ids[missing], return_inverse=True)
                start = self._insert(new)
                rows[missing] = start + inverse
        return rows

    def apply(
        self,
        ids: np.ndarray,
        grads: np.ndarray,
        optimizer: SparseOptimizer,
        learning_rate: float | None = None,
    ) -> None:
        """Update the rows of `ids` with `grads` ((len(ids), dim)) by `optimizer`.

        Duplicate ids have their gradients summed first (IndexedSlices semantics); missing rows
        are created first. `learning_rate` overrides the optimizer's for this application.
        """
        ids = _as_ids(ids)
        grads = np.asarray(grads, dtype=np.float32)
        if grads.shape != (ids.size, self.dim):
            raise ValueError(
                f"embedding table {self.name!r}: gradients of shape {grads.shape} for "
                f"{ids.size} ids of dim {self.dim}"
            )
        if ids.size == 0:
            return
        self.use_optimizer(optimizer)
        rows = self.row_indices(ids)
        if not self._unique(rows):
            rows, grads = _sum_duplicates(rows, grads)
        params = take_rows(self._rows, rows)
        slots = {name: take_rows(a, rows) for name, a in self._slots.items()}
        optimizer.apply(params, grads, slots, learning_rate)
        _scatter(self._rows, rows, params)
        for name, values in slots.items():
            _scatter(self._slots[name], rows, values)

    def read(self, start: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Copies of (ids, rows) of storage rows [start, start + limit), in creation order."""
        start = max(0, int(start))
        end = min(self._size, start + max(0, int(limit)))
        end = max(start, end)
        return self._ids[start:end].copy(), self._rows[start:end].copy()

    # -- checkpoints ----------------------------------------------------------------------
    def export(self) -> TableExport:
        """Copies of every id, row and slot (in creation order)."""
        n = self._size
        slots = {name: a[:n].copy() for name, a in self._slots.items()}
        return TableExport(self.spec, self._ids[:n].copy(), self._rows[:n].copy(), slots)

    def load(self, ids: np.ndarray, rows: np.ndarray, slots: Mapping[str, np.ndarray]) -> None:
        """Set rows (and slots) of `ids`, creating them as needed; slot names must be those of
        the optimizer in use (or, before any apply, are adopted with their dtypes and widths)."""
        ids = _as_ids(ids)
        rows = np.asarray(rows, dtype=np.float32).reshape(ids.size, self.dim)
        if ids.size == 0:
            return
        if slots and not self._slot_specs:
            self._slot_specs = tuple(
                SlotSpec(n, int(np.shape(v)[1]), 0.0, str(np.asarray(v).dtype))
                for n, v in slots.items()
            )
            self._slots = {
                s.name: np.zeros((len(self._rows), s.width), dtype=s.dtype)
                for s in self._slot_specs
            }
            if self._size:
                for spec in self._slot_specs:
                    self._slots[spec.name][: self._size] = spec.initial
        unknown = sorted(set(slots) - set(self._slots))
        if unknown:
            raise ValueError(
                f"embedding table {self.name!r}: slots {unknown} do not belong to the "
                f"optimizer in use (slots {sorted(self._slots)})"
            )
        where = self.row_indices(ids)
        self._rows[where] = rows
        for name, values in slots.items():
            self._slots[name][where] = np.asarray(values).reshape(ids.size, -1)

    def use_optimizer(self, optimizer: SparseOptimizer) -> None:
        """Allocate `optimizer`'s slots (done by the first `apply`; call it before `load` so
        that rows created later start from the optimizer's initial slot values). Slots of the
        same names are kept; other names are a ValueError."""
        specs = tuple(
            SlotSpec(s.name, s.width or self.dim, s.initial, s.dtype)
            for s in optimizer.slot_specs()
        )
        if specs == self._slot_specs:
            return
        if self._slot_specs and [s.name for s in specs] != list(self.slot_names):
            raise ValueError(
                f"embedding table {self.name!r} has slots {list(self.slot_names)}, "
                f"{type(optimizer).__name__} needs {[s.name for s in specs]}"
            )
        old = self._slots
        self._slot_specs = specs
        self._slots = {}
        for spec in specs:
            array = np.full((len(self._rows), spec.width), spec.initial, dtype=spec.dtype)
            if spec.name in old and old[spec.name].shape[1] == spec.width:
                array[: self._size] = old[spec.name][: self._size]
            self._slots[spec.name] = array

    # -- internals ------------------------------------------------------------------------
    def _unique(self, rows: np.ndarray) -> bool:
        """Whether `rows` has no duplicates: O(n) with a scratch array (no sort)."""
        if rows.size < 2:
            return True
        if self._scratch.size < len(self._rows):
            self._scratch = np.empty(len(self._rows), dtype=np.int64)
        order = np.arange(rows.size, dtype=np.int64)
        self._scratch[rows] = order  # a duplicate row keeps only one of its positions
        return bool((self._scratch[rows] == order).all())

    def _find(self, ids: np.ndarray) -> np.ndarray:
        mask = np.uint64(self._mask)
        pos = (mix64(ids, INDEX_SALT) & mask).astype(np.int64)
        found = self._index_rows[pos]
        hit = self._index_ids[pos] == ids
        rows = np.where(hit, found, -1)
        todo = np.flatnonzero((found >= 0) & ~hit)
        pos = pos[todo]
        while todo.size:
            pos = (pos + 1) & self._mask
            found = self._index_rows[pos]
            hit = self._index_ids[pos] == ids[todo]
            rows[todo[hit]] = found[hit]
            go_on = (found >= 0) & ~hit
            todo, pos = todo[go_on], pos[go_on]
        return rows

    def _insert(self, new: np.ndarray) -> int:
        """Append rows for `new` (unique ids not in the table); returns the first row index."""
        start, end = self._size, self._size + new.size
        if end > len(self._rows):
            self._grow(end)
        self._ids[start:end] = new
        self._rows[start:end] = self._init.rows(new, self.dim, self._salt)
        for spec in self._slot_specs:
            self._slots[spec.name][start:end] = spec.initial
        self._size = end
        if 2 * end > len(self._index_rows):
            capacity = 2 * len(self._index_rows)
            while 2 * end > capacity:
                capacity *= 2
            self._rebuild_index(capacity)
        else:
            self._index_insert(new, np.arange(start, end, dtype=np.int64))
        return start

    def _grow(self, needed: int) -> None:
        capacity = max(len(self._rows), _MIN_CAPACITY)
        while capacity < needed:
            capacity *= 2
        self._ids = _resized(self._ids, capacity, self._size)
        self._rows = _resized(self._rows, capacity, self._size)
        self._slots = {n: _resized(a, capacity, self._size) for n, a in self._slots.items()}

    def _rebuild_index(self, capacity: int) -> None:
        self._index_ids = np.zeros(capacity, dtype=np.int64)
        self._index_rows = np.full(capacity, -1, dtype=np.int64)
        self._mask = capacity - 1
        if self._size:
            self._index_insert(self._ids[: self._size], np.arange(self._size, dtype=np.int64))

    def _index_insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Place unique ids that are not in the index; colliding ids probe linearly."""
        pos = (mix64(ids, INDEX_SALT) & np.uint64(self._mask)).astype(np.int64)
        todo = np.arange(ids.size, dtype=np.int64)
        while todo.size:
            free = self._index_rows[pos] < 0
            claim, where = todo[free], pos[free]
            # Several ids may claim one free position: write, read back, the survivor wins.
            self._index_rows[where] = claim
            won = self._index_rows[where] == claim
            self._index_rows[where[won]] = rows[claim[won]]
            self._index_ids[where[won]] = ids[claim[won]]
            lost = np.ones(todo.size, dtype=bool)
            lost[np.flatnonzero(free)[won]] = False
            todo, pos = todo[lost], (pos[lost] + 1) & self._mask


def _as_ids(ids: np.ndarray) -> np.ndarray:
    array = np.asarray(ids)
    if array.dtype.kind not in "iu" and array.size:
        raise ValueError(f"embedding ids must be integers, got dtype {array.dtype}")
    return array.astype(np.int64, copy=False).reshape(-1)


def take_rows(array: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`array[rows]` for a C-contiguous 2-D array, moving each row as one opaque item (about
    twice as fast as numpy's fancy indexing over elements)."""
    array = np.ascontiguousarray(array)
    width = array.shape[1] * array.itemsize
    items = array.view(np.dtype((np.void, width))).reshape(-1)
    return np.take(items, rows).view(array.dtype).reshape(rows.size, array.shape[1])


def _scatter(array: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """`array[rows] = values` (rows unique), row by row as opaque items."""
    width = array.shape[1] * array.itemsize
    items = array.view(np.dtype((np.void, width))).reshape(-1)
    values = np.ascontiguousarray(values, dtype=array.dtype)
    items[rows] = values.view(np.dtype((np.void, width))).reshape(-1)


def _sum_duplicates(rows: np.ndarray, grads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return ordered[starts], np.add.reduceat(grads[order], starts, axis=0)


def _resized(array: np.ndarray, capacity: int, used: int) -> np.ndarray:
    out = np.empty((capacity, *array.shape[1:]), dtype=array.dtype)
    out[:used] = array[:used]
    return out
