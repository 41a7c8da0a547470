"""Optimizers for embedding rows: Keras's update rules applied to the touched rows only (numpy).

Lazy semantics: an application updates exactly the rows whose ids are in it. A row's slots
(momentum, Adam's moments, Adagrad's accumulator, ...) move only when the row is touched; an
untouched row neither decays its moments nor keeps moving on momentum, unlike Keras applying the
same optimizer to a dense table (where every row moves every step). For a row touched at every
application the two agree to float tolerance.

Adam's bias correction uses the row's OWN step count (slot `step`: how many applications touched
the row), not the global step: a row first touched late starts with the same correction as a
fresh Keras Adam, so each row behaves exactly like a Keras Adam that steps only when its row
is touched (what the tests check against Keras).

The learning rate is passed per application (the PS computes the Keras optimizer's current value
-- a schedule evaluated at the dense optimizer's iterations -- times the push's scale, e.g. the
staleness modulation); `learning_rate` here is the fallback.

`from_keras(optimizer)` builds the sparse twin of a Keras 3 optimizer from its class and
`get_config()`: SGD (momentum, nesterov), Adam (amsgrad), Adagrad, RMSprop (momentum, centered);
`clipvalue` is honoured. Other classes, `weight_decay`, `clipnorm`, `global_clipnorm`, EMA and
gradient accumulation are refused with one line (they are not defined per row).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SlotSpec:
    """A per-row slot: `width` 0 means the table's dim; `initial` is its value for a new row."""

    name: str
    width: int = 0
    initial: float = 0.0
    dtype: str = "float32"


@dataclass
class SparseOptimizer:
    """Base: subclasses define `slot_specs` and `update`; `clipvalue` clips gradients first."""

    learning_rate: float = 0.01
    clipvalue: float | None = None

    def slot_specs(self) -> tuple[SlotSpec, ...]:
        return ()

    def update(
        self,
        params: np.ndarray,
        grads: np.ndarray,
        slots: Mapping[str, np.ndarray],
        learning_rate: float,
    ) -> None:
        """Update `params` (n, dim) and `slots` (name -> (n, width)) in place."""
        raise NotImplementedError

    def apply(
        self,
        params: np.ndarray,
        grads: np.ndarray,
        slots: Mapping[str, np.ndarray],
        learning_rate: float | None = None,
    ) -> None:
        """Clip (when configured), then `update` with `learning_rate` (default: the configured)."""
        grads = np.asarray(grads, dtype=params.dtype)
        if self.clipvalue:
            grads = np.clip(grads, -self.clipvalue, self.clipvalue)
        lr = self.learning_rate if learning_rate is None else learning_rate
        self.update(params, grads, slots, float(lr))


@dataclass
class SGD(SparseOptimizer):
    momentum: float = 0.0
    nesterov: bool = False

    def slot_specs(self) -> tuple[SlotSpec, ...]:
        return (SlotSpec("momentum"),) if self.momentum else ()

    def update(self, params, grads, slots, learning_rate) -> None:
        lr = np.float32(learning_rate)
        if not self.momentum:
            params -= grads * lr
            return
        m = slots["momentum"]
        mu = np.float32(self.momentum)
        step = -grads * lr
        m *= mu
        m += step
        if self.nesterov:
            params += step + m * mu
        else:
            params += m


@dataclass
class Adam(SparseOptimizer):
    learning_rate: float = 0.001
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-7
    amsgrad: bool = False

    def _corrections(self, max_step: int) -> tuple[np.ndarray, np.ndarray]:
        """sqrt(1 - beta_2^t) and 1 - beta_1^t for t = 0..max_step, float32, cached."""
        cached = getattr(self, "_cache", None)
        if cached is None or cached[0].size <= max_step:
            t = np.arange(max(2 * max_step, 1024) + 1, dtype=np.float32)
            one = np.float32(1.0)
            root = np.sqrt(one - np.power(np.float32(self.beta_2), t))
            cached = (root, one - np.power(np.float32(self.beta_1), t))
            self._cache = cached
        return cached

    def slot_specs(self) -> tuple[SlotSpec, ...]:
        specs = [SlotSpec("m"), SlotSpec("v")]
        if self.amsgrad:
            specs.append(SlotSpec("v_hat"))
        return (*specs, SlotSpec("step", 1, 0.0, "int64"))

    def update(self, params, grads, slots, learning_rate) -> None:
        m, v, step = slots["m"], slots["v"], slots["step"]
        step += 1
        root, denominator = self._corrections(int(step.max()))
        t = step[:, 0]
        # float32 like Keras (1 - beta_2 ** t cancels badly; the same rounding as Keras's)
        alpha = (np.float32(learning_rate) * root[t] / denominator[t])[:, None]
        m += (grads - m) * np.float32(1.0 - self.beta_1)
        v += (grads * grads - v) * np.float32(1.0 - self.beta_2)
        if self.amsgrad:
            v_hat = slots["v_hat"]
            np.maximum(v_hat, v, out=v_hat)
            v = v_hat
        denom = np.sqrt(v)
        denom += np.float32(self.epsilon)
        update = m * alpha
        update /= denom
        params -= update


@dataclass
class Adagrad(SparseOptimizer):
    initial_accumulator_value: float = 0.1
    epsilon: float = 1e-7

    def slot_specs(self) -> tuple[SlotSpec, ...]:
        return (SlotSpec("accumulator", 0, self.initial_accumulator_value),)

    def update(self, params, grads, slots, learning_rate) -> None:
        acc = slots["accumulator"]
        acc += grads * grads
        denom = acc + np.float32(self.epsilon)
        np.sqrt(denom, out=denom)
        update = grads * np.float32(learning_rate)
        update /= denom
        params -= update


@dataclass
class RMSprop(SparseOptimizer):
    rho: float = 0.9
    momentum: float = 0.0
    epsilon: float = 1e-7
    centered: bool = False

    def slot_specs(self) -> tuple[SlotSpec, ...]:
        specs = [SlotSpec("velocity")]
        if self.momentum > 0:
            specs.append(SlotSpec("momentum"))
        if self.centered:
            specs.append(SlotSpec("average_gradient"))
        return tuple(specs)

    def update(self, params, grads, slots, learning_rate) -> None:
        rho = np.float32(self.rho)
        velocity = slots["velocity"]
        velocity *= rho
        velocity += np.float32(1.0 - self.rho) * (grads * grads)
        if self.centered:
            average = slots["average_gradient"]
            average *= rho
            average += np.float32(1.0 - self.rho) * grads
            denom = velocity - average * average + np.float32(self.epsilon)
        else:
            denom = velocity + np.float32(self.epsilon)
        increment = np.float32(learning_rate) * grads / np.sqrt(denom)
        if self.momentum > 0:
            momentum = slots["momentum"]
            momentum *= np.float32(self.momentum)
            momentum += increment
            params -= momentum
        else:
            params -= increment


_FIELDS = {
    "SGD": (SGD, ("momentum", "nesterov")),
    "Adam": (Adam, ("beta_1", "beta_2", "epsilon", "amsgrad")),
    "Adagrad": (Adagrad, ("initial_accumulator_value", "epsilon")),
    "RMSprop": (RMSprop, ("rho", "momentum", "epsilon", "centered")),
}
_REFUSED = ("weight_decay", "clipnorm", "global_clipnorm", "use_ema", "loss_scale_factor")


def from_keras(optimizer: Any) -> SparseOptimizer:
    """The sparse twin of a Keras 3 optimizer (class + `get_config()`); ValueError (one line)
    for an optimizer or option that has no per-row meaning here."""
    name = type(optimizer).__name__
    if name not in _FIELDS:
        raise ValueError(
            f"optimizer {name} is not supported for embedding tables on parameter servers; "
            f"use one of {', '.join(sorted(_FIELDS))}"
        )
    config = optimizer.get_config()
    refused = [key for key in _REFUSED if config.get(key)]
    if (config.get("gradient_accumulation_steps") or 1) > 1:
        refused.append("gradient_accumulation_steps")
    if refused:
        raise ValueError(
            f"{name} with {', '.join(refused)} is not supported for embedding tables on "
            "parameter servers; remove those options"
        )
    cls, fields = _FIELDS[name]
    kwargs = {key: config[key] for key in fields if key in config}
    return cls(
        learning_rate=current_learning_rate(optimizer),
        clipvalue=config.get("clipvalue") or None,
        **kwargs,
    )


def current_learning_rate(optimizer: Any) -> float:
    """The Keras optimizer's learning rate now (a schedule at its current iterations)."""
    return float(np.asarray(optimizer.learning_rate))
