"""Checks of ElasticDL compatibility pieces, run in this process's Keras.

`check_*` functions hold in both Kerases: each `elasticdl_preprocessing` layer against what its
docstring (ElasticDL's, and ours where it says more) and ElasticDL's own tests of it describe,
the feature column's properties, the callbacks' base class. `keras2_check_*` functions hold in
Keras 2 only (feature columns inside `DenseFeatures`, ElasticDL's `Embedding` among TF ops on
Keras tensors, a LearningRateScheduler in tf_keras's `fit`). The Keras 3 tests call the first
kind in the pytest process; the Keras 2 test runs all in one child process started with
`TF_USE_LEGACY_KERAS=1` (`python -m compat_checks`), which prints `PASS name` or
`FAIL name: error` per check.
"""

from __future__ import annotations

import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf

from elasticdl.runtime import keras_mode


def keras():
    return keras_mode.keras()


def sparse_equal(a: tf.SparseTensor, b: tf.SparseTensor) -> None:
    assert isinstance(a, tf.SparseTensor), type(a)
    np.testing.assert_array_equal(a.dense_shape.numpy(), np.asarray(b.dense_shape))
    np.testing.assert_array_equal(a.indices.numpy(), np.asarray(b.indices))
    assert a.values.dtype == b.values.dtype, (a.values.dtype, b.values.dtype)
    np.testing.assert_array_equal(a.values.numpy(), b.values.numpy())


def ragged_equal(a: tf.RaggedTensor, b: tf.RaggedTensor) -> None:
    assert isinstance(a, tf.RaggedTensor), type(a)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.to_list() == b.to_list(), (a.to_list(), b.to_list())


def raises(error: type[Exception], fn: Callable[[], object]) -> None:
    try:
        fn()
    except error:
        return
    raise AssertionError(f"expected {error.__name__}")


def check_hashing() -> None:
    from elasticdl_preprocessing.layers import Hashing

    layer = Hashing(num_bins=3)
    out = layer(np.asarray([["A"], ["B"], ["C"], ["D"], ["E"]]))
    assert out.dtype == tf.int64
    np.testing.assert_array_equal(out.numpy(), [[1], [0], [1], [1], [2]])
    ragged = tf.ragged.constant([["A", "B"], ["C", "D"], ["E"], []])
    expected = tf.ragged.constant([[1, 0], [1, 1], [2], []], dtype=tf.int64)
    ragged_equal(layer(ragged), expected)
    sparse_equal(layer(ragged.to_sparse()), expected.to_sparse())
    ints = layer(tf.constant([[5], [17]], tf.int64)).numpy()
    np.testing.assert_array_equal(ints, layer(tf.constant([["5"], ["17"]])).numpy())
    raises(ValueError, lambda: Hashing(num_bins=0))


def check_discretization() -> None:
    from elasticdl_preprocessing.layers import Discretization

    layer = Discretization(bins=[1, 5, 10])
    out = layer(tf.constant([[0.2], [1.6], [4.2], [6.1], [10.9]]))
    assert out.dtype == tf.int64 and layer.num_bins() == 4
    np.testing.assert_array_equal(out.numpy(), [[0], [1], [1], [2], [3]])
    np.testing.assert_array_equal(layer(tf.constant([[1.0, 5.0, 10.0]])).numpy(), [[1, 2, 3]])
    np.testing.assert_array_equal(layer(tf.constant([[0, 7]], tf.int64)).numpy(), [[0, 2]])
    ragged = tf.ragged.constant([[0.2, 1.6, 4.2], [6.1], [10.9]])
    expected = tf.ragged.constant([[0, 1, 1], [2], [3]], dtype=tf.int64)
    ragged_equal(layer(ragged), expected)
    sparse_equal(layer(ragged.to_sparse()), expected.to_sparse())
    raises(ValueError, lambda: Discretization(bins=[5, 1]))


def check_normalizer() -> None:
    from elasticdl_preprocessing.layers import Normalizer

    layer = Normalizer(1.0, 2.0)
    out = layer(tf.constant([[5.0], [7.0], [9.0], [11.0], [13.0]]))
    np.testing.assert_array_equal(out.numpy(), [[2.0], [3.0], [4.0], [5.0], [6.0]])
    np.testing.assert_array_equal(layer(tf.constant([[3]], tf.int64)).numpy(), [[1.0]])
    ragged = tf.ragged.constant([[5.0, 7.0], [9.0]])
    expected = tf.ragged.constant([[2.0, 3.0], [4.0]], dtype=tf.float32)
    ragged_equal(layer(ragged), expected)
    sparse_equal(layer(ragged.to_sparse()), expected.to_sparse())
    inputs = keras().Input(shape=(1,), dtype="float32")
    model = keras().Model(inputs, Normalizer(1.0, 2.0)(inputs))
    np.testing.assert_array_equal(model(tf.constant([[5.0], [13.0]])).numpy(), [[2.0], [6.0]])
    raises(ValueError, lambda: Normalizer(1.0, 0))


def _check_lookup(layer: object) -> None:
    out = layer(tf.constant([["A"], ["B"], ["C"], ["D"], ["E"]]))
    assert out.dtype == tf.int64
    np.testing.assert_array_equal(out.numpy(), [[0], [1], [2], [3], [3]])
    ragged = tf.ragged.constant([["A", "B", "C"], ["D", "E"]])
    expected = tf.ragged.constant([[0, 1, 2], [3, 3]], dtype=tf.int64)
    ragged_equal(layer(ragged), expected)
    sparse_equal(layer(ragged.to_sparse()), expected.to_sparse())


def check_index_lookup() -> None:
    from elasticdl_preprocessing.layers import IndexLookup

    layer = IndexLookup(vocabulary=["A", "B", "C"])
    _check_lookup(layer)
    assert layer.vocab_size() == 4
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vocab.txt"
        path.write_text("A\nB \nC\n")
        _check_lookup(IndexLookup(vocabulary=str(path)))
        path.write_text("A\nB\nA\n")
        raises(ValueError, lambda: IndexLookup(vocabulary=str(path)))
    inputs = keras().Input(shape=(1,), dtype="string")
    model = keras().Model(inputs, IndexLookup(vocabulary=["A", "B", "C"])(inputs))
    out = model(tf.constant([["A"], ["C"], ["B"], ["D"], ["E"]])).numpy()
    np.testing.assert_array_equal(out, [[0], [2], [1], [3], [3]])
    two = IndexLookup(vocabulary=["A"], num_oov_tokens=2)(tf.constant([["x"], ["y"], ["z"]]))
    assert set(two.numpy().ravel()) <= {1, 2} and two.numpy().max() <= 2
    none = IndexLookup(vocabulary=["A"], num_oov_tokens=0)(tf.constant([["A"], ["x"]]))
    np.testing.assert_array_equal(none.numpy(), [[0], [-1]])


def check_log_round() -> None:
    from elasticdl_preprocessing.layers import LogRound

    layer = LogRound(num_bins=20, base=2)
    out = layer(tf.constant([[0.0], [2.6], [0.2], [3.1], [1024]]))
    assert out.dtype == tf.int64
    np.testing.assert_array_equal(out.numpy(), [[0], [1], [0], [2], [10]])
    ragged = tf.ragged.constant([[1.1, 3.4], [1025]])
    expected = tf.ragged.constant([[0, 2], [10]], dtype=tf.int64)
    ragged_equal(layer(ragged), expected)
    sparse_equal(layer(ragged.to_sparse()), expected.to_sparse())
    docstring = LogRound(num_bins=16, base=2)(tf.constant([[1.2], [1.6], [0.2], [3.1], [100]]))
    np.testing.assert_array_equal(docstring.numpy(), [[0], [1], [0], [2], [7]])
    small = LogRound(num_bins=5, default_value=4, base=2)(tf.constant([[1024.0], [-3.0], [4.0]]))
    np.testing.assert_array_equal(small.numpy(), [[4], [4], [2]])
    natural = LogRound(num_bins=10)(tf.constant([[np.e**3]])).numpy()
    np.testing.assert_array_equal(natural, [[3]])


def check_round_identity() -> None:
    from elasticdl_preprocessing.layers import RoundIdentity

    layer = RoundIdentity(num_buckets=10)
    out = layer(tf.constant([[1.2], [1.6], [0.2], [3.1], [4.9]]))
    assert out.dtype == tf.int64
    np.testing.assert_array_equal(out.numpy(), [[1], [2], [0], [3], [5]])
    ragged = tf.ragged.constant([[1.1, 3.4], [0.5]])
    expected = tf.ragged.constant([[1, 3], [0]], dtype=tf.int64)
    ragged_equal(layer(ragged), expected)
    sparse_equal(layer(ragged.to_sparse()), expected.to_sparse())
    outside = RoundIdentity(num_buckets=5, default_value=0)(tf.constant([[4.9], [-1.0], [2.0]]))
    np.testing.assert_array_equal(outside.numpy(), [[0], [0], [2]])


def check_to_number() -> None:
    from elasticdl_preprocessing.layers import ToNumber

    ints = ToNumber(out_type=tf.int32, default_value=-1)
    out = ints(tf.constant([["123", ""], ["456", "-789"]]))
    assert out.dtype == tf.int32
    np.testing.assert_array_equal(out.numpy(), [[123, -1], [456, -789]])
    floats = ToNumber(out_type=tf.float32, default_value=0.0)
    out = floats(tf.constant([["123.1", ""], ["456", "-789.987"]]))
    expected = tf.constant([[123.1, 0.0], [456.0, -789.987]], tf.float32)
    assert out.dtype == tf.float32
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    indices = [[0, 2], [2, 1], [2, 3], [5, 4]]
    sparse = tf.SparseTensor(indices, tf.constant(["123", "", "456", "-789"]), [6, 5])
    expected_sparse = tf.SparseTensor(indices, tf.constant([123, -1, 456, -789], tf.int32), [6, 5])
    sparse_equal(ints(sparse), expected_sparse)
    np.testing.assert_array_equal(floats(tf.constant([[2]], tf.int64)).numpy(), [[2.0]])
    raises(ValueError, lambda: ToNumber(out_type=tf.string, default_value=""))


def check_to_ragged() -> None:
    from elasticdl_preprocessing.layers import ToRagged

    ints = ToRagged()(tf.constant([[1], [-1], [4]], tf.int64))
    ragged_equal(ints, tf.ragged.constant([[1], [], [4]], tf.int64))
    strings = ToRagged()(tf.ragged.constant([["1", "2", "3"], ["4", "5"], [""]]))
    ragged_equal(strings, tf.ragged.constant([["1", "2", "3"], ["4", "5"], []]))
    split = ToRagged()(tf.constant([["1,2,3"], ["4,5"], [""]]))
    ragged_equal(split, tf.ragged.constant([["1", "2", "3"], ["4", "5"], []]))
    whole = ToRagged(sep=None)(tf.constant([["1,2"], [""]]))
    ragged_equal(whole, tf.ragged.constant([["1,2"], []]))
    summed = tf.reduce_sum(ToRagged(ignore_value=-1)(tf.constant([[1], [-1], [4]])))
    assert int(summed) == 5
    floats = ToRagged()(tf.constant([[0.5, -1.0]]))
    ragged_equal(floats, tf.ragged.constant([[0.5, -1.0]]))


def check_to_sparse() -> None:
    from elasticdl_preprocessing.layers import ToSparse

    out = ToSparse()(tf.constant([["A", ""], ["B", "C"]], tf.string))
    sparse_equal(
        out, tf.SparseTensor([[0, 0], [1, 0], [1, 1]], tf.constant(["A", "B", "C"]), [2, 2])
    )
    out = ToSparse()(tf.constant([[12, -1], [45, 78]], tf.int64))
    sparse_equal(
        out, tf.SparseTensor([[0, 0], [1, 0], [1, 1]], tf.constant([12, 45, 78], tf.int64), [2, 2])
    )
    out = ToSparse()(tf.constant([[0.0, 1.5]]))
    sparse_equal(out, tf.SparseTensor([[0, 1]], tf.constant([1.5]), [1, 2]))
    inputs = keras().Input(shape=(1,), dtype="int32")
    model = keras().Model(inputs, ToSparse(ignore_value=-1)(inputs))
    out = model(tf.constant([[1], [-1], [2], [3]]))
    sparse_equal(
        out, tf.SparseTensor([[0, 0], [2, 0], [3, 0]], tf.constant([1, 2, 3], tf.int32), [4, 1])
    )
    already = tf.SparseTensor([[0, 0]], tf.constant([7], tf.int64), [1, 3])
    assert ToSparse()(already) is already


def check_concatenate_with_offset() -> None:
    from elasticdl_preprocessing.layers import ConcatenateWithOffset

    layer = ConcatenateWithOffset(offsets=[0, 10], axis=1)
    out = layer([tf.constant([[1], [1], [1]]), tf.constant([[2], [2], [2]])])
    np.testing.assert_array_equal(out.numpy(), [[1, 12], [1, 12], [1, 12]])
    first = tf.ragged.constant([[1], [], [1]], dtype=tf.int64)
    second = tf.ragged.constant([[2], [2], []], dtype=tf.int64)
    ragged_equal(layer([first, second]), tf.ragged.constant([[1, 12], [12], [1]], tf.int64))
    expected = tf.SparseTensor(
        [[0, 0], [0, 1], [1, 1], [2, 0]], tf.constant([1, 12, 12, 1], tf.int64), [3, 2]
    )
    sparse_equal(layer([first.to_sparse(), second.to_sparse()]), expected)
    plain = ConcatenateWithOffset(offsets=None)([tf.constant([[1]]), tf.constant([[2]])])
    np.testing.assert_array_equal(plain.numpy(), [[1, 2]])
    raises(ValueError, lambda: ConcatenateWithOffset([0])([tf.constant([[1]])] * 2))
    raises(TypeError, lambda: layer([first.to_sparse(), tf.constant([[2], [2], [2]], tf.int64)]))


def _mean_rows(table: np.ndarray, rows: list[list[int]]) -> np.ndarray:
    return np.stack([table[r].mean(0) if r else np.zeros(table.shape[1]) for r in rows])


def check_sparse_embedding() -> None:
    from elasticdl.runtime.embedding.lookup import TableLookup
    from elasticdl_preprocessing.layers import SparseEmbedding

    ids = tf.ragged.constant([[1, 3], [2], [], [4, -1]], dtype=tf.int64).to_sparse()
    small = SparseEmbedding(input_dim=8, output_dim=3)
    assert not small.on_ps
    out = small(ids).numpy()
    table = np.asarray(small.embeddings.numpy())
    np.testing.assert_allclose(out, _mean_rows(table, [[1, 3], [2], [], [4]]), rtol=1e-6)
    assert np.abs(table).max() <= 0.05  # Keras's uniform(-0.05, 0.05)
    summed = SparseEmbedding(input_dim=8, output_dim=3, combiner="sum")
    total = summed(ids).numpy()
    np.testing.assert_allclose(total[0], summed.embeddings.numpy()[[1, 3]].sum(0), rtol=1e-6)
    dense = small(tf.constant([[1, 3], [2, 0]], tf.int64)).numpy()  # 0 is padding in dense ids
    np.testing.assert_allclose(dense[1], table[2], rtol=1e-6)

    large = SparseEmbedding(input_dim=1 << 20, output_dim=4, combiner="sqrtn")
    assert large.on_ps and isinstance(large.table, TableLookup)
    unbounded = SparseEmbedding(input_dim=None, output_dim=4)
    assert unbounded.on_ps
    got = large(ids).numpy()
    rows = large.table.local_table().lookup(np.array([1, 3, 2, 4], np.int64))
    np.testing.assert_allclose(got[0], (rows[0] + rows[1]) / np.sqrt(2), rtol=1e-5)
    np.testing.assert_allclose(got[2], np.zeros(4))
    np.testing.assert_allclose(got[3], rows[3], rtol=1e-5)
    raises(ValueError, lambda: SparseEmbedding(input_dim=0, output_dim=4, on_ps=False))
    raises(ValueError, lambda: SparseEmbedding(input_dim=8, output_dim=4, combiner="max"))


def check_sparse_embedding_tables_have_the_same_names_in_every_build() -> None:
    """Processes build a model several times (master, workers, exports): the PS tables of its
    SparseEmbeddings must be named alike each time, whatever Keras's layer counters say."""
    from elasticdl.runtime.embedding.tables import embedding_layers
    from elasticdl_preprocessing.layers import SparseEmbedding

    def build() -> list[str]:
        k = keras()
        ids = k.Input(shape=(2,), dtype="int64")
        wide = SparseEmbedding(None, 1, combiner="sum")(ids)
        deep = SparseEmbedding(None, 3)(ids)
        return sorted(embedding_layers(k.Model(ids, k.layers.Concatenate()([wide, deep]))))

    first = build()
    assert first == build() == ["e000/sparse_embedding_table", "e001/sparse_embedding_table"]


def check_a_functional_model_of_every_layer() -> None:
    """Criteo-like columns through the layers into one model of this process's Keras."""
    from elasticdl_preprocessing.layers import (
        ConcatenateWithOffset,
        Discretization,
        Hashing,
        IndexLookup,
        LogRound,
        Normalizer,
        SparseEmbedding,
        ToNumber,
        ToSparse,
    )

    k = keras()
    count = k.Input(shape=(1,), dtype="int64", name="I1")
    text = k.Input(shape=(1,), dtype="string", name="C1")
    kind = k.Input(shape=(1,), dtype="string", name="C2")
    raw = k.Input(shape=(1,), dtype="string", name="N1")
    numbers = ToNumber(tf.float32, 0.0)(raw)
    ids = ConcatenateWithOffset([0, 4, 10, 40])(
        [
            ToSparse()(Discretization([0, 1, 5])(count)),
            ToSparse()(LogRound(6, base=2)(numbers)),
            Hashing(30)(ToSparse()(text)),
            IndexLookup(["a", "b"])(ToSparse()(kind)),
        ]
    )
    embedded = SparseEmbedding(input_dim=43, output_dim=4)(ids)
    joined = k.layers.Concatenate()([embedded, Normalizer(2.0, 4.0)(count)])
    model = k.Model([count, text, kind, raw], k.layers.Dense(1)(joined))
    batch = [
        tf.constant([[0], [7]], tf.int64),
        tf.constant([["x"], [""]]),
        tf.constant([["a"], ["z"]]),
        tf.constant([["8"], [""]]),
    ]
    assert model(batch).shape == (2, 1)


def _columns() -> tuple[object, object, object]:
    fc = tf.feature_column
    user = fc.categorical_column_with_identity("user_id", num_buckets=32)
    item = fc.categorical_column_with_identity("item_id", num_buckets=128)
    return user, item, fc


def check_feature_column_properties() -> None:
    import copy

    from elasticdl_preprocessing.feature_column.feature_column import (
        concatenated_categorical_column,
    )

    fc = tf.feature_column
    a = fc.categorical_column_with_hash_bucket("aaa", hash_bucket_size=1024)
    b = fc.categorical_column_with_identity("bbb", num_buckets=32)
    c = fc.bucketized_column(fc.numeric_column("ccc", dtype=tf.int32), boundaries=[1, 2, 3, 4, 5])
    column = concatenated_categorical_column([a, b, c])
    assert column.name == "aaa_C_bbb_C_ccc_bucketized"
    assert column.num_buckets == 1024 + 32 + 6 and column.offsets == [0, 1024, 1056]
    assert column._is_v2_column
    assert column.parse_example_spec == {
        "aaa": tf.io.VarLenFeature(tf.string),
        "bbb": tf.io.VarLenFeature(tf.int64),
        "ccc": tf.io.FixedLenFeature((1,), tf.int32),
    }
    copied = copy.deepcopy(column)
    assert copied.name == column.name and copied.num_buckets == column.num_buckets
    again = type(column).from_config(column.get_config())
    assert again.name == column.name and again.num_buckets == column.num_buckets
    raises(ValueError, lambda: concatenated_categorical_column([]))
    raises(ValueError, lambda: concatenated_categorical_column([fc.numeric_column("x")]))


def keras2_check_feature_column_in_dense_features() -> None:
    from elasticdl_preprocessing.feature_column.feature_column import (
        concatenated_categorical_column,
    )

    user, item, fc = _columns()
    both = concatenated_categorical_column([user, item])
    dense = keras().layers.DenseFeatures([fc.indicator_column(both)])
    out = dense({"user_id": [10, 20], "item_id": [1, 120]}).numpy()
    expected = tf.one_hot([10, 20], depth=160) + tf.one_hot([1 + 32, 120 + 32], depth=160)
    np.testing.assert_array_equal(out, expected.numpy())
    embedded = keras().layers.DenseFeatures([fc.embedding_column(both, dimension=3)])
    assert embedded({"user_id": [[1]], "item_id": [[2]]}).shape == (1, 3)


def keras2_check_a_sequential_on_a_dict_of_features_exports() -> None:
    """ElasticDL's census_sequential: a Sequential whose first layer is DenseFeatures, called on
    a dict of features, has no `inputs`; its SavedModel still serves it."""
    from elasticdl.runtime.master.export import export_saved_model

    k, fc = keras(), tf.feature_column
    kind = fc.categorical_column_with_vocabulary_list("kind", ["a", "b"])
    columns = [fc.numeric_column("age"), fc.embedding_column(kind, dimension=2)]
    model = k.Sequential([k.layers.DenseFeatures(columns), k.layers.Dense(1)])
    features = {"age": tf.constant([[30.0], [60.0]]), "kind": tf.constant([["a"], ["b"]])}
    expected = model(features).numpy()
    assert model.inputs is None
    with tempfile.TemporaryDirectory() as tmp:
        export_saved_model(model, {}, features, Path(tmp) / "saved_model")
        loaded = tf.saved_model.load(str(Path(tmp) / "saved_model"))
        served = loaded.serve(features)
    np.testing.assert_allclose(served.numpy(), expected, rtol=1e-6)


def check_callbacks_are_this_kerases() -> None:
    from elasticdl.python.elasticdl.callbacks import LearningRateScheduler, MaxStepsStopping

    for callback in (LearningRateScheduler(lambda v: 0.1), MaxStepsStopping(3)):
        assert isinstance(callback, keras().callbacks.Callback)


def keras2_check_learning_rate_scheduler_in_fit() -> None:
    from elasticdl.python.elasticdl.callbacks import LearningRateScheduler

    k = keras()
    model = k.Sequential([k.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer=tf.optimizers.SGD(0.1), loss="mse")
    schedule = LearningRateScheduler(lambda version: 0.5 if version < 2 else 0.01)
    x, y = np.ones((12, 2), np.float32), np.ones((12, 1), np.float32)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[schedule])
    assert int(model.optimizer.iterations.numpy()) == 3
    np.testing.assert_allclose(float(model.optimizer.learning_rate.numpy()), 0.01, rtol=1e-6)


def keras2_check_ps_embedding_among_tf_ops() -> None:
    from elasticdl.layers import Embedding
    from elasticdl.python.elasticdl.layers.embedding import Embedding as V02

    k = keras()
    assert V02 is Embedding and issubclass(Embedding, k.layers.Layer)
    inputs = k.Input(shape=(3,))  # float ids, as ElasticDL's deepfm files feed them
    layer = Embedding(output_dim=2, mask_zero=True, name="edl")
    vectors = layer(inputs)
    model = k.Model(inputs, [vectors, k.backend.sum(tf.square(vectors), axis=1)])
    ids = np.array([[1.0, 2.0, 0.0]], np.float32)
    out, squares = model(ids)
    rows = layer.local_table().lookup(np.array([1, 2, 0], np.int64))
    np.testing.assert_allclose(out.numpy()[0], rows, rtol=1e-6)
    np.testing.assert_allclose(squares.numpy()[0], (rows**2).sum(0), rtol=1e-5)
    np.testing.assert_array_equal(layer.compute_mask(tf.constant(ids)).numpy(), [[1, 1, 0]])
    mean = Embedding(output_dim=2, combiner="mean", name="m")
    np.testing.assert_allclose(
        mean(tf.constant([[1, 2]])).numpy()[0],
        mean.local_table().lookup(np.array([1, 2], np.int64)).mean(0),
        rtol=1e-6,
    )
    assert Embedding.from_config(layer.get_config()).mask_zero
    weights = len(model.weights)
    layer.set_trained_rows(np.array([2, 7]), np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert len(model.weights) == weights  # served rows are no model weights (the PS has none)
    served, _ = model(np.array([[7.0, 2.0, 5.0]], np.float32))
    np.testing.assert_array_equal(served.numpy()[0], [[3, 4], [1, 2], [0, 0]])


CHECKS = {n: f for n, f in sorted(globals().items()) if n.startswith("check_") and callable(f)}
KERAS2_CHECKS = {
    n: f for n, f in sorted(globals().items()) if n.startswith("keras2_check_") and callable(f)
}


def checks_of_this_keras() -> dict[str, Callable[[], None]]:
    if keras_mode.current() == keras_mode.KERAS2:
        return {**CHECKS, **KERAS2_CHECKS}
    return dict(CHECKS)


def main() -> int:
    """Run every check of this process's Keras; one line per check; exit 1 if any failed."""
    failed = 0
    for name, check in checks_of_this_keras().items():
        try:
            check()
        except Exception:  # noqa: BLE001 - report every failure, then fail
            failed += 1
            last = traceback.format_exc().strip().splitlines()[-1]
            print(f"FAIL {name}: {last}", flush=True)
            traceback.print_exc()
        else:
            print(f"PASS {name}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
