"""A statement is one pipeline and its values: `elasticdl sql`, `elasticdl train --sql` and the
Argo workflow of the same statement are the same definition."""

from __future__ import annotations

import pytest

from elasticdl.runtime import job_options
from elasticdl.runtime.sql.lexer import StatementError
from elasticdl.train_command import namespace_from_kwargs
from elasticdl.workflows.definitions import pipeline
from elasticdl.workflows.render import render_objects
from elasticdl.workflows.statements import compile_statement
from elasticdl.workflows.steps import Engine

DB = "mysql+pymysql://root@127.0.0.1:3306/"

TRAIN = """SELECT * FROM iris.train TO TRAIN DNNClassifier WITH
  model.n_classes = 3, model.hidden_units = [10, 10], optimizer.learning_rate=0.1,
  train.epoch = 10, train.batch_size = 4, engine.num_workers = 3,
  validation.select = "SELECT * FROM iris.test", validation.metrics = "Accuracy,AUC"
COLUMN sepal_length, sepal_width, petal_length, petal_width
LABEL class
INTO sqlflow_models.my_dnn_model;"""


def test_a_train_statement_is_the_train_pipeline_with_its_values():
    compiled = compile_statement(TRAIN, DB, "/models")
    assert compiled.pipeline == "train"
    assert compiled.values == {
        "sql": "SELECT * FROM iris.train",
        "db": DB,
        "num_epochs": "10",
        "minibatch_size": "4",
        "num_workers": "3",
        "model_def": "DNNClassifier",
        "label": "class",
        "output": "/models/sqlflow_models/my_dnn_model",
        "versioned": "true",
        "params": "n_classes=3, hidden_units=[10, 10], optimizer.learning_rate=0.1",
        "feature_columns": "COLUMN sepal_length, sepal_width, petal_length, petal_width",
        "eval_metrics": "Accuracy,AUC",
        "validation_sql": "SELECT * FROM iris.test",
    }
    # Every value is a parameter of the train pipeline, on both engines.
    for engine in (Engine.LOCAL, Engine.ARGO):
        names = {p.name for p in pipeline("train").params_on(engine)}
        assert set(compiled.values) <= names


def test_elasticdl_train_with_the_same_flags_gives_the_same_values():
    compiled = compile_statement(TRAIN, DB, "/models")
    pipeline_only = {"versioned", "validation_sql"}  # the pipeline's own parameters
    flags = {k: v for k, v in compiled.values.items() if k not in pipeline_only}
    from_flags = job_options.values_from_namespace(
        job_options.TRAIN, namespace_from_kwargs(**flags)
    )
    assert {name: from_flags[name] for name in flags} == flags


def test_the_argo_workflow_of_a_statement_carries_its_values():
    compiled = compile_statement(TRAIN, DB, "gs://bucket/models")
    values = {**compiled.values, "work_dir": "gs://bucket/work", "image": "zoo:1"}
    (workflow,) = render_objects("train", values, kind="workflow")
    arguments = {p["name"]: p.get("value") for p in workflow["spec"]["arguments"]["parameters"]}
    for name, value in compiled.values.items():
        assert arguments[name] == value, name


def test_predict_and_evaluate_statements():
    predict = compile_statement(
        "SELECT * FROM iris.test TO PREDICT iris.predict.class WITH predict.batch_size=8 "
        "USING sqlflow_models.my_dnn_model;",
        DB,
        "/m",
    )
    assert (predict.pipeline, predict.values) == (
        "predict",
        {
            "sql": "SELECT * FROM iris.test",
            "db": DB,
            "minibatch_size": "8",
            "trained_model": "/m/sqlflow_models/my_dnn_model",
            "output_table": "iris.predict",
            "result_column": "class",
        },
    )
    evaluate = compile_statement(
        "SELECT * FROM housing.test TO EVALUATE m WITH validation.metrics='mse' LABEL target "
        "INTO housing.result",
        DB,
        "/m",
    )
    assert evaluate.pipeline == "evaluate"
    assert evaluate.values["output_table"] == "housing.result"
    assert evaluate.values["eval_metrics"] == "mse" and evaluate.values["label"] == "target"
    for compiled in (predict, evaluate):
        names = {p.name for p in pipeline(compiled.pipeline).params_on(Engine.ARGO)}
        assert set(compiled.values) <= names


def test_the_seed_statement_and_its_notes():
    compiled = compile_statement(
        "SELECT name, role, salary FROM employee TRAIN regressor.DNN WITH hidden_units=[10, 100, "
        "20, 5], learning_rate=0.01, validation.steps=2 INTO my_trained_model;",
        "sqlite:///hr.db",
    )
    assert compiled.values["label"] == "salary"
    assert compiled.values["params"] == "hidden_units=[10, 100, 20, 5], learning_rate=0.01"
    assert compiled.notes == (
        "WITH validation.steps: accepted as SQLFlow has it, no effect here",
        "no LABEL clause: the last selected column 'salary' is the label",
    )


@pytest.mark.parametrize(
    "statement, message",
    [
        ("SELECT * FROM t TO TRAIN m INTO x", "no LABEL clause"),
        ("SELECT * FROM t TO PREDICT t.c WITH model.x=1 USING m", "set when it is trained"),
        ("SELECT a, b FROM t TO TRAIN m LABEL b USING other INTO x", "USING other"),
        ("SELECT * FROM t TO PREDICT t.c WITH validation.metrics='mse' USING m", "not PREDICT"),
    ],
)
def test_statements_that_cannot_run_say_why(statement, message):
    with pytest.raises(StatementError, match=message):
        compile_statement(statement, DB)
