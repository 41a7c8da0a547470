"""Keras 2 or Keras 3: which Keras a job's processes give their model files.

TensorFlow 2.21 ships Keras 3 as `tf.keras`. Model files written for Keras 2 (feature columns
through `DenseFeatures`, TensorFlow ops applied to Keras tensors in functional models,
`tensorflow.python.keras` imports) need `tf_keras`, which TensorFlow uses as `tf.keras` when
`TF_USE_LEGACY_KERAS=1` is in the environment *before* TensorFlow is imported. So the mode is a
property of a process, fixed at its start, and every process of a job (master, parameter
servers, workers) must agree.

The job's mode (`--keras_version`): `2` or `3` as given, or `auto`: Keras 2 when the model
file's source shows a Keras 2 marker (`markers`), or when the model fails to import or build
under Keras 3 and builds under Keras 2 (the master probes that, unless the file imports `keras`
itself); Keras 3 otherwise. The master
writes the resolved mode into the job config; each PS and worker applies it before it imports
TensorFlow (`apply`), and the local launcher puts it in their environment too (`env_for`).

`keras()` is the Keras module of this process (tf_keras or keras); runtime code uses it, or
`is_keras_model` / `is_metric` which know both, where it needs Keras classes.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

ENV = "TF_USE_LEGACY_KERAS"
AUTO, KERAS2, KERAS3 = "auto", "2", "3"
CHOICES = (AUTO, KERAS2, KERAS3)
INSTALL_HINT = (
    "Keras 2 model files need tf_keras: pip install --no-deps 'tf_keras==2.21.*' (the "
    "keras2 extra; --no-deps keeps this environment's TensorFlow)"
)

_MODULE_MARKERS = (
    "tf_keras",
    "tensorflow.python.keras",
    "tensorflow.python.feature_column",
    "elasticdl.feature_column",
    "elasticdl.python.elasticdl.feature_column",
    "elasticdl_preprocessing.feature_column",
)
_NAME_MARKERS = {
    "DenseFeatures": "the DenseFeatures layer",
    "input_layer": "feature columns through input_layer",
}


def markers(source: str) -> list[str]:
    """What in a model file's source needs Keras 2 (empty: nothing seen).

    Imports of tf_keras, tensorflow.python.keras or a feature-column module
    (elasticdl.feature_column and its v0.2 path, elasticdl_preprocessing.feature_column,
    tensorflow.python.feature_column), and any use of
    `DenseFeatures` or `input_layer`: feature columns feed a Keras model only through those.
    (`tf.feature_column.numeric_column` alone, as the first design document's schema, is no
    marker.) A file that does not parse has none: the import will report its error.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[str] = []

    def add(what: str) -> None:
        if what not in found:
            found.append(what)

    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
            modules += [f"{node.module}.{alias.name}" for alias in node.names]
        for module in modules:
            for marker in _MODULE_MARKERS:
                if module == marker or module.startswith(marker + "."):
                    add(f"imports {marker}")
            if module.split(".")[-1] in _NAME_MARKERS:
                add(f"uses {_NAME_MARKERS[module.split('.')[-1]]}")
        if isinstance(node, ast.Attribute) and node.attr in _NAME_MARKERS:
            add(f"uses {_NAME_MARKERS[node.attr]}")
        elif isinstance(node, ast.Name) and node.id in _NAME_MARKERS:
            add(f"uses {_NAME_MARKERS[node.id]}")
    return found


def imports_keras3(source: str) -> bool:
    """Whether the file imports the `keras` package itself (Keras 3 objects: another Keras
    would not help it, so it needs no probe)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name == "keras" or a.name.startswith("keras.") for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "keras":
            return True
    return False


def decide(flag: str, found_markers: list[str], keras3_error: str, keras2_builds: bool) -> str:
    """The mode from the flag, the file's markers and the Keras 3 probe (a table).

    flag 2/3 -> as given; auto with markers -> 2; auto, no markers, Keras 3 builds -> 3;
    auto, Keras 3 fails, Keras 2 builds -> 2; both fail -> 3 (the Keras 3 error is the one
    to report).
    """
    if flag in (KERAS2, KERAS3):
        return flag
    if flag != AUTO:
        raise ValueError(f"--keras_version {flag!r}: expected one of {', '.join(CHOICES)}")
    if found_markers:
        return KERAS2
    if keras3_error and keras2_builds:
        return KERAS2
    return KERAS3


def current() -> str:
    """The mode this process's TensorFlow uses (or will use when imported)."""
    return KERAS2 if os.environ.get(ENV, "") in ("true", "True", "1") else KERAS3


def tensorflow_imported() -> bool:
    return "tensorflow" in sys.modules


_own_process = False


def mark_own_process() -> None:
    """This process runs elasticdl's command, not a program of the user's: the master may
    import Keras without scikit-learn here, as job processes do (job_config.import_tensorflow;
    in a program of the user's, Keras's scikit-learn wrappers would then not work)."""
    global _own_process
    _own_process = True


def own_process() -> bool:
    return _own_process


def env_for(mode: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this environment) with the variable that selects `mode`."""
    env = dict(os.environ if base is None else base)
    if mode == KERAS2:
        env[ENV] = "1"
    else:
        env.pop(ENV, None)
    return env


def check_installed(mode: str) -> None:
    """ValueError with the install hint when Keras 2 is asked for and tf_keras is missing."""
    if mode != KERAS2:
        return
    import importlib.util

    if importlib.util.find_spec("tf_keras") is None:
        raise ValueError(INSTALL_HINT)


def apply(mode: str) -> None:
    """Put this process in `mode` before TensorFlow is imported.

    RuntimeError when TensorFlow was already imported in the other mode: the process cannot
    switch (start it with the environment `env_for(mode)` gives).
    """
    if mode not in (KERAS2, KERAS3):
        mode = KERAS3
    if current() == mode:
        return
    if tensorflow_imported():
        raise RuntimeError(
            f"this process imported TensorFlow with Keras {current()} before the job's mode "
            f"(Keras {mode}) was applied; start it with {ENV}={'1' if mode == KERAS2 else '0'}"
        )
    check_installed(mode)
    if mode == KERAS2:
        os.environ[ENV] = "1"
    else:
        os.environ.pop(ENV, None)


def keras() -> ModuleType:
    """The Keras of this process: tf_keras in Keras 2 mode, keras otherwise."""
    if current() == KERAS2:
        import tf_keras

        return tf_keras
    import keras as keras3

    return keras3


def _loaded_kerases() -> list[ModuleType]:
    """The Keras packages imported so far (both may be, in a Keras 2 process)."""
    found = []
    for name in ("keras", "tf_keras"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "Model"):
            found.append(module)
    if not found:
        found.append(keras())
    return found


def is_keras_model(obj: Any) -> bool:
    return any(isinstance(obj, k.Model) for k in _loaded_kerases())


def is_keras_model_class(obj: Any) -> bool:
    import inspect

    return inspect.isclass(obj) and any(issubclass(obj, k.Model) for k in _loaded_kerases())


def is_metric(obj: Any) -> bool:
    return any(isinstance(obj, k.metrics.Metric) for k in _loaded_kerases())


def read(variable: Any) -> Any:
    """A variable's value as a tensor (Keras 3 Variable or tf.Variable alike)."""
    import tensorflow as tf

    return tf.convert_to_tensor(variable)
