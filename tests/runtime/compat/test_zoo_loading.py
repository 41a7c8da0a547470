"""Loading ElasticDL's zoo files (no job): the zoo under its directory's own name, files of
other kinds refused by kind, a failing model constructor in one line, metrics keyed by output,
and the markers that make auto mode pick Keras 2."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from elasticdl.runtime import keras_mode, zoo_kinds, zoo_package
from elasticdl.runtime.metrics import MetricAccumulator, compute, merge
from elasticdl.runtime.model_spec import EvalMetrics, ModelBuildError, ModelZooError
from elasticdl.runtime.model_spec import load_model_spec as _load
from elasticdl.runtime.output_metrics import flatten, select

MODEL = """
import tensorflow as tf

from {package}.common.consts import WIDTH


def custom_model():
    inputs = tf.keras.Input(shape=(WIDTH,), name="x")
    return tf.keras.Model(inputs, tf.keras.layers.Dense(1)(inputs))


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions))


def optimizer(lr=0.1):
    return tf.keras.optimizers.SGD(lr)


def feed(dataset, mode, _):
    return dataset
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def zoo_named(parent: Path, name: str = "model_zoo", width: int = 3, init: str = "") -> Path:
    files = {
        "common/__init__.py": "",
        "common/consts.py": f"WIDTH = {width}\n",
        "net/__init__.py": "",
        "net/model.py": MODEL.format(package=name),
    }
    if init:
        files["__init__.py"] = init
    return write(parent / name, files)


def load(model_def: str, zoo: Path):
    return _load(model_def, str(zoo))


# -- the zoo under its own name ---------------------------------------------------------------


def test_a_zoo_imports_its_modules_under_its_directory_name(tmp_path):
    zoo = zoo_named(tmp_path, init="REGISTERED_FROM_INIT = True\n")
    spec = load("net.model.custom_model", zoo)
    assert spec.module.WIDTH == 3 and spec.sources["dataset_fn"] == "net.model.feed"
    assert sys.modules["model_zoo"].REGISTERED_FROM_INIT
    assert sys.modules["model_zoo.common.consts"].__file__ == str(zoo / "common" / "consts.py")
    assert spec.instantiate().model.input_shape == (None, 3)


def test_a_second_zoo_of_the_same_name_replaces_the_first(tmp_path):
    first = zoo_named(tmp_path / "a", width=3)
    second = zoo_named(tmp_path / "b", width=5)
    assert load("net.model.custom_model", first).module.WIDTH == 3
    assert load("net.model.custom_model", second).module.WIDTH == 5
    assert sys.modules["model_zoo.common.consts"].__file__.startswith(str(second))


@pytest.mark.parametrize(
    ("name", "registered"),
    [
        ("model_zoo", True),
        ("my_models", True),
        ("my-models", False),  # not an identifier
        ("json", False),  # the standard library's
        ("numpy", False),  # installed here
        ("class", False),  # a keyword
    ],
)
def test_which_directory_names_become_a_package(tmp_path, name, registered):
    root = tmp_path / name
    root.mkdir()
    assert (zoo_package.package_name(root) == name) is registered


def test_a_zoo_with_a_top_level_module_of_its_own_name_is_not_aliased(tmp_path):
    root = tmp_path / "models"
    write(root, {"models/__init__.py": "", "models/net.py": "X = 1\n"})
    assert zoo_package.register(root) is None


# -- other kinds of files, refused by kind ----------------------------------------------------


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n    pass\n", "PyTorch"),
        ("import tensorflow as tf\nest = tf.estimator.Estimator(model_fn=None)\n", "Estimator"),
        ("from deepctr.estimator.models import DeepFMEstimator\n", "Estimator"),
        (
            "import tensorflow as tf\nwith tf.compat.v1.train.MonitoredTrainingSession() as s:\n"
            "    pass\n",
            "TensorFlow 1 graph",
        ),
        ("import tensorflow as tf\nx = tf.compat.v1.placeholder(tf.float32)\n", "TensorFlow 1"),
        ("import horovod.tensorflow as hvd\nhvd.init()\n", "Horovod"),
        ("from elasticai_api.common.data_shard_service import X\n", "elasticai_api"),
    ],
)
def test_programs_outside_the_contract_are_named_by_kind(source, kind):
    assert kind in (zoo_kinds.kind(source) or "")


@pytest.mark.parametrize(
    "source",
    [
        MODEL.format(package="model_zoo"),
        "import tensorflow as tf\nopt = tf.compat.v1.train.GradientDescentOptimizer(0.1)\n"
        "train = tf.estimator.ModeKeys.TRAIN\n",
        "def broken(:\n",
    ],
)
def test_model_files_are_no_other_kind(source):
    assert zoo_kinds.kind(source) is None


def test_train_on_a_pytorch_program_is_refused_in_one_line(tmp_path):
    zoo = write(tmp_path / "model_zoo", {"mnist/mnist_pytorch.py": "import torch\n\n\nNet = 1\n"})
    with pytest.raises(ModelZooError) as err:
        load("mnist.mnist_pytorch.Net", zoo)
    message = str(err.value)
    assert "\n" not in message and "is a PyTorch program" in message
    assert "--model_def mnist.mnist_pytorch.Net" in message and "--job_command" in message


# -- a model file's own failure: one line -----------------------------------------------------


def test_a_failing_model_constructor_is_one_line_naming_the_model(tmp_path):
    failing = "def custom_model():\n    raise ValueError('first line\\nsecond line')"
    broken = MODEL.format(package="model_zoo").replace("def custom_model():", failing)
    zoo = zoo_named(tmp_path)
    (zoo / "net" / "broken.py").write_text(broken)
    spec = load("net.broken.custom_model", zoo)
    with pytest.raises(ModelBuildError) as err:
        spec.instantiate()
    assert str(err.value) == "building net.broken.custom_model raised ValueError: first line"
    assert isinstance(err.value, ValueError) and not isinstance(err.value, ModelZooError)
    assert isinstance(err.value.__cause__, ValueError)


# -- metrics keyed by output ------------------------------------------------------------------


def test_metrics_keyed_by_output_read_their_output():
    metrics = EvalMetrics.from_dict(
        {
            "logits": {"accuracy": lambda labels, p: tf.equal(tf.cast(p > 0, tf.int32), labels)},
            "probs": {"auc": tf.keras.metrics.AUC(), "mean": lambda labels, p: p},
        }
    )
    assert metrics.names == ["accuracy", "mean", "auc"]
    assert metrics.outputs == {"accuracy": "logits", "auc": "probs", "mean": "probs"}
    labels = tf.constant([1, 0, 1, 0], tf.int32)
    logits = tf.constant([2.0, -1.0, -0.5, 1.0])
    batch = {"logits": logits, "probs": tf.sigmoid(logits)}
    halves = [MetricAccumulator(EvalMetrics.from_dict(_ctr_metrics())) for _ in range(2)]
    halves[0].update(labels[:2], {k: v[:2] for k, v in batch.items()})
    halves[1].update(labels[2:], {k: v[2:] for k, v in batch.items()})
    values = compute(EvalMetrics.from_dict(_ctr_metrics()), merge(h.states() for h in halves))
    assert values["accuracy"] == pytest.approx(0.5)
    assert values["auc"] == pytest.approx(0.75)
    np.testing.assert_allclose(metrics.values(labels, batch)["mean"].numpy(), tf.sigmoid(logits))


def _ctr_metrics() -> dict:
    return {
        "logits": {"accuracy": lambda labels, p: tf.equal(tf.cast(p > 0, tf.int32), labels)},
        "probs": {"auc": tf.keras.metrics.AUC()},
    }


def test_a_name_under_two_outputs_is_prefixed_and_bad_shapes_are_one_line():
    flat, outputs = flatten({"a": {"m": 1, "n": 2}, "b": {"m": 3}})
    assert flat == {"a/m": 1, "n": 2, "b/m": 3}
    assert outputs == {"a/m": "a", "n": "a", "b/m": "b"}
    assert flatten({"mse": 1}) == ({"mse": 1}, {})
    with pytest.raises(ModelZooError, match="either"):
        EvalMetrics.from_dict({"logits": {"acc": lambda labels, p: p}, "mse": lambda labels, p: p})
    with pytest.raises(ValueError, match="outputs are: logits, probs"):
        select({"logits": 1, "probs": 2}, "score")
    with pytest.raises(ValueError, match="single output"):
        select(tf.constant([1.0]), "probs")


# -- Keras 2 markers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "from elasticdl.python.elasticdl.feature_column import feature_column\n",
        "from elasticdl_preprocessing.feature_column import feature_column as edl_fc\n",
    ],
)
def test_v02_and_preprocessing_feature_columns_are_keras2_markers(source):
    assert keras_mode.markers(source)


# -- a one-input model fed a one-key dict -----------------------------------------------------

ONE_INPUT = """
import tensorflow as tf


def custom_model():
    inputs = tf.keras.Input(shape=(3,){name})
    return tf.keras.Model(inputs, tf.keras.layers.Dense(1)(inputs))


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions))


def optimizer(lr=0.1):
    return tf.keras.optimizers.SGD(lr)


def feed(dataset, mode, _):
    def parse(record):
        spec = {{"feature": tf.io.FixedLenFeature([3], tf.float32)}}
        r = tf.io.parse_single_example(record, spec)
        return {{"feature": r["feature"]}}, r["feature"][:1]

    return dataset.map(parse)
"""


@pytest.mark.parametrize("name", ["", ', name="feature"'])
def test_a_one_input_model_takes_a_one_key_dict_of_any_key(tmp_path, name):
    from elasticdl.runtime.model_build import build_model

    zoo = write(tmp_path / "model_zoo", {"one/one.py": ONE_INPUT.format(name=name)})
    example = tf.train.Example(
        features=tf.train.Features(
            feature={"feature": tf.train.Feature(float_list=tf.train.FloatList(value=[1, 2, 3]))}
        )
    )
    instance = load("one.one.custom_model", zoo).instantiate()
    features, labels = build_model(instance, [example.SerializeToString()] * 2)
    unwrapped = not name
    assert isinstance(features, dict) is not unwrapped
    assert instance.model(features).shape == (2, 1) and labels.shape == (2, 1)
