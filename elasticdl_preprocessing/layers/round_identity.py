"""`RoundIdentity(num_buckets, default_value=0)`: a number, rounded, is its own id.

    RoundIdentity(num_buckets=10)([[1.2], [1.6], [0.2], [3.1], [4.9]]) -> [[1], [2], [0], [3], [5]]

A rounded value outside `[0, num_buckets)` becomes `default_value`; rounding is TensorFlow's
(halves to even); numeric strings are read as numbers first. Input: a numeric or string tensor,
`tf.RaggedTensor` or `tf.SparseTensor`; output: int64 of the same structure.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer, map_values


class RoundIdentity(Layer):
    def __init__(self, num_buckets: int, default_value: int = 0, **kwargs: Any) -> None:
        if int(num_buckets) <= 0:
            raise ValueError(f"RoundIdentity: num_buckets must be positive, got {num_buckets!r}")
        super().__init__(**kwargs)
        self.num_buckets = int(num_buckets)
        self.default_value = int(default_value)

    def call(self, inputs: Any) -> Any:
        return map_values(inputs, self._round)

    def _round(self, values: tf.Tensor) -> tf.Tensor:
        if values.dtype == tf.string:
            values = tf.strings.to_number(values, tf.float64)
        rounded = tf.round(tf.cast(values, tf.float64))
        valid = (rounded >= 0) & (rounded < self.num_buckets)
        ids = tf.cast(tf.where(valid, rounded, tf.zeros_like(rounded)), tf.int64)
        return tf.where(valid, ids, tf.constant(self.default_value, tf.int64))

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "num_buckets": self.num_buckets,
            "default_value": self.default_value,
        }
