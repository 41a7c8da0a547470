"""`Discretization(bins)`: numbers to bucket ids by boundaries.

Bucket `i` holds `bins[i-1] <= x < bins[i]` (each bucket includes its left boundary), so
`bins=[1, 5, 10]` makes 4 buckets: `(-inf, 1) [1, 5) [5, 10) [10, inf)`, and
`[0.2, 1.6, 4.2, 6.1, 10.9] -> [0, 1, 1, 2, 3]`. Boundaries must be in non-decreasing order
(a repeated boundary gives an empty bucket). Input: a numeric tensor, `tf.RaggedTensor` or
`tf.SparseTensor`; output: int64 bucket ids of the same structure. `num_bins()` is
`len(bins) + 1`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer, map_values


class Discretization(Layer):
    def __init__(self, bins: list[float], **kwargs: Any) -> None:
        bins = [float(b) for b in bins]
        if any(b > a for a, b in zip(bins[1:], bins, strict=False)):
            raise ValueError(f"Discretization: bins must be in non-decreasing order, got {bins}")
        super().__init__(**kwargs)
        self.bins = bins

    def num_bins(self) -> int:
        return len(self.bins) + 1

    def call(self, inputs: Any) -> Any:
        return map_values(inputs, self._bucketize)

    def _bucketize(self, values: tf.Tensor) -> tf.Tensor:
        if values.dtype not in (tf.int32, tf.int64, tf.float32, tf.float64):
            values = tf.cast(values, tf.float64)
        return tf.cast(tf.raw_ops.Bucketize(input=values, boundaries=self.bins), tf.int64)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "bins": list(self.bins)}
