"""Every built-in zoo model builds, parses its records, trains, and the table DNNs converge.

The zoo is imported the way the model-zoo loader imports it: the zoo root (the installed
`elasticdl.model_zoo` folder) on sys.path, so `mnist`, `regressor`, ... are top-level packages.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2

import elasticdl.model_zoo
from elasticdl import Mode
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.data.recordio import read_records

ZOO = Path(elasticdl.model_zoo.__file__).parent


@pytest.fixture(scope="module", autouse=True)
def zoo_on_path():
    sys.path.insert(0, str(ZOO))
    try:
        yield
    finally:
        sys.path.remove(str(ZOO))


def load(dotted: str):
    module_name, _, symbol = dotted.rpartition(".")
    module = importlib.import_module(module_name)
    assert Path(module.__file__).is_relative_to(ZOO)
    return module, getattr(module, symbol)


def as_dataset(records: list[bytes]) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(tf.constant(records, dtype=tf.string))


def without_label(records: list[bytes]) -> list[bytes]:
    out = []
    for record in records:
        example = example_pb2.Example.FromString(record)
        del example.features.feature["label"]
        out.append(example.SerializeToString())
    return out


def labels_of(records: list[bytes]) -> list[int]:
    return [
        example_pb2.Example.FromString(r).features.feature["label"].int64_list.value[0]
        for r in records
    ]


@pytest.fixture(scope="module")
def digit_records(tmp_path_factory) -> list[bytes]:
    """48 digits records, written with generate() and read back from the RecordIO files."""
    out = tmp_path_factory.mktemp("digits")
    files = gen.generate("digits", str(out), 48, records_per_file=20)
    return [r for path in files for r in read_records(path)]


@pytest.fixture(scope="module")
def cifar_records() -> list[bytes]:
    return list(gen.examples("cifar10-synthetic", 32))


def fit_batch(model, loss_fn, optimizer, features, labels, steps: int) -> list[float]:
    """Eager training steps on one batch; returns the loss before each step."""
    losses = []
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        variables = model.trainable_variables
        grads = tape.gradient(loss, variables)
        assert all(g is not None for g in grads), "every trainable variable gets a gradient"
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        losses.append(float(loss))
    return losses


IMAGE_MODELS = [
    ("mnist.mnist_functional_api.custom_model", "digits", 0.01),
    ("mnist.mnist_subclass.CustomModel", "digits", 0.01),
    ("mnist.mnist_v02.custom_model", "digits", 0.01),
    ("cifar10.cifar10_functional_api.custom_model", "cifar", 0.01),
    ("cifar10.cifar10_subclass.CustomModel", "cifar", 0.01),
]


# The v0.2 file's single (non-dict) Keras input receives {"image": ...}; Keras 3 matches it
# but warns about the structure. Expected for unchanged v0.2 files.
@pytest.mark.filterwarnings("ignore:The structure of `inputs`:UserWarning")
@pytest.mark.parametrize(("model_def", "data", "lr"), IMAGE_MODELS)
def test_module_function_models_train(model_def, data, lr, digit_records, cifar_records):
    tf.keras.utils.set_random_seed(1)
    records = digit_records if data == "digits" else cifar_records
    module, symbol = load(model_def)
    model = symbol()
    assert isinstance(model, tf.keras.Model)

    dataset = module.dataset_fn(as_dataset(records), Mode.TRAINING, None)
    features, labels = next(iter(dataset.batch(16)))
    shape = (16, 28, 28) if data == "digits" else (16, 32, 32, 3)
    assert set(features) == {"image"} and tuple(features["image"].shape) == shape
    assert float(tf.reduce_min(features["image"])) >= 0.0
    assert float(tf.reduce_max(features["image"])) <= 1.0
    assert labels.shape == (16, 1) and labels.dtype == tf.int32

    predictions = model(features, training=False)
    assert predictions.shape == (16, 10)
    before = [v.numpy().copy() for v in model.trainable_variables]
    losses = fit_batch(model, module.loss, module.optimizer(lr=lr), features, labels, steps=8)
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.8 * losses[0], losses
    after = [v.numpy() for v in model.trainable_variables]
    assert all(not np.array_equal(b, a) for b, a in zip(before, after, strict=True))

    metrics = module.eval_metrics_fn()
    assert set(metrics) == {"accuracy"}
    values = np.asarray(metrics["accuracy"](labels, model(features, training=False)), np.float32)
    assert values.shape == (16,) and set(np.unique(values)) <= {0.0, 1.0}


@pytest.mark.parametrize(("model_def", "data", "lr"), IMAGE_MODELS)
def test_image_pipelines_keep_order_outside_training(model_def, data, lr, digit_records):
    module, _ = load(model_def)
    records = digit_records if data == "digits" else list(gen.examples("cifar10-synthetic", 20))
    evaluation = module.dataset_fn(as_dataset(records), Mode.EVALUATION, None)
    got = [int(label[0]) for _, label in evaluation]
    assert got == labels_of(records)

    # Prediction records need no label; features come alone, in order.
    prediction = module.dataset_fn(as_dataset(without_label(records)), Mode.PREDICTION, None)
    first = next(iter(prediction))
    assert isinstance(first, dict) and set(first) == {"image"}
    assert sum(1 for _ in prediction) == len(records)


def test_v02_file_is_in_v02_style():
    source = (ZOO / "mnist" / "mnist_v02.py").read_text()
    assert "from elasticdl.python.common.constants import Mode" in source
    assert "def dataset_fn(dataset, mode, _):" in source
    module, _ = load("mnist.mnist_v02.custom_model")
    assert module.optimizer().learning_rate.numpy() == pytest.approx(0.01)


def test_mnist_spec_trains(digit_records):
    tf.keras.utils.set_random_seed(2)
    from elasticdl import ElasticDLSpec

    _, spec_class = load("mnist.mnist_spec.MnistSpec")
    spec = spec_class(context=None, dropout_rate=0.1)
    assert isinstance(spec, ElasticDLSpec)
    model = spec.create_model()
    dataset = spec.create_dataset(as_dataset(digit_records), Mode.TRAINING)
    features, labels = next(iter(dataset.batch(16)))

    def loss_fn(labels, outputs):
        return spec.create_loss(outputs=outputs, labels=labels)

    optimizer = spec.create_optimizer(lr=0.01)
    assert optimizer.learning_rate.numpy() == pytest.approx(0.01)
    losses = fit_batch(model, loss_fn, optimizer, features, labels, steps=8)
    assert losses[-1] < 0.8 * losses[0], losses
    assert spec.create_metrics(mode=Mode.TRAINING) == {}
    metrics = spec.create_metrics(mode=Mode.EVALUATION)
    assert metrics["accuracy"](labels, model(features)).shape == (16,)


def test_subclass_models_round_trip_their_config():
    _, cifar = load("cifar10.cifar10_subclass.CustomModel")
    model = cifar(filters=[8, 16], dropout_rate=0.1)
    clone = cifar.from_config(model.get_config())
    assert clone.filters == (8, 16) and clone.dropout_rate == pytest.approx(0.1)
    assert clone(tf.zeros([2, 32, 32, 3])).shape == (2, 10)


# --------------------------------------------------------------------------- table DNNs


def table_records(name: str, num: int, seed: int) -> tuple[list[bytes], DatasetMetadata]:
    records = list(gen.examples(name, num, seed=seed))
    return records, DatasetMetadata.from_example(records[0])


def train_table_model(model, records, metadata, steps: int, batch: int = 64) -> None:
    """`steps` compiled training steps with the model's own input, loss and optimizer."""
    dataset = model.default_input(as_dataset(records), Mode.TRAINING, metadata)
    optimizer = model.default_optimizer()

    @tf.function
    def step(features, labels):
        with tf.GradientTape() as tape:
            loss = model.default_loss(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    for features, labels in dataset.repeat().batch(batch).take(steps):
        step(features, labels)


def evaluate(model, records, metadata) -> dict[str, float]:
    dataset = model.default_input(as_dataset(records), Mode.EVALUATION, metadata).batch(256)
    sums: dict[str, float] = {}
    count = 0
    for features, labels in dataset:
        predictions = model(features, training=False)
        for name, fn in model.default_metrics().items():
            values = tf.cast(fn(labels, predictions), tf.float32)
            sums[name] = sums.get(name, 0.0) + float(tf.reduce_sum(values))
        count += int(labels.shape[0])
    return {name: total / count for name, total in sums.items()}


def test_regressor_dnn_learns_the_regression_table():
    tf.keras.utils.set_random_seed(3)
    _, dnn = load("regressor.DNN")
    train, metadata = table_records("regression", 2048, seed=0)
    test, _ = table_records("regression", 512, seed=1)
    assert list(metadata.feature_columns()) == [f"x{i}" for i in range(8)]
    model = dnn(hidden_units=[32, 16], learning_rate=0.01)
    train_table_model(model, train, metadata, steps=300)
    result = evaluate(model, test, metadata)
    # x is standard normal, so the label variance is |w|^2 + noise^2 (about 23).
    variance = float(np.sum(np.square(gen.REGRESSION_WEIGHTS))) + gen.REGRESSION_NOISE_STD**2
    assert result["mse"] < 0.05 * variance, result
    assert result["mae"] ** 2 <= result["mse"] + 1e-6


def test_linear_regressor_recovers_the_weights():
    tf.keras.utils.set_random_seed(4)
    _, dnn = load("regressor.DNN")
    train, metadata = table_records("regression", 2048, seed=0)
    model = dnn(hidden_units=[], learning_rate=0.05)
    train_table_model(model, train, metadata, steps=400)
    kernel, bias = (v.numpy() for v in model.trainable_variables)
    np.testing.assert_allclose(kernel[:, 0], gen.REGRESSION_WEIGHTS, atol=0.05)
    assert bias[0] == pytest.approx(gen.REGRESSION_BIAS, abs=0.05)


def test_regressor_infers_columns_without_metadata_and_predicts_without_label():
    _, dnn = load("regressor.DNN")
    records, _ = table_records("regression", 10, seed=0)
    model = dnn(hidden_units=[4])
    features, labels = next(iter(model.default_input(as_dataset(records), Mode.TRAINING).batch(10)))
    assert features["dense"].shape == (10, 8) and labels.dtype == tf.float32
    unlabelled = without_label(records)
    metadata = DatasetMetadata.from_example(unlabelled[0])
    prediction = model.default_input(as_dataset(unlabelled), Mode.PREDICTION, metadata)
    batch = next(iter(prediction.batch(10)))
    assert set(batch) == {"dense"} and model(batch).shape == (10, 1)
    # Order is kept outside training: the dense inputs are the records' x0..x7 in order.
    first = example_pb2.Example.FromString(records[0]).features.feature
    np.testing.assert_allclose(
        batch["dense"][0].numpy(), [first[f"x{i}"].float_list.value[0] for i in range(8)]
    )


def test_classifier_dnn_learns_the_classification_table():
    tf.keras.utils.set_random_seed(5)
    _, dnn = load("classifier.DNN")
    train, metadata = table_records("classification", 2048, seed=0)
    test, _ = table_records("classification", 512, seed=1)
    model = dnn(hidden_units=[16], n_classes=2, learning_rate=0.01)
    train_table_model(model, train, metadata, steps=200)
    assert evaluate(model, test, metadata)["accuracy"] > 0.93


def make_example(**columns) -> bytes:
    example = example_pb2.Example()
    for name, value in columns.items():
        feature = example.features.feature[name]
        if isinstance(value, bytes):
            feature.bytes_list.value.append(value)
        elif isinstance(value, float):
            feature.float_list.value.append(value)
        else:
            feature.int64_list.value.append(value)
    return example.SerializeToString()


def test_classifier_embeds_string_columns():
    tf.keras.utils.set_random_seed(6)
    _, dnn = load("classifier.DNN")
    rng = np.random.default_rng(0)
    colours = [b"red", b"green", b"blue"]
    records = []
    for i in range(600):
        c = int(rng.integers(0, 3))
        records.append(make_example(id=i, colour=colours[c], noise=float(rng.normal()), label=c))
    metadata = DatasetMetadata.from_example(records[0])
    assert metadata.columns["colour"].kind == "bytes"
    model = dnn(hidden_units=[8], n_classes=3, learning_rate=0.05, hash_buckets=50)
    features, _ = next(iter(model.default_input(as_dataset(records), Mode.TRAINING, metadata)))
    assert features["categorical"].dtype == tf.int64 and features["dense"].shape == (1,)
    train_table_model(model, records, metadata, steps=60, batch=32)
    assert evaluate(model, records, metadata)["accuracy"] > 0.95


@pytest.mark.parametrize(
    ("count", "distinct", "min_distinct", "on_ps"),
    [
        (10_000, 1_000, 1000, True),  # many values, each seen 10 times
        (10_000, 999, 1000, False),  # too few values: the shared table holds them
        (2_000, 1_000, 1000, True),  # each value twice on average
        (1_999, 1_000, 1000, False),  # mostly unique (a name, a key): hashed
        (3_000, 3_000, 1000, False),  # unique
        (2_400, 300, 300, True),  # the threshold is a parameter
        (10_000, 5_000, 0, False),  # 0: never
        (0, 0, 1000, False),  # no statistics (data not from SQL)
    ],
)
def test_which_text_columns_go_to_the_parameter_servers(count, distinct, min_distinct, on_ps):
    from zoo_common.tabular import goes_to_ps

    stats = {"count": count, "distinct_estimate": distinct} if count else {}
    assert goes_to_ps(stats, min_distinct) is on_ps


def test_text_columns_with_many_repeated_values_are_embedded_on_the_ps():
    """With the SQL statistics of a 1,200-value column, the column's ids are 63-bit hashes
    under "sparse" and the model has one PS table; without statistics it stays hashed."""
    from elasticdl.runtime.embedding.tables import embedding_layers

    _, dnn = load("classifier.DNN")
    records = [make_example(item=f"v{i % 1200}".encode(), x=1.0, label=i % 2) for i in range(8)]
    plain = DatasetMetadata.from_example(records[0])
    stats = {"item": {"count": 5000, "distinct_estimate": 1200}, "x": {"count": 5000}}
    schema = {"columns": [{"name": n, "stats": s} for n, s in stats.items()], "label": "label"}
    from_sql = DatasetMetadata(plain.columns, "label", schema)
    for metadata, key in ((from_sql, "sparse"), (plain, "categorical")):
        model = dnn(hidden_units=[4])
        dataset = model.default_input(as_dataset(records), Mode.PREDICTION, metadata)
        features = next(iter(dataset.batch(8)))
        assert set(features) == {"dense", key}
        model(features)
        assert len(embedding_layers(model)) == (key == "sparse")
        if key == "sparse":
            assert int(tf.reduce_max(features["sparse"])) >= 1000  # not a bucket of 1000


def test_table_models_explain_bad_input():
    _, classifier = load("classifier.DNN")
    _, regressor = load("regressor.DNN")
    with pytest.raises(ValueError, match="n_classes"):
        classifier(n_classes=1)
    with pytest.raises(ValueError, match="hidden_units"):
        regressor(hidden_units=[8, 0])
    no_label = [make_example(x0=1.0, x1=2.0)]
    metadata = DatasetMetadata.from_example(no_label[0])
    with pytest.raises(ValueError, match="no label column"):
        regressor().default_input(as_dataset(no_label), Mode.TRAINING, metadata)
    only_label = [make_example(id=1, label=1.0)]
    with pytest.raises(ValueError, match="no feature columns"):
        regressor().default_input(
            as_dataset(only_label), Mode.TRAINING, DatasetMetadata.from_example(only_label[0])
        )


def test_table_dnn_config_round_trip():
    _, dnn = load("classifier.DNN")
    model = dnn(hidden_units=(8, 4), n_classes=3, learning_rate=0.2)
    config = model.get_config()
    assert config["hidden_units"] == [8, 4] and config["n_classes"] == 3
    clone = dnn.from_config(config)
    assert clone.learning_rate == pytest.approx(0.2)
    assert clone.default_optimizer().learning_rate.numpy() == pytest.approx(0.2)


def test_table_records_parsed_in_chunks_come_out_one_by_one_in_order():
    """700 records (a chunk of 512 and a partial one), some features missing: each element is
    what parsing that record alone gives (missing: 0 / ""), in the records' order."""
    from zoo_common.chunks import PARSE_CHUNK
    from zoo_common.tabular import FULL_HASH, parse_table_dataset

    count = PARSE_CHUNK + 188
    colours = [b"red", b"green", b"blue"]
    records = [make_example(id=0, colour=b"red", size=1.5, age=3, label=1.0)]
    for i in range(1, count):
        columns: dict = {"id": i, "label": float(i)}
        if i % 7:
            columns["colour"] = colours[i % 3]
        if i % 5:
            columns["size"] = i / 10
        if i % 3:
            columns["age"] = i
        records.append(make_example(**columns))
    metadata = DatasetMetadata.from_example(records[0])
    dataset = parse_table_dataset(
        as_dataset(records),
        Mode.EVALUATION,
        metadata,
        label_dtype=tf.float32,
        hash_buckets=FULL_HASH,
        model_name="test",
    )
    elements = list(dataset)
    assert len(elements) == count
    order = [c for c in metadata.feature_columns() if c != "colour"]
    for i, (features, label) in enumerate(elements):
        assert label.numpy().tolist() == [1.0 if i == 0 else float(i)]
        expected = {
            "size": 1.5 if i == 0 else (i / 10 if i % 5 else 0.0),
            "age": 3 if i == 0 else (i if i % 3 else 0),
        }
        np.testing.assert_allclose(features["dense"].numpy(), [expected[c] for c in order])
        colour = b"red" if i == 0 else (colours[i % 3] if i % 7 else b"")
        keyed = tf.constant(b"colour=" + colour)
        assert features["categorical"].numpy().tolist() == [
            int(tf.strings.to_hash_bucket_fast(keyed, FULL_HASH))
        ]


def test_image_records_parsed_in_chunks_come_out_one_by_one_in_order(digit_records):
    from zoo_common.images import parse_image_dataset

    records = (digit_records * 12)[:600]  # a chunk of 512 and a partial one
    dataset = parse_image_dataset(as_dataset(records), Mode.EVALUATION, (28, 28))
    elements = list(dataset)
    assert len(elements) == len(records)
    for record, (features, label) in zip(records, elements, strict=True):
        feature = example_pb2.Example.FromString(record).features.feature
        pixels = np.asarray(feature["image"].float_list.value, np.float32).reshape(28, 28)
        np.testing.assert_allclose(features["image"].numpy(), pixels / 255.0, rtol=1e-6)
        assert label.numpy().tolist() == list(feature["label"].int64_list.value)
