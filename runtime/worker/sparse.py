"""The worker's compiled functions for a model with PS-backed embedding tables.

Per minibatch (see `runtime/embedding/feed.py` for the two passes):

1. `gather_ids(features)`: per table, the minibatch's unique ids and each layer call's
   positions among them (a compiled pass that computes ids only);
2. `pull_rows`: the rows of those ids from the parameter servers (`PSClient.pull_embeddings`:
   every table's ids split by owning PS, one request per PS, all PS in parallel);
3. `step(features, labels, rows, ids)`: loss, dense gradients, non-trainable state and one
   gradient row per unique id per table (IndexedSlices densified over the unique ids: the
   gradients of repeated ids are summed).

Every table travels through the compiled functions packed, not as one tensor per table: the
unique ids of all tables in one int64 vector (`counts` ids per table, in table order), every
call's positions in one int32 vector (`call_sizes` per call, in table and call order), all
rows in one flat float32 vector, and the row gradients likewise; the functions split them
inside the graph. Why: with DeepFM's 26 tables a call of the step took ~55 input tensors and
~40 outputs, and tf.function's argument matching, numpy conversion and output wrapping cost
more than the graph itself did (1.5 of 4.5 ms alone, several times that under a busy worker's
other threads). The ids pass and the step are also called as their one concrete function each
(`one_trace.py`): shapes are relaxed up front, so no minibatch needs another trace. How many
calls each table's layer gets is read when the ids pass is traced (the same model code makes
the same calls in the step).

The rows are inputs of the compiled step, so the dense part keeps one traced graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from elasticdl.runtime.embedding import feed
from elasticdl.runtime.embedding.tables import embedding_layers
from elasticdl.runtime.worker.one_trace import OneTrace


@dataclass
class MinibatchIds:
    """A minibatch's ids, packed (see the module docstring): `unique` maps each table to its
    unique ids (views into one array); `counts`, `positions`, `call_sizes` are the packed
    tensors the step and predict functions take back as they are."""

    unique: dict[str, np.ndarray]
    counts: Any
    positions: Any
    call_sizes: Any


class SparseFunctions:
    """ids / step / predict functions of one model (see the module docstring)."""

    def __init__(self, model: Any, loss_fn: Any, variables: list[Any], state: list[Any]) -> None:
        layers = embedding_layers(model)
        self.tables = sorted(layers)
        self._dims = np.array([layers[t].output_dim for t in self.tables], np.int64)
        self._calls: dict[str, int] | None = None  # calls per table, read when ids is traced
        tables, dims = self.tables, [int(d) for d in self._dims]

        @tf.function(reduce_retracing=True)
        def ids(features: Any) -> Any:
            with feed.collecting() as collected:
                model(features, training=False)
            found = collected.result()
            self._calls = {t: len(found[t]["index"]) if t in found else 0 for t in tables}
            # A table this forward pass did not use gets no ids (its gradient is empty).
            unique = [found[t]["ids"] if t in found else tf.zeros([0], tf.int64) for t in tables]
            index = [i for t in tables if t in found for i in found[t]["index"]]
            return {
                "ids": tf.concat(unique, axis=0),
                "counts": tf.stack([tf.size(u, out_type=tf.int32) for u in unique]),
                "positions": tf.concat(index, axis=0) if index else tf.zeros([0], tf.int32),
                "call_sizes": tf.stack([tf.size(i, out_type=tf.int32) for i in index])
                if index
                else tf.zeros([0], tf.int32),
            }

        def unpacked(rows: Any, counts: Any, positions: Any, call_sizes: Any) -> Any:
            """table -> rows [n, dim], table -> [positions of call k] from the packed form."""
            pieces = tf.split(rows, counts * tf.constant(dims, tf.int32), num=len(tables))
            by_table = {
                t: tf.reshape(p, [-1, d]) for t, p, d in zip(tables, pieces, dims, strict=True)
            }
            calls = self._calls or {}
            total = sum(calls.values())
            split = tf.split(positions, call_sizes, num=total) if total else []
            index, k = {}, 0
            for t in tables:
                index[t] = split[k : k + calls.get(t, 0)]
                k += calls.get(t, 0)
            return by_table, index

        @tf.function(reduce_retracing=True)
        def step(features: Any, labels: Any, rows: Any, counts: Any, positions: Any, sizes: Any):
            with tf.GradientTape() as tape:
                tape.watch(rows)
                by_table, index = unpacked(rows, counts, positions, sizes)
                with feed.feeding(by_table, index):
                    predictions = model(features, training=True)
                loss = loss_fn(labels, predictions)
                if model.losses:
                    loss = loss + tf.add_n(model.losses)
            gradients = tape.gradient(loss, variables + [rows])
            dense = [
                tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                for g, v in zip(gradients[:-1], variables, strict=True)
            ]
            row_grads = tf.zeros_like(rows) if gradients[-1] is None else gradients[-1]
            return loss, dense, [v.value for v in state], tf.convert_to_tensor(row_grads)

        @tf.function(reduce_retracing=True)
        def predict(features: Any, rows: Any, counts: Any, positions: Any, sizes: Any) -> Any:
            by_table, index = unpacked(rows, counts, positions, sizes)
            with feed.feeding(by_table, index):
                return model(features, training=False)

        # Unique ids per table vary in number, and so may a model's inner id dimensions.
        self.ids = OneTrace(ids, static_inner_dims=False)
        self._step = OneTrace(step, static_inner_dims=False)
        self._predict = predict

    @property
    def traced(self) -> bool:
        return self._step.traced

    @property
    def step_traces(self) -> int:
        """How often the step was traced (1 once traced: shapes are relaxed)."""
        return self._step.traces

    def gather_ids(self, features: Any) -> MinibatchIds:
        """The ids pass on `features` (see `MinibatchIds`)."""
        out = self.ids(features)
        counts = out["counts"]
        pieces = np.split(out["ids"].numpy(), np.cumsum(counts.numpy())[:-1])
        return MinibatchIds(
            dict(zip(self.tables, pieces, strict=True)), counts, out["positions"], out["call_sizes"]
        )

    def pull_rows(self, ps: Any, ids: MinibatchIds) -> np.ndarray:
        """The PS rows of every table's unique ids, packed (one request per PS for all)."""
        wanted = {t: u for t, u in ids.unique.items() if len(u)}
        pulled = ps.pull_embeddings(wanted) if wanted else {}
        parts = [np.asarray(pulled[t], np.float32).reshape(-1) for t in wanted]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def step(self, features: Any, labels: Any, rows: np.ndarray, ids: MinibatchIds) -> Any:
        """(loss, dense gradients, state, packed row gradients): the compiled step, traced
        once for any number of unique ids (its one concrete function, shapes relaxed)."""
        return self._step(features, labels, rows, ids.counts, ids.positions, ids.call_sizes)

    def row_gradients(
        self, ids: MinibatchIds, packed: np.ndarray
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """table -> (unique ids, gradient rows [n, dim]) from the step's packed gradients."""
        counts = np.array([len(ids.unique[t]) for t in self.tables], np.int64)
        ends = np.cumsum(counts * self._dims)
        pieces = np.split(packed, ends[:-1])
        return {
            t: (ids.unique[t], p.reshape(-1, int(d)))
            for t, p, d in zip(self.tables, pieces, self._dims, strict=True)
        }

    def predictor(self, ps: Any) -> Any:
        """A `predict(features)` that pulls the rows it needs from `ps` (evaluation)."""

        def predict(features: Any) -> Any:
            ids = self.gather_ids(features)
            rows = self.pull_rows(ps, ids)
            return self._predict(features, rows, ids.counts, ids.positions, ids.call_sizes)

        return predict
