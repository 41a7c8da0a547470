"""ElasticDL: elastic, fault-tolerant training and prediction for TensorFlow/Keras models.

Public API: `Mode`, `ElasticDLSpec`, `train(...)`, `predict(...)`, `evaluate(...)`, `sql(...)`.
"""

import os
from typing import Any

# gRPC core logs at INFO on every fork of a process that has gRPC threads (the master starts
# workers while serving); keep its stderr for errors unless the user asks otherwise.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from elasticdl.mode import Mode
from elasticdl.runtime import tf_quiet
from elasticdl.spec import ElasticDLSpec

tf_quiet.install()  # before anything imports TensorFlow: see runtime/tf_quiet.py

__all__ = ["ElasticDLSpec", "Mode", "evaluate", "predict", "sql", "train"]


def train(**kwargs: Any) -> Any:
    """Run a training job; arguments are the `elasticdl train` flags, as strings or values.

    `sql="SELECT ...", db="sqlite:///hr.db"` (and `label=`) may replace `data=`.

    `elasticdl.train(model_def="regressor.DNN", data="gs://b/train/*.recordio",
    output="gs://b/models/m1", params="hidden_units=[10, 100, 20, 5], learning_rate=0.01")`
    returns a JobResult (`status`, `output`, `report`, `error`); bad input raises ValueError
    or FileNotFoundError with one clear message.
    """
    from elasticdl.train_command import namespace_from_kwargs, run_training

    return run_training(namespace_from_kwargs(**kwargs))


def predict(**kwargs: Any) -> Any:
    """Run a prediction job; arguments are the `elasticdl predict` flags.

    `elasticdl.predict(data="gs://b/test/*.recordio", trained_model="gs://b/models/m1",
    output="gs://b/predictions/")` returns an InferenceResult (`status`, `output`, `report`,
    `error`); every input record yields exactly one output row.
    """
    from elasticdl.predict_command import namespace_from_kwargs, run_inference

    return run_inference(namespace_from_kwargs("predict", **kwargs), "predict")


def evaluate(**kwargs: Any) -> Any:
    """Compute a trained model's metrics on labelled data (the `elasticdl evaluate` flags).

    Returns an InferenceResult whose `metrics` maps each metric name to its value.
    """
    from elasticdl.predict_command import namespace_from_kwargs, run_inference

    return run_inference(namespace_from_kwargs("evaluate", **kwargs), "evaluate")


def sql(statement: str, db: str, model_root: str = "./models", **kwargs: Any) -> Any:
    """Run a statement: `SELECT ... TO TRAIN ... INTO model`, `SELECT ... TO PREDICT
    table.column USING model`, `SELECT ... TO EVALUATE model ... INTO table` (or the older
    `SELECT ... TRAIN` / `PREDICT` form), on this machine.

    `elasticdl.sql("SELECT * FROM iris.train TO TRAIN DNNClassifier WITH model.n_classes=3
    LABEL class INTO my_model", db="sqlite:///iris.db")` returns a StatementResult (`status`,
    `model`, `rows`, `table`, `metrics`, `notes`, `report`). Keyword arguments: `model_zoo`,
    `key` (PREDICT into a table the SELECT reads), `on_null`, `job_options`, `work_dir`.
    """
    from elasticdl.sql_command import run_statement

    return run_statement(statement, db, model_root, **kwargs)


__version__ = "0.3.0.dev0"
