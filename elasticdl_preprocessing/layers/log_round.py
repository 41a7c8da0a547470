"""`LogRound(num_bins, default_value=0, base=None)`: numbers to ids by `round(log(x))`.

    LogRound(num_bins=16, base=2)([[1.2], [1.6], [0.2], [3.1], [100]])
    -> [[0], [1], [0], [2], [7]]

`base` None is the natural logarithm. A result outside `[0, num_bins)` -- and the logarithm of
0 or of a negative number -- becomes `default_value`. Rounding is TensorFlow's (halves to even).
Input: a numeric tensor, `tf.RaggedTensor` or `tf.SparseTensor`; output: int64 of the same
structure.
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer, map_values


class LogRound(Layer):
    def __init__(
        self, num_bins: int, default_value: int = 0, base: float | None = None, **kwargs: Any
    ) -> None:
        if int(num_bins) <= 0:
            raise ValueError(f"LogRound: num_bins must be a positive int, got {num_bins!r}")
        if base is not None and (float(base) <= 0 or float(base) == 1):
            raise ValueError(f"LogRound: base must be positive and not 1, got {base!r}")
        super().__init__(**kwargs)
        self.num_bins = int(num_bins)
        self.default_value = int(default_value)
        self.base = base

    def call(self, inputs: Any) -> Any:
        return map_values(inputs, self._log_round)

    def _log_round(self, values: tf.Tensor) -> tf.Tensor:
        values = tf.cast(values, tf.float64)
        positive = values > 0
        logs = tf.math.log(tf.where(positive, values, tf.ones_like(values)))
        if self.base is not None:
            logs = logs / math.log(float(self.base))
        rounded = tf.round(logs)
        valid = positive & (rounded >= 0) & (rounded < self.num_bins)
        ids = tf.cast(tf.where(valid, rounded, tf.zeros_like(rounded)), tf.int64)
        return tf.where(valid, ids, tf.constant(self.default_value, tf.int64))

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "num_bins": self.num_bins,
            "default_value": self.default_value,
            "base": self.base,
        }
