"""Stable names for a Keras model's variables: the keys parameter servers store them under.

Keras 3 `Variable.name` is the bare attribute name (`kernel`), shared by every layer, so it
cannot key a parameter store. `Variable.path` (`dense_1/kernel`) is unique within a model,
but its automatic suffixes come from a per-process counter: a process that built another
model first names the same layer `dense_3`. Master, parameter servers, workers and a later
prediction job must agree, so the key is the variable's position in the model plus its path
with those counter suffixes removed: `t003/dense/kernel` for the fourth trainable variable,
`n000/batch_normalization/moving_mean` for the first non-trainable one. The same model
definition yields the same keys in every process.

Random-number generator state (Keras `SeedGenerator`, used by Dropout) is not a parameter:
each replica keeps its own, so it is neither stored nor synchronized.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

_COUNTER_SUFFIX = re.compile(r"_\d+(?=/|$)")


def _is_rng_state(variable: Any) -> bool:
    path = getattr(variable, "path", "") or variable.name
    return path.endswith("seed_generator_state")


def stable_key(prefix: str, position: int, variable: Any) -> str:
    path = getattr(variable, "path", None) or variable.name
    return f"{prefix}{position:03d}/{_COUNTER_SUFFIX.sub('', path)}"


def named_variables(model: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(trainable, non_trainable) dicts of stable key -> variable, in model order."""
    trainable = {stable_key("t", i, v): v for i, v in enumerate(model.trainable_variables)}
    state = [v for v in model.non_trainable_variables if not _is_rng_state(v)]
    non_trainable = {stable_key("n", i, v): v for i, v in enumerate(state)}
    return trainable, non_trainable


def values_of(variables: dict[str, Any]) -> dict[str, np.ndarray]:
    """Current values as NumPy arrays."""
    return {name: np.asarray(v.numpy()) for name, v in variables.items()}


def assign(variables: dict[str, Any], values: dict[str, np.ndarray]) -> None:
    """Assign arrays to the variables they name; unknown or mis-shaped names are an error."""
    for name, value in values.items():
        variable = variables.get(name)
        if variable is None:
            raise KeyError(f"no variable named {name!r} in the model")
        if tuple(variable.shape) != tuple(value.shape):
            raise ValueError(
                f"variable {name!r} has shape {tuple(variable.shape)}, got {tuple(value.shape)}"
            )
        variable.assign(value)
