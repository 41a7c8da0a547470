"""Evaluation metrics named in text: `validation.metrics="Accuracy,AUC"`, `--eval_metrics`.

SQLFlow users name Keras metrics by class (`Accuracy`, `AUC`, `MeanSquaredError`) or by
function (`mean_absolute_error`), and SQLFlow's XGBoost statements by scikit-learn's names
(`accuracy_score`). Each name maps to one Keras metric and the form of the model's output it
reads, as SQLFlow does: a classifier's outputs are probabilities (a softmax over the classes, or
one sigmoid), the label is a class id.

* class ids (argmax, or p > 0.5 for one output): Accuracy, Precision, Recall,
  True/False Positives/Negatives;
* probabilities (one-hot labels where the metric needs them): BinaryAccuracy,
  CategoricalAccuracy, TopKCategoricalAccuracy, SparseCategoricalAccuracy, F1Score;
* AUC: the positive class's probability (one-hot labels for several classes);
* values (the outputs as they are): MeanAbsoluteError, MeanSquaredError,
  RootMeanSquaredError, MeanAbsolutePercentageError, MeanSquaredLogarithmicError.

Every one has additive state (counts and sums), so workers' evaluations merge exactly
(runtime/metrics.py). `metric_names_problem` checks names without TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CLASS_IDS, PROBABILITIES, ONE_HOT, AUC, VALUES = "class_ids", "probs", "one_hot", "auc", "values"

METRICS: dict[str, str] = {
    "Accuracy": CLASS_IDS,
    "Precision": CLASS_IDS,
    "Recall": CLASS_IDS,
    "TruePositives": CLASS_IDS,
    "TrueNegatives": CLASS_IDS,
    "FalsePositives": CLASS_IDS,
    "FalseNegatives": CLASS_IDS,
    "BinaryAccuracy": PROBABILITIES,
    "SparseCategoricalAccuracy": PROBABILITIES,
    "CategoricalAccuracy": ONE_HOT,
    "TopKCategoricalAccuracy": ONE_HOT,
    "F1Score": ONE_HOT,
    "AUC": AUC,
    "MeanAbsoluteError": VALUES,
    "MeanSquaredError": VALUES,
    "RootMeanSquaredError": VALUES,
    "MeanAbsolutePercentageError": VALUES,
    "MeanSquaredLogarithmicError": VALUES,
}
"""Keras metric class -> what it reads (module docstring)."""

ALIASES: dict[str, str] = {
    "accuracy": "Accuracy",
    "acc": "Accuracy",
    "accuracy_score": "Accuracy",
    "precision_score": "Precision",
    "recall_score": "Recall",
    "f1_score": "F1Score",
    "auc": "AUC",
    "roc_auc_score": "AUC",
    "mae": "MeanAbsoluteError",
    "mean_absolute_error": "MeanAbsoluteError",
    "mse": "MeanSquaredError",
    "mean_squared_error": "MeanSquaredError",
    "rmse": "RootMeanSquaredError",
    "mape": "MeanAbsolutePercentageError",
    "mean_absolute_percentage_error": "MeanAbsolutePercentageError",
    "msle": "MeanSquaredLogarithmicError",
    "mean_squared_logarithmic_error": "MeanSquaredLogarithmicError",
}
_BY_LOWER = {name.lower(): name for name in METRICS} | ALIASES


def split_names(text: str) -> list[str]:
    """`"Accuracy, AUC"` -> ["Accuracy", "AUC"] (as written, blanks dropped)."""
    return [part.strip() for part in str(text).split(",") if part.strip()]


def canonical(name: str) -> str | None:
    """The Keras class a metric name means (any case, aliases), or None."""
    return _BY_LOWER.get(name.strip().lower())


def metric_names_problem(value: Any) -> str | None:
    """Why `value` is not a comma-separated list of known metric names, or None."""
    names = split_names(value) if isinstance(value, str) else []
    if not names:
        return 'must be a quoted, comma-separated list of metric names, e.g. "Accuracy,AUC"'
    unknown = [name for name in names if canonical(name) is None]
    if unknown:
        return f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(METRICS)}"
    return None


def named_metrics(text: str) -> Any:
    """EvalMetrics for the named metrics (runtime/model_spec.py), each with the transform of
    (labels, outputs) its kind needs."""
    from elasticdl.runtime.keras_mode import keras
    from elasticdl.runtime.model_spec import EvalMetrics

    problem = metric_names_problem(text)
    if problem:
        raise ValueError(f"eval metrics {text!r}: {problem}")
    found = EvalMetrics()
    module = keras().metrics
    for name in split_names(text):
        cls = canonical(name)
        assert cls is not None
        kind = METRICS[cls]
        if cls == "AUC":
            metric = module.AUC(num_thresholds=2000)
        elif cls == "F1Score":
            metric = module.F1Score(average="macro", threshold=None)
        else:
            metric = getattr(module, cls)()
        found.keras_metrics[name] = metric
        found.transforms[name] = _TRANSFORMS[kind]
    return found


def _class_ids(labels: Any, outputs: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    outputs = tf.convert_to_tensor(outputs)
    labels = tf.reshape(tf.cast(labels, tf.int64), [-1])
    if outputs.shape[-1] == 1:
        ids = tf.cast(tf.reshape(outputs, [-1]) > 0.5, tf.int64)
    else:
        ids = tf.argmax(outputs, axis=-1)
    return labels, ids


def _probabilities(labels: Any, outputs: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    return tf.reshape(tf.cast(labels, tf.float32), [-1, 1]), outputs


def _one_hot(labels: Any, outputs: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    outputs = tf.convert_to_tensor(outputs)
    ids = tf.reshape(tf.cast(labels, tf.int64), [-1])
    if outputs.shape[-1] == 1:
        outputs = tf.concat([1.0 - outputs, outputs], axis=-1)
    return tf.one_hot(ids, int(outputs.shape[-1])), outputs


def _auc(labels: Any, outputs: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    outputs = tf.convert_to_tensor(outputs)
    if outputs.shape[-1] == 1:
        return tf.reshape(tf.cast(labels, tf.float32), [-1]), tf.reshape(outputs, [-1])
    if outputs.shape[-1] == 2:
        return tf.reshape(tf.cast(labels, tf.float32), [-1]), outputs[:, 1]
    return _one_hot(labels, outputs)


def _values(labels: Any, outputs: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    outputs = tf.convert_to_tensor(outputs)
    return tf.reshape(tf.cast(labels, outputs.dtype), tf.shape(outputs)), outputs


_TRANSFORMS: dict[str, Callable[[Any, Any], tuple[Any, Any]]] = {
    CLASS_IDS: _class_ids,
    PROBABILITIES: _probabilities,
    ONE_HOT: _one_hot,
    AUC: _auc,
    VALUES: _values,
}
