"""A shard's compiled optimizer applications, and their compilation before the first push.

Each application is a concrete `tf.function` with `jit_compile=True`: XLA fuses the optimizer's
per-variable ops, which keeps an apply near the cost of one function call. An optimizer XLA
cannot compile falls back, once and for good, to a plain graph function.

XLA compiles at a function's first call, and the first push of a job paid for it: 0.32 s
(0.07 s tracing, 0.25 s compiling) for `regressor.DNN`, while the worker waited for the answer,
after the 0.25 s it had spent building its input pipeline and tracing its own step with this
process idle. `warm_up` runs the application over every variable once, as soon as the model is
there, and puts back every value it touched: the first push finds it compiled.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np

_log = logging.getLogger("elasticdl.runtime.ps.parameters")


class ApplyFunctions:
    """Compiled optimizer applications, one per subset of variables (usually just "all")."""

    def __init__(self, optimizer: Any, variables: list[Any], scale: Any) -> None:
        import keras

        self._optimizer = optimizer
        self._variables = variables
        self._scale = scale
        lr = optimizer._learning_rate  # the Keras 3 attribute behind `learning_rate`
        self._lr_variable = lr if isinstance(lr, keras.Variable) else None
        self._functions: dict[tuple[int, ...], Any] = {}
        self.jit = True

    @property
    def compiled(self) -> set[tuple[int, ...]]:
        """The subsets (variable indices) whose application has run, compiled, at least once."""
        return set(self._functions)

    def __call__(self, indices: tuple[int, ...], grads: list[np.ndarray], lr_scale: float) -> None:
        import tensorflow as tf

        tensors = [tf.convert_to_tensor(g) for g in grads]
        scale = tf.constant(lr_scale, dtype=tf.float32)
        function = self._functions.get(indices)
        if function is not None:
            function(tensors, scale)
            return
        function = self._build(indices)
        try:
            function(tensors, scale)
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError) as error:
            if not self.jit:
                raise
            # XLA compiles before anything runs: no variable has changed yet.
            _log.warning("optimizer does not compile with XLA, using a graph function: %s", error)
            self.jit = False
            self._functions.clear()
            function = self._build(indices)
            function(tensors, scale)
        self._functions[indices] = function

    def warm_up(self, others: Iterable[Any] = ()) -> bool:
        """Compile the application over every variable by running it once on zero gradients,
        then assign back every value it may have changed: the variables, the optimizer's
        (iterations, slots, learning rate) and `others`. Afterwards everything holds exactly
        what it held before. The caller holds the shard's lock. False (and nothing compiled
        or changed) when it fails: the first push then meets the error itself."""
        if not self._variables:
            return False
        touched = {id(v): v for v in [*self._variables, *self._optimizer.variables, *others]}
        touched[id(self._scale)] = self._scale
        saved = [(v, v.numpy()) for v in touched.values()]
        indices = tuple(range(len(self._variables)))
        zeros = [np.zeros(v.shape, dtype=v.dtype) for v in self._variables]
        try:
            self(indices, zeros, 0.0)
            return True
        except Exception as error:  # noqa: BLE001 - the first push raises it where it belongs
            _log.debug("compiling the optimizer ahead failed: %s", error)
            self._functions.pop(indices, None)
            return False
        finally:
            for variable, value in saved:
                variable.assign(value)

    def _build(self, indices: tuple[int, ...]) -> Any:
        import tensorflow as tf

        chosen = [self._variables[i] for i in indices]
        optimizer, lr_variable, scale_variable = self._optimizer, self._lr_variable, self._scale

        def apply(grads: list[Any], lr_scale: Any) -> None:
            if lr_variable is not None:
                base = tf.identity(lr_variable.value)
                lr_variable.assign(base * tf.cast(lr_scale, lr_variable.dtype))
                optimizer.apply(list(grads), chosen)
                lr_variable.assign(base)
            else:
                scale_variable.assign(lr_scale)
                optimizer.apply(list(grads), chosen)

        specs = [tf.TensorSpec(v.shape, v.dtype) for v in chosen]
        function = tf.function(apply, jit_compile=self.jit, autograph=False)
        return function.get_concrete_function(specs, tf.TensorSpec((), tf.float32))
