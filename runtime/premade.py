"""SQLFlow's premade model names and the built-in models they run.

`TO TRAIN DNNClassifier` names one of TensorFlow's canned estimators in SQLFlow. Here each such
name is a Keras model of the built-in zoo (`model_zoo/premade/`) taking the same WITH keys as
SQLFlow documents for the estimator (`hidden_units`, `n_classes`, `optimizer`, ...) and its
feature columns from COLUMN. A model definition without a dot is looked up here;
`sqlflow_models.DNNClassifier` (with a dot) is a class of the user's zoo, as in SQLFlow.
"""

from __future__ import annotations

PREMADE_MODULE = "premade"
PREMADE: dict[str, str] = {
    name: f"{PREMADE_MODULE}.{name}"
    for name in (
        "DNNClassifier",
        "DNNRegressor",
        "LinearClassifier",
        "LinearRegressor",
        "DNNLinearCombinedClassifier",
        "DNNLinearCombinedRegressor",
    )
}
"""Premade name -> the built-in zoo's model definition."""


def premade_model_def(model_def: str) -> str | None:
    """The built-in model definition of a premade name, or None when `model_def` is none."""
    return PREMADE.get(model_def)
