"""Where an `Embedding` layer's rows come from while a model is called inside a worker.

A worker trains a sparse model in two compiled passes per minibatch (see
`runtime/worker/sparse.py`):

1. `collecting()`: the model is called with `training=False`; each PS-backed layer records the
   flat int64 ids it was given and returns zeros. The traced function returns only the ids, so
   TensorFlow prunes the dense layers from that graph: the pass costs the id computation only.
   `CollectedIds.result()` gives, per table, the unique ids of the minibatch (first-occurrence
   order, `tf.unique`) and, per call of the layer, each id's position among them.
2. `feeding(rows, index)`: the model is called for real; call k of a table's layer reads
   `gather(rows[table], index[table][k])`. The rows pulled from the PS for the unique ids are
   inputs of the compiled step, watched by its tape, so their gradient (IndexedSlices over the
   unique ids, densified: one summed row per unique id) comes out with the dense gradients.

Contexts are Python state read while a function is *traced*; they hold no tensors between
calls. Not thread-safe (one model call at a time per process, as in a worker).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf

_ACTIVE: list[Any] = []


def active() -> Any:
    """The innermost feed context, or None outside `collecting()` / `feeding()`."""
    return _ACTIVE[-1] if _ACTIVE else None


class CollectedIds:
    """Ids recorded per table during a collecting call (pass 1)."""

    def __init__(self) -> None:
        self.calls: dict[str, list[tf.Tensor]] = {}

    def record(self, table: str, ids: tf.Tensor) -> None:
        self.calls.setdefault(table, []).append(ids)

    def result(self) -> dict[str, dict[str, Any]]:
        """table -> {"ids": unique int64 ids, "index": [positions of call k's ids, ...]}."""
        out: dict[str, dict[str, Any]] = {}
        for table, calls in self.calls.items():
            unique, index = tf.unique(tf.concat(calls, axis=0), out_idx=tf.int32)
            sizes = [tf.size(c) for c in calls]
            out[table] = {"ids": unique, "index": list(tf.split(index, tf.stack(sizes)))}
        return out


class FedRows:
    """Rows and per-call positions handed to the layers during the real call (pass 2)."""

    def __init__(
        self, rows: Mapping[str, tf.Tensor], index: Mapping[str, Sequence[tf.Tensor]]
    ) -> None:
        self.rows = rows
        self.index = index
        self._calls: dict[str, int] = {}

    def take(self, table: str) -> tuple[tf.Tensor, tf.Tensor]:
        if table not in self.rows:
            raise KeyError(f"no rows were fed for embedding table {table!r}")
        k = self._calls.get(table, 0)
        self._calls[table] = k + 1
        return self.rows[table], self.index[table][k]


@contextlib.contextmanager
def collecting() -> Iterator[CollectedIds]:
    """Pass 1: layers record their ids (see the module docstring)."""
    context = CollectedIds()
    _ACTIVE.append(context)
    try:
        yield context
    finally:
        _ACTIVE.pop()


@contextlib.contextmanager
def feeding(
    rows: Mapping[str, tf.Tensor], index: Mapping[str, Sequence[tf.Tensor]]
) -> Iterator[FedRows]:
    """Pass 2: layers read the fed rows (see the module docstring)."""
    context = FedRows(rows, index)
    _ACTIVE.append(context)
    try:
        yield context
    finally:
        _ACTIVE.pop()
