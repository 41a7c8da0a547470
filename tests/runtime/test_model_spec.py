"""The model-zoo loader on small zoos written by the tests: styles, overrides, errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from zoo_steps import one_gradient_step

from elasticdl.runtime.model_spec import ModelZooError, load_model_spec
from elasticdl.runtime.params import ParamsError
from elasticdl.runtime.zoo_source import ZooSourceError, resolve_zoo

COMMON = """
import tensorflow as tf
from elasticdl.python.common.constants import Mode

FEATURES = {
    "x": tf.io.FixedLenFeature([3], tf.float32),
    "label": tf.io.FixedLenFeature([1], tf.float32),
}


def parse(record):
    r = tf.io.parse_single_example(record, FEATURES)
    return {"x": r["x"]}, r["label"]
"""

FUNCTIONS = """
import keras
import tensorflow as tf
from .common import parse


def custom_model(units=1):
    inputs = keras.Input(shape=(3,), name="x")
    return keras.Model(inputs, keras.layers.Dense(units)(inputs))


def dataset_fn(dataset, mode, metadata):
    assert "x" in metadata.column_names
    return dataset.map(parse)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions))


def optimizer(lr=0.1):
    return keras.optimizers.SGD(lr)


def eval_metrics_fn():
    return {"mse": lambda labels, predictions: tf.square(labels - predictions)}


def other_loss(labels, predictions):
    return tf.reduce_mean(tf.abs(labels - predictions))


def other_optimizer(learning_rate=0.5):
    return keras.optimizers.SGD(learning_rate)
"""

SPEC = """
import keras
import tensorflow as tf
from elasticdl import ElasticDLSpec, Mode
from toy.common import parse


class ToySpec(ElasticDLSpec):
    def __init__(self, context=None, units=1, **kwargs):
        super().__init__(context=context, **kwargs)
        self.units = units

    def create_model(self):
        inputs = keras.Input(shape=(3,), name="x")
        return keras.Model(inputs, keras.layers.Dense(self.units)(inputs))

    def create_dataset(self, dataset, mode):
        return dataset.map(parse)

    def create_loss(self, outputs=None, labels=None):
        return tf.reduce_mean(tf.square(labels - outputs))

    def create_optimizer(self, lr=0.1):
        return keras.optimizers.SGD(lr)

    def create_metrics(self, mode=Mode.TRAINING, outputs=None, labels=None):
        if mode != Mode.EVALUATION or outputs is None:
            return {}
        return {"mae": tf.reduce_mean(tf.abs(labels - outputs))}
"""

DEFAULTS = """
import keras
import tensorflow as tf
from .common import parse


class Linear(keras.Model):
    def __init__(self, units=1, learning_rate=0.05):
        super().__init__()
        self.learning_rate = learning_rate
        self.dense = keras.layers.Dense(units)

    def call(self, inputs, training=False):
        return self.dense(inputs["x"])

    def default_input(self, dataset, mode):
        return dataset.map(parse)

    def default_loss(self, labels, predictions):
        return tf.reduce_mean(tf.square(labels - predictions))

    def default_optimizer(self):
        return keras.optimizers.SGD(self.learning_rate)

    def default_metrics(self):
        return {"mae": keras.metrics.MeanAbsoluteError()}


def loss(labels, predictions):
    raise AssertionError("the class's default_loss takes precedence over the module's loss")
"""

NO_LOSS = """
import keras
from toy.common import parse


def custom_model():
    inputs = keras.Input(shape=(3,), name="x")
    return keras.Model(inputs, keras.layers.Dense(1)(inputs))


def dataset_fn(dataset, mode):
    return dataset.map(parse)


def optimizer(lr=0.1):
    return keras.optimizers.SGD(lr)
"""


def write_zoo(root: Path) -> Path:
    pkg = root / "toy"
    (pkg / "nested").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "common.py").write_text(COMMON)
    (pkg / "functions.py").write_text(FUNCTIONS)
    (pkg / "spec.py").write_text(SPEC)
    (pkg / "defaults.py").write_text(DEFAULTS)
    (pkg / "no_loss.py").write_text(NO_LOSS)
    (pkg / "nested" / "__init__.py").write_text("from ..functions import *  # noqa\n")
    (root / "requirements.txt").write_text("")
    return root


def toy_records(n: int = 16) -> list[bytes]:
    rng = np.random.default_rng(0)
    records = []
    for _ in range(n):
        x = rng.normal(size=3).astype(np.float32)
        example = tf.train.Example(
            features=tf.train.Features(
                feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                    "label": tf.train.Feature(
                        float_list=tf.train.FloatList(value=[float(x.sum())])
                    ),
                }
            )
        )
        records.append(example.SerializeToString())
    return records


@pytest.fixture
def zoo(tmp_path):
    return str(write_zoo(tmp_path / "zoo"))


@pytest.mark.parametrize(
    ("model_def", "style"),
    [
        ("toy.functions.custom_model", "functions"),
        ("toy.nested.custom_model", "functions"),
        ("toy.spec.ToySpec", "spec"),
        ("toy.defaults.Linear", "keras_defaults"),
    ],
)
def test_each_style_resolves_and_trains_one_step(zoo, model_def, style):
    spec = load_model_spec(model_def, zoo, "learning_rate=0.1")
    assert spec.style == style
    loss_before, loss_after, predictions = one_gradient_step(spec, toy_records())
    assert predictions.shape == (8, 1)
    assert np.isfinite(loss_before) and loss_after < loss_before


def test_keras_defaults_are_bound_to_the_instance(zoo):
    spec = load_model_spec("toy.defaults.Linear", zoo, "learning_rate=0.25, units=1")
    instance = spec.instantiate()
    assert float(instance.optimizer.learning_rate) == pytest.approx(0.25)
    metrics = instance.eval_metrics()
    assert set(metrics.keras_metrics) == {"mae"} and not metrics.functions
    assert spec.sources["loss"] == "toy.defaults.Linear.default_loss"


def test_flags_override_the_styles_own_pieces(zoo):
    spec = load_model_spec(
        "toy.defaults.Linear",
        zoo,
        "learning_rate=0.5",
        loss="toy.functions.other_loss",
        optimizer="toy.functions.other_optimizer",
        dataset_fn="toy.functions.dataset_fn",
        eval_metrics_fn="toy.functions.eval_metrics_fn",
    )
    instance = spec.instantiate()
    labels = tf.constant([[1.0], [3.0]])
    predictions = tf.constant([[0.0], [0.0]])
    assert float(instance.loss(labels, predictions)) == pytest.approx(2.0)  # L1, not L2
    assert float(instance.optimizer.learning_rate) == pytest.approx(0.5)
    assert instance.eval_metrics().names == ["mse"]
    assert spec.sources["loss"] == "toy.functions.other_loss"


def test_flag_naming_a_symbol_of_the_model_module(zoo):
    spec = load_model_spec("toy.functions.custom_model", zoo, loss="other_loss")
    labels, predictions = tf.constant([[2.0]]), tf.constant([[0.0]])
    assert float(spec.instantiate().loss(labels, predictions)) == pytest.approx(2.0)


def test_spec_metrics_are_callables_over_batches(zoo):
    spec = load_model_spec("toy.spec.ToySpec", zoo, "units=1")
    metrics = spec.instantiate(context={"worker_id": 1}).eval_metrics()
    values = metrics.values(tf.constant([[1.0], [2.0]]), tf.constant([[3.0], [2.0]]))
    assert set(values) == {"mae"}
    assert float(values["mae"]) == pytest.approx(1.0)


def test_function_metrics_give_per_example_values(zoo):
    metrics = load_model_spec("toy.functions.custom_model", zoo).instantiate().eval_metrics()
    values = metrics.values(tf.constant([[1.0], [2.0]]), tf.constant([[3.0], [2.0]]))
    np.testing.assert_allclose(values["mse"].numpy().ravel(), [4.0, 0.0])


def test_spec_receives_context_and_params(zoo):
    spec = load_model_spec("toy.spec.ToySpec", zoo, "units=2, anything=3")
    instance = spec.instantiate(context={"worker_id": 7})
    assert instance.spec_object.context == {"worker_id": 7}
    assert instance.spec_object.units == 2
    assert instance.spec_object.params == {"anything": 3}


def test_missing_loss_names_symbol_file_and_styles(zoo):
    with pytest.raises(ModelZooError) as err:
        load_model_spec("toy.no_loss.custom_model", zoo)
    message = str(err.value)
    assert "toy.no_loss.custom_model" in message
    assert "no_loss.py" in message
    assert "--loss" in message and "functions" in message


def test_unknown_module_lists_files_searched(zoo):
    with pytest.raises(ModelZooError) as err:
        load_model_spec("toy.missing.Model", zoo)
    assert "toy/missing.py" in str(err.value) and "toy/missing/__init__.py" in str(err.value)


def test_unknown_symbol_lists_what_the_module_defines(zoo):
    with pytest.raises(ModelZooError, match="custom_model"):
        load_model_spec("toy.functions.CustomModel", zoo)


def test_not_a_model(zoo):
    with pytest.raises(ModelZooError, match="not a model"):
        load_model_spec("toy.common.FEATURES", zoo)


def test_bad_model_def_syntax(zoo):
    with pytest.raises(ModelZooError, match="MODULE.SYMBOL"):
        load_model_spec("custom_model", zoo)
    with pytest.raises(ModelZooError, match="dotted"):
        load_model_spec("toy/functions.custom_model", zoo)


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ("units=1, hiden=3", "'hiden'"),
        ("units=__import__('os').getcwd()", "not a Python literal"),
        ("units=[1, 2", "unclosed"),
    ],
)
def test_bad_params(zoo, params, fragment):
    with pytest.raises(ParamsError, match=fragment) as err:
        load_model_spec("toy.functions.custom_model", zoo, params)
    if "hiden" in params:
        assert "units" in str(err.value) and "lr" in str(err.value)


def test_import_error_in_zoo_is_reported(zoo):
    (Path(zoo) / "toy" / "broken.py").write_text("import not_a_module_anywhere\n")
    with pytest.raises(ModelZooError, match="not_a_module_anywhere"):
        load_model_spec("toy.broken.Model", zoo)


def test_two_zoos_with_the_same_package_name(tmp_path):
    first = write_zoo(tmp_path / "first")
    second = write_zoo(tmp_path / "second")
    (second / "toy" / "functions.py").write_text(FUNCTIONS + "\nSECOND = True\n")
    assert not hasattr(load_model_spec("toy.functions.custom_model", str(first)).module, "SECOND")
    assert load_model_spec("toy.functions.custom_model", str(second)).module.SECOND


def test_missing_zoo_directory(tmp_path):
    with pytest.raises(ZooSourceError, match="not a directory"):
        resolve_zoo(str(tmp_path / "nowhere"))


def _git(*args, cwd=None):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def bare_repo(tmp_path):
    work = write_zoo(tmp_path / "work")
    _git("init", "--quiet", "-b", "main", cwd=work)
    _git("-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".", cwd=work)
    _git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "zoo", cwd=work)
    _git("branch", "v2", cwd=work)
    bare = tmp_path / "zoo.git"
    _git("clone", "--quiet", "--bare", str(work), str(bare))
    return work, bare


def test_git_zoo_is_cloned_into_the_cache(bare_repo, tmp_path, monkeypatch):
    work, bare = bare_repo
    monkeypatch.setenv("ELASTICDL_CACHE_DIR", str(tmp_path / "cache"))
    spec = load_model_spec("toy.functions.custom_model", f"git+file://{bare}", "units=1")
    assert spec.zoo.root.is_relative_to(tmp_path / "cache")
    assert len(spec.zoo.commit) == 40
    assert spec.style == "functions"
    again = resolve_zoo(f"git+file://{bare}")
    assert again.root == spec.zoo.root and again.commit == spec.zoo.commit
    pinned = resolve_zoo(f"git+file://{bare}@v2")
    assert pinned.commit == spec.zoo.commit and pinned.root != spec.zoo.root


def test_git_zoo_bad_url(tmp_path, monkeypatch):
    monkeypatch.setenv("ELASTICDL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ZooSourceError, match="git fetch failed"):
        resolve_zoo(f"git+file://{tmp_path}/absent.git")
    assert not [p for p in (tmp_path / "cache" / "zoos").iterdir()], "no half-made clone left"
