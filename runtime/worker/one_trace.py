"""A compiled function called through one concrete function, traced once with relaxed shapes.

Why: calling a `tf.function` binds its arguments to the signatures it has traced on every
call (canonicalize, cast each TensorSpec, look up the cache). For a worker's step that is
several hundred microseconds a minibatch: measured on an 8-column DNN step, 512 us through the
`tf.function`, 359 us through its concrete function (most of what is left is the graph); for
the assignment of an 8-variable model 835 -> 549 us. A worker calls the same function with
the same structure every minibatch, so one concrete function does, traced up front for any
batch size (the last minibatch of a task is shorter) -- what `reduce_retracing` would reach
after a second trace. The concrete function is called flat (`runtime/flat_call.py`), past
its own binding as well.

Contract: `OneTrace(function)(*args)` returns what `function(*args)` returns. A function that
cannot be traced with relaxed shapes (model code that needs a static batch size, such as
`tf.reshape(x, [x.shape[0], -1])`) and inputs the relaxed trace does not take (another
structure or dtype, an inner dimension that changes between minibatches with
`static_inner_dims`) make it fall back to the `tf.function`'s own dispatch from then on, so a
model is never refused what the plain function accepts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from elasticdl.runtime.flat_call import FlatCall


class OneTrace:
    """`function` (a `tf.function`) through one concrete function (see the module docstring)."""

    def __init__(self, function: Any, static_inner_dims: bool = True) -> None:
        self.function = function
        self._static_inner_dims = static_inner_dims
        self._concrete: Any = None
        self._dispatching = False

    @property
    def traced(self) -> bool:
        return self._concrete is not None or self._dispatching

    @property
    def traces(self) -> int:
        """How often `function` was traced."""
        return int(self.function.experimental_get_tracing_count())

    def __call__(self, *args: Any) -> Any:
        if self._dispatching:
            return self.function(*args)
        if self._concrete is None:
            try:
                specs = relaxed(args, self._static_inner_dims)
                self._concrete = FlatCall(self.function.get_concrete_function(*specs))
            except Exception:  # noqa: BLE001 - the plain call raises what is the caller's
                self._dispatching = True
                return self.function(*args)
        try:
            return self._concrete(*args)
        except TypeError:  # not what the relaxed trace takes: the function's own dispatch
            self._dispatching = True
            return self.function(*args)


def relaxed(structure: Any, static_inner_dims: bool = True) -> Any:
    """Type specs of `structure` with the first (batch) dimension unknown, and with
    `static_inner_dims=False` every dimension but the last (dense, ragged and sparse tensors
    and numpy arrays; other values as they are)."""

    def spec(value: Any) -> Any:
        if isinstance(value, tf.SparseTensor):
            return tf.SparseTensorSpec([None] * value.shape.rank, value.dtype)
        if isinstance(value, tf.RaggedTensor):
            shape = [None] * (value.shape.rank - 1) + [value.shape[-1]]
            return tf.RaggedTensorSpec(
                shape, value.dtype, value.ragged_rank, value.row_splits.dtype
            )
        if not isinstance(value, (tf.Tensor, np.ndarray)):
            return value
        value = tf.convert_to_tensor(value)
        shape = value.shape.as_list()
        if len(shape) >= 2 and not static_inner_dims:
            shape = [None] * (len(shape) - 1) + shape[-1:]
        elif shape:
            shape = [None, *shape[1:]]
        return tf.TensorSpec(shape, value.dtype)

    return tf.nest.map_structure(spec, structure)
