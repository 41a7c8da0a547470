"""elasticdl.layers.Embedding on its own: shapes, combiners, masks, the feed passes, names."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from elasticdl.layers import Embedding
from elasticdl.runtime.embedding import feed
from elasticdl.runtime.embedding.tables import embedding_layers, split_trained, trained_arrays
from elasticdl.runtime.ps.embedding_table import EmbeddingTable


def rows_of(layer: Embedding, ids) -> np.ndarray:
    return EmbeddingTable(layer.table, layer.output_dim, layer.embeddings_initializer).lookup(
        np.asarray(ids, np.int64)
    )


def test_rows_are_the_tables_rows_for_ids_of_any_size():
    layer = Embedding(4, name="emb")
    ids = np.array([[1, 2**62], [1, 5]], np.int64)
    out = layer(tf.constant(ids)).numpy()
    assert out.shape == (2, 2, 4)
    np.testing.assert_array_equal(out.reshape(-1, 4), rows_of(layer, ids.reshape(-1)))
    assert np.abs(out).max() <= 0.05  # Keras' uniform(-0.05, 0.05)
    np.testing.assert_array_equal(out[0, 0], out[1, 0])


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_combiners_on_dense_ragged_and_sparse_ids(combiner):
    layer = Embedding(3, combiner=combiner, mask_zero=True, name="c")
    r = {i: rows_of(layer, [i])[0] for i in (1, 2, 7)}
    scale = {"sum": [1, 1, 1], "mean": [2, 1, 1], "sqrtn": [np.sqrt(2), 1, 1]}[combiner]
    expected = np.stack([(r[1] + r[2]) / scale[0], r[7] / scale[1], np.zeros(3)])
    dense = layer(tf.constant([[1, 2, 0], [0, 7, 0], [0, 0, 0]])).numpy()
    np.testing.assert_allclose(dense, expected, rtol=1e-6)
    ragged = layer(tf.ragged.constant([[1, 2], [7], []], dtype=tf.int64)).numpy()
    np.testing.assert_allclose(ragged, expected, rtol=1e-6)
    sparse = tf.sparse.from_dense(tf.constant([[1, 2], [7, 0], [0, 0]], tf.int64))
    np.testing.assert_allclose(layer(sparse).numpy(), expected, rtol=1e-6)


def test_mask_zero_without_combiner_gives_a_keras_mask():
    inputs = keras.Input((3,), dtype="int64")
    vectors = Embedding(2, mask_zero=True, name="m")(inputs)
    assert tuple(vectors.shape) == (None, 3, 2)
    layer = Embedding(2, mask_zero=True)
    mask = layer.compute_mask(tf.constant([[1, 0, 3]]))
    np.testing.assert_array_equal(mask.numpy(), [[True, False, True]])


def test_trained_rows_serve_and_unseen_ids_read_as_zeros():
    layer = Embedding(2, name="t")
    layer.set_trained_rows(np.array([10, 2**40]), np.array([[1.0, 2.0], [3.0, 4.0]]))
    out = layer(tf.constant([2**40, 11, 10], tf.int64)).numpy()
    np.testing.assert_array_equal(out, [[3, 4], [0, 0], [1, 2]])
    layer.set_trained_rows(np.zeros(0, np.int64), np.zeros((0, 2)))
    np.testing.assert_array_equal(layer(tf.constant([0, 10])).numpy(), np.zeros((2, 2)))


def test_feed_passes_collect_unique_ids_and_sum_gradients_per_id():
    layer = Embedding(2, combiner="sum", name="f")
    ids = tf.constant([[5, 5], [9, 5]], tf.int64)
    with feed.collecting() as collected:
        layer(ids)
    result = collected.result()[layer.table]
    np.testing.assert_array_equal(result["ids"].numpy(), [5, 9])
    rows = tf.constant(rows_of(layer, [5, 9]))
    with tf.GradientTape() as tape:
        tape.watch(rows)
        with feed.feeding({layer.table: rows}, {layer.table: result["index"]}):
            out = layer(ids)
        loss = tf.reduce_sum(out)
    np.testing.assert_allclose(out.numpy(), layer(ids).numpy(), rtol=1e-6)
    grad = tf.convert_to_tensor(tape.gradient(loss, rows)).numpy()
    np.testing.assert_array_equal(grad, [[3, 3], [1, 1]])  # id 5 used three times


def test_table_names_are_stable_across_models_in_one_process():
    def model() -> keras.Model:
        inputs = keras.Input((2,), dtype="int64")
        a = Embedding(2, name="user")(inputs)
        b = Embedding(3, name="item")(inputs)
        return keras.Model(inputs, [a, b])

    model()  # a first model moves Keras' name counters
    names = list(embedding_layers(model()))
    assert names == ["e000/user", "e001/item"] or names == ["e000/item", "e001/user"]
    assert names == list(embedding_layers(model()))


def test_arguments_and_the_v02_path():
    from elasticdl.python.elasticdl.layers.embedding import Embedding as V02

    assert V02 is Embedding
    layer = V02(8, embeddings_initializer="uniform", mask_zero=False, input_length=4,
                combiner="mean")  # fmt: skip
    config = layer.get_config()
    assert config["combiner"] == "mean" and config["input_length"] == 4
    assert Embedding.from_config(config).output_dim == 8
    normal = Embedding(2, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.5))
    assert "RandomNormal" in normal.embeddings_initializer
    with pytest.raises(ValueError, match="combiner must be one of"):
        Embedding(2, combiner="max")
    with pytest.raises(TypeError, match="hash strings to int64 ids"):
        Embedding(2)(tf.constant(["a"]))
    dense, tables = split_trained(
        {"t000/k": np.ones(1), **trained_arrays({"e000/x": (np.arange(2), np.ones((2, 3)))})}
    )
    assert list(dense) == ["t000/k"] and tables["e000/x"][1].shape == (2, 3)
