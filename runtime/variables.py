"""Stable names for a Keras model's variables: the keys parameter servers store them under.

Keras 3 `Variable.name` is the bare attribute name (`kernel`), shared by every layer, so it
cannot key a parameter store. `Variable.path` (`dense_1/kernel`) is unique within a built
model and the same in every process that builds the same model definition, which is what
master, parameter servers and workers need. A duplicate path (possible with hand-made
variables) gets a `#n` suffix in model order, deterministic as well.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def named_variables(model: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(trainable, non_trainable) dicts of stable name -> variable, in model order."""
    seen: dict[str, int] = {}

    def key(variable: Any) -> str:
        base = getattr(variable, "path", None) or variable.name
        count = seen.get(base, 0)
        seen[base] = count + 1
        return base if count == 0 else f"{base}#{count}"

    trainable = {key(v): v for v in model.trainable_variables}
    non_trainable = {key(v): v for v in model.non_trainable_variables}
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
