"""SQLFlow's model-zoo protocol, loaded unchanged (tests/support/sqlflow_zoo has its shapes):
symbols past a package `__init__` that cannot import, module-level pieces from the defining
module, the built-in input function, feature columns and field_metas from the data, optimizers
named in params, Keras 2's `lr=`, a loss per example, `prepare_prediction_column`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from elasticdl.runtime.column_spec import DataColumn, parse_groups, resolve
from elasticdl.runtime.model_spec import BUILTIN_INPUT, ModelZooError, load_model_spec
from elasticdl.runtime.optimizer_params import plan
from elasticdl.runtime.params import ParamsError, parse_params, split_groups
from elasticdl.runtime.zoo_source import ZooSource

ZOO = Path(__file__).resolve().parents[1] / "support" / "sqlflow_zoo"
IRIS = {n: DataColumn("float", 1, {"mean": 3.0, "std": 1.0}) for n in ("a", "b", "c", "d")}
IRIS["class"] = DataColumn("int64", 1, {"min": 0, "max": 2})


def zoo() -> ZooSource:
    return ZooSource(ZOO, str(ZOO), "")


def test_a_symbol_resolves_past_a_package_init_that_fails():
    spec = load_model_spec("sqlflow_models.DNNClassifier", zoo=zoo())
    assert spec.module.__name__ == "sqlflow_models.dnnclassifier"  # not the package's __init__
    assert spec.sources == {
        "loss": "sqlflow_models.dnnclassifier.loss",
        "optimizer": "sqlflow_models.dnnclassifier.optimizer",
        "eval_metrics_fn": "sqlflow_models.dnnclassifier.eval_metrics_fn",
        "prepare_prediction_column": "sqlflow_models.dnnclassifier.prepare_prediction_column",
        "dataset_fn": BUILTIN_INPUT,
    }
    assert spec.feature_arguments == ["feature_columns"]
    functional = load_model_spec("sqlflow_models.dnn_functional", zoo=zoo())
    assert functional.feature_arguments == ["feature_columns", "field_metas"]
    with pytest.raises(ModelZooError, match="importing 'sqlflow_models' .* failed"):
        load_model_spec("sqlflow_models.AutoClassifier", zoo=zoo())


def test_premade_names():
    spec = load_model_spec("DNNClassifier", params="n_classes=3")
    assert spec.model_def == "DNNClassifier" and spec.module.__name__ == "premade"
    with pytest.raises(ModelZooError, match="or a premade model: DNNClassifier, DNNRegressor"):
        load_model_spec("BoostedTreesClassifier")


@pytest.mark.parametrize(
    "params, constructor, piece, expected",
    [
        # SQLFlow's model.optimizer for a model without an optimizer argument: Keras's class
        (
            "optimizer=RMSprop, optimizer.learning_rate=0.1",
            {"n"},
            {"learning_rate"},
            {"keras_class": "RMSprop", "keras_args": {"learning_rate": 0.1}},
        ),
        # optimizer.* to the zoo's optimizer(lr=...): the alias
        ("optimizer.learning_rate=0.1", {"n"}, {"lr"}, {"piece_args": {"lr": 0.1}}),
        # ... or to the constructor when the optimizer takes no such argument (regressor.DNN)
        (
            "optimizer.learning_rate=0.1",
            {"learning_rate"},
            set(),
            {"constructor_args": {"learning_rate": 0.1}},
        ),
        # a constructor taking the optimizer gets it built (DNNLinearCombined's dnn_optimizer)
        (
            "dnn_optimizer=RMSprop, dnn_optimizer.learning_rate=0.01",
            {"dnn_optimizer"},
            set(),
            {"to_constructor": {"dnn_optimizer": ("RMSprop", {"learning_rate": 0.01})}},
        ),
    ],
)
def test_optimizer_params_go_where_they_are_taken(params, constructor, piece, expected):
    plain, groups = split_groups(parse_params(params))
    found = plan(constructor, {}, piece, plain, groups)
    for name, value in expected.items():
        assert getattr(found, name) == value


@pytest.mark.parametrize(
    "params, message",
    [
        ("optimizer.momentum=0.9", "neither the model's optimizer"),
        ("optimizer=Fastest", "not a Keras optimizer"),
        ("linear_optimizer.learning_rate=1", "takes no argument 'linear_optimizer'"),
    ],
)
def test_optimizer_params_that_go_nowhere_are_errors(params, message):
    plain, groups = split_groups(parse_params(params))
    with pytest.raises(ParamsError, match=message):
        plan({"n"}, {}, {"learning_rate"}, plain, groups)


def test_a_loss_per_example_is_averaged_and_prediction_columns_take_one_row():
    import tensorflow as tf

    from elasticdl.runtime.model_spec import _loss_adapter, _prediction_column

    spec = load_model_spec("sqlflow_models.DNNRegressor", zoo=zoo())

    averaged = _loss_adapter(spec._pieces["loss"])
    value = averaged(tf.constant([[1.0], [3.0]]), tf.constant([[0.0], [0.0]]))
    assert value.shape.rank == 0 and float(value) == pytest.approx(5.0)
    functional = load_model_spec("sqlflow_models.dnn_functional", zoo=zoo())
    prepare = _prediction_column(functional._pieces["prepare_prediction_column"])
    assert prepare(np.array([0.1, 0.7, 0.2])) == 1


KERAS2_CHECK = """
import json, os, sys
import numpy as np
from elasticdl.mode import Mode
from elasticdl.runtime.column_spec import DataColumn, parse_groups, resolve
from elasticdl.runtime.model_build import build_model
from elasticdl.runtime.model_spec import load_model_spec
from elasticdl.runtime.zoo_source import ZooSource
import tensorflow as tf

zoo, model_def, columns = sys.argv[1], sys.argv[2], sys.argv[3]
data = {n: DataColumn("float", 1, {}) for n in ("a", "b", "c", "d")}
data["class"] = DataColumn("int64", 1, {"min": 0, "max": 2})
features = resolve(parse_groups(columns), data, "class").to_json()
spec = load_model_spec(model_def, params="n_classes=3, optimizer.learning_rate=0.25",
                       zoo=ZooSource(__import__("pathlib").Path(zoo), zoo, ""),
                       features=features)
instance = spec.instantiate()
records = [tf.train.Example(features=tf.train.Features(feature={
    **{n: tf.train.Feature(float_list=tf.train.FloatList(value=[float(i + k)]))
       for k, n in enumerate("abcd")},
    "class": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3]))})).SerializeToString()
    for i in range(6)]
from elasticdl.runtime.data.metadata import DatasetMetadata
metadata = DatasetMetadata.from_example(records[0], label="class")
features_batch, labels = build_model(instance, records, metadata=metadata)
loss = instance.loss(labels, instance.model(features_batch))
print(json.dumps({"keras": tf.keras.__name__, "lr": float(instance.optimizer.learning_rate),
                  "loss_rank": int(loss.shape.rank),
                  "prepared": [int(instance.prediction_column(np.array([0.1, 0.8, 0.1])))]}))
"""


@pytest.mark.parametrize(
    "model_def", ["sqlflow_models.DNNClassifier", "sqlflow_models.dnn_functional"]
)
def test_sqlflow_classes_build_under_keras2_with_features_from_the_data(model_def, tmp_path):
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run(
        [sys.executable, "-c", KERAS2_CHECK, str(ZOO), model_def, "a, b, c, d"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["keras"].startswith("tf_keras")
    assert found["lr"] == pytest.approx(0.25)  # Keras 2's lr= and optimizer.learning_rate
    assert found["loss_rank"] == 0 and found["prepared"] == [1]


def test_features_resolve_to_what_the_constructor_takes():
    from elasticdl.runtime.feature_args import constructor_arguments

    features = resolve(
        parse_groups("a FOR linear_feature_columns COLUMN c, d FOR x"), IRIS, "class"
    )
    assert features.arguments == ["linear_feature_columns", "x"]

    class Native:
        ELASTICDL_FEATURES = True

    found = constructor_arguments(Native, ["linear_feature_columns", "field_metas"], features)
    assert list(found["linear_feature_columns"].inputs) == ["a"]
    assert found["field_metas"]["c"] == {
        "feature_name": "c",
        "name": "c",
        "dtype": "float32",
        "shape": [1],
        "delimiter": "",
        "is_sparse": False,
    }
    everything = resolve((), IRIS, "class")
    wide = constructor_arguments(
        Native, ["linear_feature_columns", "dnn_feature_columns"], everything
    )
    assert (
        list(wide["dnn_feature_columns"].inputs)
        == ["a", "b", "c", "d"]
        == list(wide["linear_feature_columns"].inputs)
    )


@pytest.mark.slow
def test_a_model_trained_with_a_dataset_fn_flag_predicts_and_evaluates(tmp_path):
    """The TrainedModel records --dataset_fn; prediction and evaluation use it (they failed
    with "has no dataset_fn" when the model's own module had none)."""
    import sqlite3

    from sqlflow_data import IRIS_COLUMNS, iris_rows

    import elasticdl
    from elasticdl.runtime.prediction_output import read_rows
    from elasticdl.runtime.sql.convert import convert

    train_rows, test_rows = iris_rows()
    db = tmp_path / "iris.db"
    with sqlite3.connect(db) as conn:
        for table, data in (("train", train_rows), ("test", test_rows)):
            conn.execute(f"CREATE TABLE {table} ({', '.join(IRIS_COLUMNS)})")
            conn.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?)", data)
    for table in ("train", "test"):
        convert(f"sqlite:///{db}", f"SELECT * FROM {table}", str(tmp_path / table), label="class")
    trained = elasticdl.train(
        model_zoo=str(ZOO),
        model_def="sqlflow_models.DNNClassifier",
        dataset_fn="inputs.iris_input",
        params="n_classes=3, optimizer.learning_rate=0.2",
        data=str(tmp_path / "train"),
        output=str(tmp_path / "model"),
        num_epochs=20,
        num_workers=1,
    )
    assert trained.succeeded, trained.error
    predicted = elasticdl.predict(
        data=str(tmp_path / "test"),
        trained_model=str(tmp_path / "model"),
        output=str(tmp_path / "predictions"),
        keep_columns="class",
        num_workers=1,
    )
    assert predicted.succeeded, predicted.error
    found = [
        row
        for part in sorted((tmp_path / "predictions").glob("part-*"))
        for row in read_rows(str(part), "recordio")
    ]
    right = sum(row["prediction"] == row["class"] for row in found)  # prepare_prediction_column
    assert len(found) == 10 and right >= 8, found
    evaluated = elasticdl.evaluate(
        data=str(tmp_path / "test"), trained_model=str(tmp_path / "model"), num_workers=1
    )
    assert evaluated.succeeded and evaluated.metrics["accuracy"] >= 0.8, evaluated.metrics
