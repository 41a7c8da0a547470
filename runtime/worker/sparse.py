"""The worker's compiled functions for a model with PS-backed embedding tables.

Per minibatch (see `runtime/embedding/feed.py` for the two passes):

1. `ids(features)`: per table, the minibatch's unique ids and each layer call's positions
   among them (a compiled pass that computes ids only);
2. `pull_rows`: the rows of those ids from the parameter servers (`PSClient.pull_embeddings`:
   every table's ids split by owning PS, one request per PS, all PS in parallel);
3. `step(features, labels, rows, index)`: loss, dense gradients, non-trainable state and one
   gradient row per unique id per table (IndexedSlices densified over the unique ids: the
   gradients of repeated ids are summed).

The rows are inputs of the compiled step, so the dense part keeps one traced graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from elasticdl.runtime.embedding import feed
from elasticdl.runtime.embedding.tables import embedding_layers


class SparseFunctions:
    """ids / step / predict functions of one model (see the module docstring)."""

    def __init__(self, model: Any, loss_fn: Any, variables: list[Any], state: list[Any]) -> None:
        layers = embedding_layers(model)
        self.tables = sorted(layers)
        self._dims = {t: layers[t].output_dim for t in self.tables}
        tables = self.tables

        @tf.function(reduce_retracing=True)
        def ids(features: Any) -> Any:
            with feed.collecting() as collected:
                model(features, training=False)
            found = collected.result()
            # A table this forward pass did not use gets no ids (its gradient is empty).
            unused = {"ids": tf.zeros([0], tf.int64), "index": []}
            return {t: found.get(t, unused) for t in tables}

        @tf.function(reduce_retracing=True)
        def step(features: Any, labels: Any, rows: Any, index: Any) -> Any:
            row_list = [rows[t] for t in tables]
            with tf.GradientTape() as tape:
                tape.watch(row_list)
                with feed.feeding(rows, index):
                    predictions = model(features, training=True)
                loss = loss_fn(labels, predictions)
                if model.losses:
                    loss = loss + tf.add_n(model.losses)
            gradients = tape.gradient(loss, variables + row_list)
            dense = [
                tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                for g, v in zip(gradients[: len(variables)], variables, strict=True)
            ]
            sparse = [
                tf.zeros_like(r) if g is None else tf.convert_to_tensor(g)
                for g, r in zip(gradients[len(variables) :], row_list, strict=True)
            ]
            return loss, dense, [v.value for v in state], sparse

        @tf.function(reduce_retracing=True)
        def predict(features: Any, rows: Any, index: Any) -> Any:
            with feed.feeding(rows, index):
                return model(features, training=False)

        self.ids = ids
        self._step = step
        self.predict_fed = predict
        self._traced = False

    @property
    def traced(self) -> bool:
        return self._traced

    def step(self, features: Any, labels: Any, rows: Any, index: Any) -> Any:
        """The compiled step; traced once for any number of unique ids (shapes relaxed up
        front, so a new id count does not retrace it)."""
        if not self._traced:
            self._step.get_concrete_function(*_relaxed((features, labels, rows, index)))
            self._traced = True
        return self._step(features, labels, rows, index)

    def gather_ids(self, features: Any) -> tuple[dict[str, np.ndarray], dict[str, list[Any]]]:
        """(table -> unique ids as int64 arrays, table -> per-call index tensors)."""
        collected = self.ids(features)
        unique = {t: collected[t]["ids"].numpy() for t in self.tables}
        index = {t: list(collected[t]["index"]) for t in self.tables}
        return unique, index

    def pull_rows(self, ps: Any, unique: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The PS rows of each table's unique ids: one request per PS for all tables."""
        wanted = {t: unique[t] for t in self.tables if len(unique[t])}
        pulled = ps.pull_embeddings(wanted) if wanted else {}
        return {
            t: np.asarray(pulled[t], np.float32)
            if t in pulled
            else np.zeros((0, self._dims[t]), np.float32)
            for t in self.tables
        }

    def predictor(self, ps: Any) -> Any:
        """A `predict(features)` that pulls the rows it needs from `ps` (evaluation)."""

        def predict(features: Any) -> Any:
            unique, index = self.gather_ids(features)
            return self.predict_fed(features, self.pull_rows(ps, unique), index)

        return predict


def _relaxed(structure: Any) -> Any:
    """TensorSpecs of `structure`: vectors of any length, higher ranks with every dimension
    but the last unknown."""

    def spec(value: Any) -> tf.TensorSpec:
        value = tf.convert_to_tensor(value)
        rank = value.shape.rank
        shape = [None] * rank if rank < 2 else [None] * (rank - 1) + [value.shape[-1]]
        return tf.TensorSpec(shape, value.dtype)

    return tf.nest.map_structure(spec, structure)
