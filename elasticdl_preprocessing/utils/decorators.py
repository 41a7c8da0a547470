"""`declare_model_inputs(*names)`: a class decorator naming the input tensors a subclassed
Keras model takes (`Model._model_inputs`), for code generators that cannot read them from
`call(self, inputs)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def declare_model_inputs(*names: str) -> Callable[[type], type]:
    """Set `cls._model_inputs = list(names)`; ValueError when no name or a non-string is given."""
    inputs = list(names)
    if not inputs:
        raise ValueError("declare_model_inputs: give at least one input name")
    if not all(isinstance(name, str) for name in inputs):
        raise ValueError(f"declare_model_inputs: input names must be strings, got {inputs!r}")

    def decorate(cls: Any) -> Any:
        cls._model_inputs = list(inputs)
        return cls

    return decorate
