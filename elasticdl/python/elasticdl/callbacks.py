"""ElasticDL v0.2's callbacks, honoured by elastic jobs (`callbacks()` in a model file).

* `LearningRateScheduler(schedule)`: `schedule(model_version) -> float` is the learning rate
  of each gradient application: every parameter server sets it before applying the gradients
  that make version `model_version + 1` (the optimizer's learning rate must be a number,
  not a Keras schedule).
* `MaxStepsStopping(max_steps)`: the master hands out no more training tasks once the model
  version reached `max_steps`; tasks in flight finish, then the job evaluates, exports and
  succeeds.
* `SavedModelExporter(...)`: accepted for compatibility; every job exports a SavedModel to
  `OUTPUT/saved_model` anyway.

Outside a job (plain Keras `fit`) the first two act on the optimizer's `iterations`, so a
model file behaves the same in a quick local check. They are callbacks of this process's Keras
(runtime/keras_mode.py): tf_keras's in Keras 2 mode, whose `fit` accepts only its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elasticdl.runtime import keras_mode

_Callback: Any = keras_mode.keras().callbacks.Callback


class LearningRateScheduler(_Callback):
    """The learning rate as a function of the model version."""

    def __init__(self, schedule: Callable[[int], float]) -> None:
        super().__init__()
        if not callable(schedule):
            raise TypeError("LearningRateScheduler(schedule): schedule must be a function")
        self.schedule = schedule

    def learning_rate(self, model_version: int) -> float:
        """The scheduled rate at `model_version`; a clear error when it is not a number."""
        value = self.schedule(int(model_version))
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"LearningRateScheduler: schedule({model_version}) returned {value!r}; "
                "it must return a float"
            ) from None

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        optimizer = self.model.optimizer
        optimizer.learning_rate = self.learning_rate(int(optimizer.iterations.numpy()))


class MaxStepsStopping(_Callback):
    """Stop training once the model version reaches `max_steps`."""

    def __init__(self, max_steps: int) -> None:
        super().__init__()
        if int(max_steps) < 1:
            raise ValueError(f"MaxStepsStopping(max_steps={max_steps}): max_steps must be >= 1")
        self.max_steps = int(max_steps)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if int(self.model.optimizer.iterations.numpy()) >= self.max_steps:
            self.model.stop_training = True


class SavedModelExporter(_Callback):
    """Accepted for v0.2 compatibility: jobs always export `OUTPUT/saved_model`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()


__all__ = ["LearningRateScheduler", "MaxStepsStopping", "SavedModelExporter"]
