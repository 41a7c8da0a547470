"""A traced concrete function called with its inputs flattened here, past TensorFlow's binding.

Why: `ConcreteFunction.__call__` binds its arguments to the traced signature on every call
(canonicalize, cast each value by its trace type, unpack), then runs `_call_flat`. For the
worker's step of `regressor.DNN` (6 values, 8 feature columns, the labels) that binding took
~170 us of a ~270 us call measured alone, and the PS's application pays it per push as well:
both are on a minibatch's round trip. `FlatCall` checks what the binding checks that can go
wrong here (the structure, each tensor's dtype and shape) and calls `_call_flat` itself.

Contract: `FlatCall(concrete)(*args)` returns what `concrete(*args)` returns. Arguments the
check does not pass (another structure, a dtype or shape the trace does not take, composite
tensors, graph mode) go through `concrete(*args)`, which converts them or raises exactly as
before. `_call_flat` is TensorFlow's private method (2.21, the version pyproject pins); where it
is missing, every call is the plain one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf


class FlatCall:
    """`concrete` (a `tf.types.experimental.ConcreteFunction`) called flat when it can be."""

    def __init__(self, concrete: Any) -> None:
        self.concrete = concrete
        self._structure = concrete.structured_input_signature[0]
        specs = tf.nest.flatten(self._structure)
        self._flat = getattr(concrete, "_call_flat", None)
        if not all(type(spec) is tf.TensorSpec for spec in specs):
            self._flat, specs = None, []  # Python values or composites: bound each call
        self._specs = [(spec.dtype, spec.shape.rank, spec.shape.as_list()) for spec in specs]

    def __call__(self, *args: Any) -> Any:
        tensors = self._tensors(args) if self._flat is not None else None
        if tensors is None:
            return self.concrete(*args)
        return self._flat(tensors, self.concrete.captured_inputs)

    def _tensors(self, args: tuple[Any, ...]) -> list[Any] | None:
        """`args` as the traced function's flat inputs, or None where the check fails."""
        if not tf.executing_eagerly():
            return None
        try:
            tf.nest.assert_same_structure(args, self._structure, check_types=False)
        except (ValueError, TypeError):
            return None
        leaves = tf.nest.flatten(args)
        out = []
        for leaf, (dtype, rank, dims) in zip(leaves, self._specs, strict=True):
            if isinstance(leaf, np.ndarray):
                leaf = tf.convert_to_tensor(leaf)
            elif not isinstance(leaf, tf.Tensor):  # a composite or Python value: bound
                return None
            shape = leaf.shape
            if leaf.dtype != dtype or shape.rank != rank:
                return None
            if any(want is not None and want != got for want, got in zip(dims, shape, strict=True)):
                return None
            out.append(leaf)
        return out
