"""The worker's compiled functions for a model whose parameters are all dense.

`step(values, features, labels)` assigns `values` to the model's variables (the update of the
local copy the last push answered with, runtime/worker/trainer.py `_take`), then computes the
loss, the gradients of the trainable variables (zeros for one the loss does not reach) and the
non-trainable state after the forward pass. Assigning inside the step makes a minibatch one
TensorFlow call instead of two: with the assignment a call of its own, it stood between a push's
answer and the next push, 0.47 ms of regressor.DNN's 4.15 ms minibatch in a job (0.20 ms alone).
The step is called through its one concrete function (`one_trace.py`).

`assign_all(values)` assigns without computing, for readers of the model other than the step;
`predict(features)` is the model in inference mode.

With `xla` (--jit_compile, decided by `step_uses_xla` as Keras decides its own `jit_compile`),
the step is compiled by XLA; a step XLA refuses (string ops, some lookups) runs without it from
its first call on, which is safe to repeat: XLA compiles before anything executes, and what
the step writes (the values it is given) the plain retry writes again (an error that is the
model's own comes back from the plain step). Measured on 2 CPU cores
(bench/RESULTS.md): `regressor.DNN`'s minibatch 2.82-3.15 -> 2.66-2.80 ms, the MNIST CNN's
11.8 -> 76 ms (XLA's CPU convolutions against oneDNN's), hence not on CPUs by default.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from elasticdl.runtime.flat_call import FlatCall
from elasticdl.runtime.worker.one_trace import OneTrace

_log = logging.getLogger("elasticdl.worker")


def step_uses_xla(setting: str, accelerators: int) -> bool:
    """Whether the step is compiled by XLA: --jit_compile `setting` (auto, true, false) on a
    worker with `accelerators` non-CPU devices. auto is Keras's `jit_compile="auto"` on
    TensorFlow: XLA where there is an accelerator, not on a CPU-only machine."""
    return {"true": True, "false": False}.get(setting, accelerators > 0)


class XlaFirst:
    """The XLA-compiled step, or from the first call XLA refuses on, the plain one."""

    def __init__(self, xla: OneTrace, plain: OneTrace) -> None:
        self._xla: OneTrace | None = xla
        self._plain = plain
        self._compiled = False

    @property
    def uses_xla(self) -> bool:
        return self._xla is not None

    @property
    def traces(self) -> int:
        return (self._xla or self._plain).traces

    def __call__(self, *args: Any) -> Any:
        if self._xla is not None:
            try:
                out = self._xla(*args)
            except tf.errors.OpError as error:  # unsupported ops; no libdevice on a GPU; ...
                if self._compiled:
                    raise
                _log.warning(
                    "the training step does not compile with XLA (--jit_compile); training "
                    "without it: %s",
                    str(error).strip().splitlines()[0] if str(error).strip() else error,
                )
                self._xla = None
            else:
                self._compiled = True
                return out
        return self._plain(*args)


@dataclass
class DenseFunctions:
    step: OneTrace | XlaFirst
    assign_all: FlatCall  # a concrete function called flat (runtime/flat_call.py)
    predict: Any


def dense_functions(
    model: Any, loss_fn: Any, variables: list[Any], state: list[Any], xla: bool = False
) -> DenseFunctions:
    """The functions over `variables` (trainable) and `state` (non-trainable), whose values
    `step` and `assign_all` take in that order; `xla`: the step compiled by XLA (see above)."""
    everything = variables + state

    def assign(values: list[Any]) -> None:
        for variable, value in zip(everything, values, strict=True):
            variable.assign(value)

    def step(values: list[Any], features: Any, labels: Any) -> tuple[Any, list[Any], list[Any]]:
        assign(values)
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            loss = loss_fn(labels, predictions)
            if model.losses:
                loss = loss + tf.add_n(model.losses)
        gradients = tape.gradient(loss, variables)
        dense = [
            tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
            for g, v in zip(gradients, variables, strict=True)
        ]
        return loss, dense, [tf.convert_to_tensor(v) for v in state]

    @tf.function(input_signature=[[tf.TensorSpec(v.shape, v.dtype) for v in everything]])
    def assign_all(values: list[Any]) -> None:
        assign(values)

    @tf.function(reduce_retracing=True)
    def predict(features: Any) -> Any:
        return model(features, training=False)

    traced: OneTrace | XlaFirst = OneTrace(tf.function(step, reduce_retracing=True))
    if xla:
        traced = XlaFirst(
            OneTrace(tf.function(step, reduce_retracing=True, jit_compile=True)), traced
        )
    return DenseFunctions(traced, FlatCall(assign_all.get_concrete_function()), predict)
