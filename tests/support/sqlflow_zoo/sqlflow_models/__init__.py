"""Models in the shape of SQLFlow's zoo. Importing the package fails: `automl` needs a package
that is not installed (as SQLFlow's needs adanet); each model's own module still loads."""

from .automl import AutoClassifier
from .dnnclassifier import DNNClassifier
from .dnnregressor import DNNRegressor
from .functional import dnn_functional

__all__ = ["AutoClassifier", "DNNClassifier", "DNNRegressor", "dnn_functional"]
