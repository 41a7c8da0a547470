"""Model files outside the model-zoo contract, named by kind before anything is imported.

ElasticDL's develop branch keeps, beside its Keras model files, whole training programs that its
`--job_command` ran as they were: TensorFlow 1 graph code (`MonitoredTrainingSession`), TF
Estimators, PyTorch and Horovod programs, all built on its `elasticai_api`. They have no model
to hand to parameter servers and no `dataset_fn`, so they cannot run here; `kind(source)` says
which kind a file is, so `--model_def` pointing at one is refused in one line that says so
instead of failing on a missing import (torch, horovod, elasticai_api) or symbol.

The decision is a table of markers read from the file's syntax tree, first match wins
(`KINDS`): an import (module prefix) or a name used as an attribute or imported. A Keras model
file matches none: TF1 optimizers (`tf.compat.v1.train.GradientDescentOptimizer`), feature
columns and `tf.estimator.ModeKeys` alone are no markers.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """A kind of file outside the contract and what marks it."""

    description: str
    modules: tuple[str, ...] = ()
    names: tuple[str, ...] = ()


KINDS = (
    Kind("a PyTorch program", modules=("torch", "torchvision")),
    Kind(
        "a TensorFlow Estimator program",
        modules=("tensorflow_estimator", "tensorflow.estimator", "deepctr.estimator"),
        names=("Estimator", "EstimatorSpec", "train_and_evaluate", "DNNClassifier", "RunConfig"),
    ),
    Kind(
        "TensorFlow 1 graph code",
        names=(
            "Session",
            "MonitoredTrainingSession",
            "MonitoredSession",
            "placeholder",
            "disable_eager_execution",
            "disable_v2_behavior",
        ),
    ),
    Kind("a Horovod AllReduce program", modules=("horovod",)),
    Kind("a program for ElasticDL's elasticai_api (its --job_command)", modules=("elasticai_api",)),
)


def _uses(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(modules imported, names used as attributes or imported) in `tree`."""
    modules: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return modules, names


def kind(source: str) -> str | None:
    """The description of the kind of program `source` is when it is outside the contract;
    None for a file that may be a model file (or does not parse: its import will say why)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    modules, names = _uses(tree)
    for candidate in KINDS:
        if any(m == p or m.startswith(p + ".") for m in modules for p in candidate.modules):
            return candidate.description
        if names.intersection(candidate.names):
            return candidate.description
    return None
