"""A shard's compiled optimizer applications, and their compilation before the first push.

Each application is a concrete `tf.function` with `jit_compile=True`: XLA fuses the optimizer's
per-variable ops, which keeps an apply near the cost of one function call. An optimizer XLA
cannot compile falls back, once and for good, to a plain graph function.

XLA compiles at a function's first call, and the first push of a job paid for it: 0.32 s
(0.07 s tracing, 0.25 s compiling) for `regressor.DNN`, while the worker waited for the answer,
after the 0.25 s it had spent building its input pipeline and tracing its own step with this
process idle. `warm_up` runs the application over every variable once, as soon as the model is
there, and puts back every value it touched: the first push finds it compiled.

A push that asks for the values back gets them from the applying call itself when the shard
is small (`READ_IN_CALL_BYTES`): one call instead of one eager read per variable.

Received gradients reach an XLA application through `GradientBuffers`: `tf.convert_to_tensor`
copies an array even when it is aligned, and at ~5 GB/s (2.0 ms for 10 MB on the machines of
bench/RESULTS.md, where `np.copyto` into a buffer already in use takes 0.7 ms).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np

_log = logging.getLogger("elasticdl.runtime.ps.parameters")

READ_IN_CALL_BYTES = 2_000_000
"""Up to this many bytes of variables, a push's answer is read by the applying call itself
(`ApplyFunctions.__call__`). Measured on the 2-core Xeon of bench/RESULTS.md, Adam / SGD: a
2,748-value model 0.51 -> 0.33 / 0.28 -> 0.12 ms; 1.2 M values 1.45 -> 1.28 / 0.89 -> 0.97 ms;
10 MB 2.27 -> 2.44 / 1.15 -> 1.34 ms."""


def _nbytes(variable: Any) -> int:
    return int(np.prod(variable.shape, dtype=np.int64)) * np.dtype(variable.dtype).itemsize


class ApplyFunctions:
    """Compiled optimizer applications, one per subset of variables (usually just "all")."""

    def __init__(self, optimizer: Any, variables: list[Any], scale: Any) -> None:
        import keras

        self._optimizer = optimizer
        self._variables = variables
        self._scale = scale
        lr = optimizer._learning_rate  # the Keras 3 attribute behind `learning_rate`
        self._lr_variable = lr if isinstance(lr, keras.Variable) else None
        self._functions: dict[tuple[tuple[int, ...], bool], Any] = {}
        self._buffers = GradientBuffers()
        self.jit = True
        self.reads_in_call = sum(_nbytes(v) for v in variables) <= READ_IN_CALL_BYTES

    @property
    def compiled(self) -> set[tuple[int, ...]]:
        """The subsets (variable indices) whose application has run, compiled, at least once."""
        return {indices for indices, _ in self._functions}

    def __call__(
        self,
        indices: tuple[int, ...],
        grads: list[np.ndarray],
        lr_scale: float,
        read: bool = False,
    ) -> list[np.ndarray] | None:
        """Apply `grads` to the variables `indices`. With `read`, and variables of at most
        `READ_IN_CALL_BYTES`, also return every variable's value after it (in the order of
        construction) from the same call: read-only arrays that later updates do not change;
        None otherwise (the caller reads them). Reading a small model's values one by one
        afterwards took 0.18 ms of a 0.5 ms application (six eager reads of `regressor.DNN`);
        above a few MB, XLA's copy of the values into its results costs more than that."""
        import tensorflow as tf

        read = read and self.reads_in_call
        scale = tf.constant(lr_scale, dtype=tf.float32)
        key = (indices, read)
        function = self._functions.get(key)
        if function is None:
            function = self._build(indices, read)
            try:
                out = function(self._tensors(indices, grads), scale)
            except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError) as error:
                if not self.jit:
                    raise
                # XLA compiles before anything runs: no variable has changed yet.
                _log.warning(
                    "optimizer does not compile with XLA, using a graph function: %s", error
                )
                self.jit = False
                self._functions.clear()
                function = self._build(indices, read)
                out = function(self._tensors(indices, grads), scale)
            self._functions[key] = function
        else:
            out = function(self._tensors(indices, grads), scale)
        return [np.asarray(value) for value in out] if read else None

    def _tensors(self, indices: tuple[int, ...], grads: list[np.ndarray]) -> list[Any]:
        """The gradients as tensors: lent buffers for an XLA application, whose results never
        alias its arguments; copies for a graph function, where an assignment may keep its
        value's buffer as the variable's (which the next push's copy would then overwrite)."""
        if self.jit:
            return self._buffers.lend(indices, grads)
        import tensorflow as tf

        return [tf.convert_to_tensor(np.asarray(grad)) for grad in grads]

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
            self(indices, zeros, 0.0, read=True)  # a worker's push asks for the values back
            return True
        except Exception as error:  # noqa: BLE001 - the first push raises it where it belongs
            _log.debug("compiling the optimizer ahead failed: %s", error)
            self._functions.pop((indices, self.reads_in_call), None)
            return False
        finally:
            for variable, value in saved:
                variable.assign(value)

    def _build(self, indices: tuple[int, ...], read: bool) -> Any:
        """The application to the variables `indices`, called flat (runtime/flat_call.py)."""
        import tensorflow as tf

        from elasticdl.runtime.flat_call import FlatCall

        chosen = [self._variables[i] for i in indices]
        every = self._variables
        optimizer, lr_variable, scale_variable = self._optimizer, self._lr_variable, self._scale

        def apply(grads: list[Any], lr_scale: Any) -> list[Any]:
            if lr_variable is not None:
                base = tf.identity(lr_variable.value)
                lr_variable.assign(base * tf.cast(lr_scale, lr_variable.dtype))
                optimizer.apply(list(grads), chosen)
                lr_variable.assign(base)
            else:
                scale_variable.assign(lr_scale)
                optimizer.apply(list(grads), chosen)
            # A read in the function gives an immutable tensor, as `_snapshot` in parameters.py
            # relies on: a later update writes a fresh buffer while it is alive.
            return [variable.value for variable in every] if read else []

        specs = [tf.TensorSpec(v.shape, v.dtype) for v in chosen]
        function = tf.function(apply, jit_compile=self.jit, autograph=False)
        return FlatCall(function.get_concrete_function(specs, tf.TensorSpec((), tf.float32)))


# TensorFlow's CPU kernels (Eigen, XLA) read tensors assuming this alignment (AVX-512).
ALIGNMENT = 64
_LENT_KINDS = frozenset("f")  # float gradients; anything else is converted (a copy)


class GradientBuffers:
    """One aligned buffer per variable, reused by every push: a gradient is copied in and lent
    to TensorFlow through DLPack, which wraps the buffer without another copy.

    The contract that makes reuse safe: the caller holds the shard's lock from `lend` until the
    application that reads the tensors has returned (eager execution is synchronous on CPU), so
    no two pushes share a buffer and nothing reads a lent tensor after its push; and the
    application keeps no lent buffer as a variable's: an XLA one does not (its results never
    alias its arguments), a graph function's assignment may, so `ApplyFunctions` lends only to
    XLA. Gradients of
    other kinds, or any that DLPack refuses, are converted by `tf.convert_to_tensor` as before.
    The cost: the shard keeps one more copy of its dense variables' size (the conversion
    allocated as much for every push).
    """

    def __init__(self) -> None:
        self._held: dict[int, np.ndarray] = {}
        self.enabled = True

    def lend(self, indices: tuple[int, ...], grads: list[np.ndarray]) -> list[Any]:
        """Tensors holding `grads` (the gradients of variables `indices`), valid until the next
        `lend`."""
        import tensorflow as tf

        out = []
        for index, grad in zip(indices, grads, strict=True):
            grad = np.asarray(grad)
            tensor = self._lent(index, grad) if self.enabled else None
            out.append(tf.convert_to_tensor(grad) if tensor is None else tensor)
        return out

    def _lent(self, index: int, grad: np.ndarray) -> Any:
        if grad.dtype.kind not in _LENT_KINDS or grad.size == 0:
            return None
        buffer = self._held.get(index)
        if buffer is None or buffer.shape != grad.shape or buffer.dtype != grad.dtype:
            buffer = self._held[index] = aligned_empty(grad.shape, grad.dtype)
        np.copyto(buffer, grad)
        import tensorflow as tf

        try:
            return tf.experimental.dlpack.from_dlpack(buffer.__dlpack__())
        except (BufferError, TypeError, ValueError, tf.errors.OpError) as error:
            _log.debug("gradients converted by copy: DLPack refused them: %s", error)
            self.enabled = False
            return None


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on an `ALIGNMENT` boundary."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + nbytes].view(dtype).reshape(shape)
