"""The worker's packed sparse functions (runtime/worker/sparse.py) against the per-table feed.

The packed step must give exactly what feeding each table's rows separately gives: the same
loss, dense gradients and, per table, one summed gradient row per unique id -- with tables of
different widths, a table called twice, a ragged call with a combiner and a table the model
never calls.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from elasticdl.layers import Embedding
from elasticdl.runtime.embedding import feed
from elasticdl.runtime.embedding.tables import embedding_layers
from elasticdl.runtime.ps.embedding_table import EmbeddingTable
from elasticdl.runtime.worker.sparse import SparseFunctions


class FakePS:
    """`pull_embeddings` from in-process tables (the rows a PS would create)."""

    def __init__(self, layers: dict[str, Embedding]) -> None:
        self.tables = {
            t: EmbeddingTable(t, layer.output_dim, layer.embeddings_initializer)
            for t, layer in layers.items()
        }
        self.asked: list[dict[str, np.ndarray]] = []

    def pull_embeddings(self, ids_by_table):
        self.asked.append(dict(ids_by_table))
        return {t: self.tables[t].lookup(ids) for t, ids in ids_by_table.items()}


class TwoTower(keras.Model):
    def __init__(self) -> None:
        super().__init__()
        self.user = Embedding(3, name="user")
        self.tags = Embedding(2, combiner="mean", name="tags")
        self.unused = Embedding(4, name="unused")
        self.out = keras.layers.Dense(1)

    def call(self, inputs, training=False):
        a = self.user(inputs["user"])  # [b, 3]
        b = self.user(inputs["friend"])  # the same table, a second call
        c = self.tags(inputs["tags"])  # ragged, [b, 2]
        return self.out(tf.concat([a * b, c, a], axis=1))


def features():
    return {
        "user": tf.constant([5, 9, 5, 2**40], tf.int64),
        "friend": tf.constant([9, 9, 1, 5], tf.int64),
        "tags": tf.ragged.constant([[1, 2], [2], [], [7, 1, 1]], dtype=tf.int64),
    }


def loss_fn(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions))


def test_the_packed_step_equals_feeding_each_table_separately():
    model = TwoTower()
    x, y = features(), tf.constant([[1.0], [0.0], [2.0], [-1.0]])
    embedding_layers(model)  # the worker's table names before the local tables are made
    model(x)
    variables, state = model.trainable_variables, model.non_trainable_variables
    functions = SparseFunctions(model, loss_fn, variables, state)
    layers = {layer.table: layer for layer in (model.user, model.tags, model.unused)}
    ps = FakePS(layers)

    ids = functions.gather_ids(x)
    assert ids.unique[model.unused.table].size == 0
    np.testing.assert_array_equal(ids.unique[model.user.table], [5, 9, 2**40, 1])
    np.testing.assert_array_equal(ids.unique[model.tags.table], [1, 2, 7])
    rows = functions.pull_rows(ps, ids)
    loss, dense, _, packed = functions.step(x, y, rows, ids)
    grads = functions.row_gradients(ids, packed.numpy())

    # The reference: the per-table feed (tests/runtime/embedding/test_layer.py checks it).
    with feed.collecting() as collected:
        model(x)
    found = collected.result()
    table_rows = {t: tf.constant(ps.tables[t].lookup(found[t]["ids"].numpy())) for t in found}
    with tf.GradientTape() as tape:
        tape.watch(list(table_rows.values()))
        with feed.feeding(table_rows, {t: found[t]["index"] for t in found}):
            expected_loss = loss_fn(y, model(x, training=True))
    expected = tape.gradient(expected_loss, variables + list(table_rows.values()))

    np.testing.assert_allclose(loss.numpy(), expected_loss.numpy(), rtol=1e-6)
    for got, want in zip(dense, expected[: len(variables)], strict=True):
        np.testing.assert_allclose(got.numpy(), tf.convert_to_tensor(want).numpy(), rtol=1e-5)
    for t, want in zip(table_rows, expected[len(variables) :], strict=True):
        got_ids, got_rows = grads[t]
        np.testing.assert_array_equal(got_ids, found[t]["ids"].numpy())
        np.testing.assert_allclose(got_rows, tf.convert_to_tensor(want).numpy(), rtol=1e-5)
    assert grads[model.unused.table][1].shape == (0, 4)
    assert set(ps.asked[-1]) == {model.user.table, model.tags.table}  # no pull of the unused


def test_a_new_number_of_unique_ids_needs_no_new_trace():
    model = TwoTower()
    x, y = features(), tf.constant([[1.0], [0.0], [2.0], [-1.0]])
    embedding_layers(model)  # the worker's table names before the local tables are made
    model(x)
    functions = SparseFunctions(model, loss_fn, model.trainable_variables, [])
    ps = FakePS({layer.table: layer for layer in (model.user, model.tags, model.unused)})
    for user in ([5, 9, 5, 2**40], [1, 1, 1, 1], [3, 4, 6, 8]):
        x["user"] = tf.constant(user, tf.int64)
        ids = functions.gather_ids(x)
        loss, *_ = functions.step(x, y, functions.pull_rows(ps, ids), ids)
        assert np.isfinite(loss.numpy())
    assert functions.step_traces == 1
    predicted = functions.predictor(ps)(x)
    np.testing.assert_allclose(predicted.numpy(), model(x).numpy(), rtol=1e-5)
