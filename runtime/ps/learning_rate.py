"""A learning rate set by a model file's LearningRateScheduler, per gradient application.

The PS shard sets the optimizer's learning-rate variable to `rate(version, initial)` before
the application that makes version `version + 1` (dense and embedding updates alike), so the
rate follows the model version whatever the number of workers, in async and sync mode, and
after a relaunch from a checkpoint (the rate is recomputed from the version, never stored).
`initial` is the optimizer's own rate, read before the first change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class ScheduledLearningRate:
    def __init__(self, rate: Callable[[int, float], float | None]) -> None:
        self._rate = rate
        self._initial: float | None = None

    def set(self, variable: Any, version: int) -> None:
        """Assign the scheduled rate of the application at `version` to `variable`."""
        import keras

        if not isinstance(variable, keras.Variable):
            raise TypeError(
                "a LearningRateScheduler needs an optimizer whose learning rate is a number, "
                f"not {type(variable).__name__}"
            )
        if self._initial is None:
            self._initial = float(np.asarray(variable.numpy()))
        rate = self._rate(int(version), self._initial)
        if rate is not None:
            variable.assign(rate)
