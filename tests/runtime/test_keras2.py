"""Keras 2 model files (tf_keras) and the first design document's `input_fn(records)` contract,
with model files written here: the automatic Keras choice, and whole jobs that must learn."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from job_checks import report_of

import elasticdl
from elasticdl.runtime import keras_mode
from elasticdl.runtime.data.recordio import write_records
from elasticdl.runtime.master import keras_switch
from elasticdl.runtime.prediction_output import read_rows
from elasticdl.runtime.records_input import decode

KERAS2_MODEL = """
import tensorflow as tf

from elasticdl.feature_column import feature_column
from elasticdl.python.common.constants import Mode


def custom_model():
    columns = [
        tf.feature_column.numeric_column("x", shape=(2,)),
        feature_column.embedding_column(
            tf.feature_column.categorical_column_with_hash_bucket("c", 64), dimension=4
        ),
    ]
    inputs = {
        "x": tf.keras.Input(shape=(2,), name="x"),
        "c": tf.keras.Input(shape=(1,), name="c", dtype=tf.string),
    }
    hidden = tf.keras.layers.DenseFeatures(columns)(inputs)
    hidden = tf.concat([hidden, tf.square(hidden)], axis=1)  # a TF op on Keras tensors
    logits = tf.keras.layers.Dense(1)(hidden)
    return tf.keras.Model(inputs, tf.sigmoid(logits))


def dataset_fn(dataset, mode, metadata=None):
    spec = {"x": tf.io.FixedLenFeature([2], tf.float32), "c": tf.io.FixedLenFeature([1], tf.string)}
    if mode != Mode.PREDICTION:
        spec["label"] = tf.io.FixedLenFeature([1], tf.float32)

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        features = {"x": parsed["x"], "c": parsed["c"]}
        return features if mode == Mode.PREDICTION else (features, parsed["label"])

    return dataset.map(parse)


def loss(labels, predictions):
    return tf.reduce_mean(tf.keras.losses.binary_crossentropy(labels, predictions))


def optimizer(lr=0.05):
    return tf.keras.optimizers.Adam(lr)


def eval_metrics_fn():
    return {"accuracy": tf.keras.metrics.BinaryAccuracy()}
"""

RAW_OPS_MODEL = """
import tensorflow as tf


def custom_model():
    inputs = tf.keras.Input(shape=(2,), name="x")
    return tf.keras.Model(inputs, tf.keras.layers.Dense(1)(tf.square(inputs)))


def dataset_fn(dataset, mode):
    return dataset


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions))


def optimizer(lr=0.1):
    return tf.keras.optimizers.SGD(lr)
"""

PLAIN_MODEL = RAW_OPS_MODEL.replace("tf.square(inputs)", "inputs")

SQUARES_MODEL = """
import numpy as np
import tensorflow as tf

inputs = tf.keras.Input(shape=(8, 8, 1), name="image")
x = tf.keras.layers.Conv2D(4, kernel_size=(3, 3), activation="relu")(inputs)
x = tf.keras.layers.Flatten()(x)
outputs = tf.keras.layers.Dense(2)(x)
model = tf.keras.Model(inputs=inputs, outputs=outputs, name="squares")


def input_fn(records):
    images, labels = [], []
    for r in records:
        assert isinstance(r["image"], bytes), type(r["image"])
        image = np.frombuffer(r["image"], dtype="uint8").reshape(8, 8).astype(np.float32) / 255
        images.append(image)
        labels.append(r["label"].astype(np.int32))
    return {"image": np.stack(images)}, np.array(labels)


def feature_columns():
    return [tf.feature_column.numeric_column(key="image", dtype=tf.float32, shape=[8, 8, 1])]


def label_columns():
    return [tf.feature_column.numeric_column(key="label", dtype=tf.int64, shape=[1])]


def loss(output, labels):
    labels = tf.reshape(labels, [-1])
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, output))


def optimizer(lr=0.1):
    return tf.keras.optimizers.SGD(lr)


def eval_metrics_fn():
    def accuracy(labels, predictions):
        hit = tf.equal(tf.argmax(predictions, 1), tf.reshape(labels, [-1]))
        return tf.cast(hit, tf.float32)

    return {"accuracy": accuracy}
"""


def _example(**features) -> bytes:
    feature = {}
    for name, value in features.items():
        if isinstance(value, bytes):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        elif np.issubdtype(np.asarray(value).dtype, np.integer):
            ints = np.atleast_1d(value).tolist()
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=ints))
        else:
            floats = np.atleast_1d(value).tolist()
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=floats))
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString()


def category_records(count: int, seed: int) -> list[bytes]:
    """Label 1 for categories a-d (noise in x): learnable only through the embedding."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(count):
        category = "abcdefgh"[rng.integers(8)]
        x = rng.normal(0, 0.3, 2).astype(np.float32)
        label = float(category in "abcd")
        records.append(_example(id=np.int64(i), x=x, c=category.encode(), label=label))
    return records


def square_records(count: int, seed: int) -> list[bytes]:
    """8x8 uint8 images as raw bytes: a bright square on dark (label 1) or a dark one (0)."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(count):
        label = int(rng.integers(2))
        image = rng.integers(0, 60, (8, 8)).astype(np.uint8)
        top, left = rng.integers(0, 5, 2)
        level = (180, 255) if label else (0, 60)
        image[top : top + 4, left : left + 4] = rng.integers(*level, (4, 4))
        records.append(_example(id=np.int64(i), image=image.tobytes(), label=np.int64(label)))
    return records


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("keras2_zoo")
    (root / "keras2_ctr.py").write_text(KERAS2_MODEL)
    (root / "raw_ops.py").write_text(RAW_OPS_MODEL)
    (root / "plain.py").write_text(PLAIN_MODEL)
    (root / "squares.py").write_text(SQUARES_MODEL)
    return root


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import tf_keras\n", ["imports tf_keras"]),
        ("from tensorflow.python.keras import layers\n", ["imports tensorflow.python.keras"]),
        (
            "import tensorflow as tf\nl = tf.keras.layers.DenseFeatures([])\n",
            ["uses the DenseFeatures layer"],
        ),
        (
            "from elasticdl.feature_column import feature_column\n",
            ["imports elasticdl.feature_column"],
        ),
        ("import tensorflow as tf\nc = tf.feature_column.numeric_column('x')\n", []),
        (PLAIN_MODEL, []),
        ("def broken(:\n", []),
    ],
)
def test_keras2_markers_in_a_model_file(source, expected):
    assert keras_mode.markers(source) == expected


@pytest.mark.parametrize(
    ("flag", "markers", "keras3_error", "keras2_builds", "mode"),
    [
        ("2", [], "", False, "2"),
        ("3", ["imports tf_keras"], "", False, "3"),
        ("auto", ["uses the DenseFeatures layer"], "", False, "2"),
        ("auto", [], "", False, "3"),
        ("auto", [], "ValueError: A KerasTensor ...", True, "2"),
        ("auto", [], "NameError: x", False, "3"),
    ],
)
def test_keras_mode_decision_table(flag, markers, keras3_error, keras2_builds, mode):
    assert keras_mode.decide(flag, markers, keras3_error, keras2_builds) == mode


def test_a_file_importing_keras_itself_is_keras3_without_a_probe():
    assert keras_mode.imports_keras3("import keras\nfrom keras import layers\n")
    assert keras_mode.imports_keras3("from keras.layers import Dense\n")
    assert not keras_mode.imports_keras3("import tensorflow as tf\nimport tf_keras\n")


def test_auto_picks_keras2_for_keras2_files_and_keras3_for_a_plain_one(zoo):
    assert keras_switch.resolve("auto", zoo, "keras2_ctr.custom_model", "") == "2"
    assert keras_switch.resolve("auto", zoo, "plain.custom_model", "") == "3"
    assert keras_switch.resolve("auto", zoo, "squares.model", "") == "3"
    # No marker in the source: TF ops on Keras tensors fail under Keras 3, build under Keras 2.
    assert keras_switch.resolve("auto", zoo, "raw_ops.custom_model", "") == "2"
    assert keras_switch.resolve("3", zoo, "keras2_ctr.custom_model", "") == "3"


def test_decoded_records_keep_bytes_as_bytes():
    record = _example(image=b"\x00\xff", label=np.int64(3), x=np.float32([0.5, 1.5]))
    decoded = decode(record)
    assert decoded["image"] == b"\x00\xff"
    assert decoded["label"].dtype == np.int64 and decoded["label"].tolist() == [3]
    np.testing.assert_array_equal(decoded["x"], np.float32([0.5, 1.5]))


@pytest.mark.slow
def test_input_fn_records_model_trains_to_an_accuracy(zoo, tmp_path):
    write_records(tmp_path / "train.recordio", square_records(768, seed=1))
    write_records(tmp_path / "test.recordio", square_records(256, seed=2))
    result = elasticdl.train(
        model_zoo=str(zoo),
        model_def="squares.model",
        data=str(tmp_path / "train.recordio"),
        validation_data=str(tmp_path / "test.recordio"),
        output=str(tmp_path / "model"),
        num_workers=1,
        num_ps=1,
        minibatch_size=32,
        records_per_task=128,
        num_epochs=2,
        intra_op_threads=1,
    )
    assert result.succeeded, result.error
    report = report_of(tmp_path / "model")
    assert report["metrics"]["accuracy"] > 0.95, json.dumps(report["metrics"])


@pytest.mark.slow
def test_keras2_feature_column_model_trains_on_2_workers_2_ps_and_predicts(zoo, tmp_path):
    train, test = tmp_path / "train.recordio", tmp_path / "test.recordio"
    write_records(train, category_records(2048, seed=1))
    test_records = category_records(256, seed=2)
    write_records(test, test_records)
    model = tmp_path / "model"
    result = elasticdl.train(
        model_zoo=str(zoo),
        model_def="keras2_ctr.custom_model",
        data=str(train),
        validation_data=str(test),
        output=str(model),
        num_workers=2,
        num_ps=2,
        minibatch_size=32,
        records_per_task=256,
        checkpoint_steps=20,
        intra_op_threads=1,
    )
    assert result.succeeded, result.error
    report = report_of(model)
    assert report["metrics"]["accuracy"] > 0.9, json.dumps(report["metrics"])
    assert json.loads((model / "job_report.json").read_text())["status"] == "succeeded"
    assert list((model / "checkpoints").iterdir()), "the PS wrote checkpoints in Keras 2 mode"

    predicted = elasticdl.predict(
        data=str(test), trained_model=str(model), output=str(tmp_path / "out"), num_workers=1
    )
    assert predicted.succeeded, predicted.error
    rows = [
        r for p in sorted((tmp_path / "out").glob("part-*")) for r in read_rows(str(p), "recordio")
    ]
    assert [r["id"][0] for r in rows] == list(range(256))
    labels = np.array([decode(r)["label"][0] for r in test_records])
    scores = np.array([r["prediction"][0] for r in rows])
    assert np.mean((scores > 0.5) == (labels > 0.5)) > 0.9

    # The SavedModel serves in plain TensorFlow (this process runs Keras 3).
    loaded = tf.saved_model.load(str(model / "saved_model"))
    serve = loaded.signatures["serving_default"]
    served = serve(c=tf.constant([[b"a"], [b"h"]]), x=tf.zeros((2, 2), tf.float32))
    served = next(iter(served.values())).numpy()
    assert served[0, 0] > 0.5 > served[1, 0]
