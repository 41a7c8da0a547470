"""`Hashing(num_bins)`: categorical values to ids in `[0, num_bins)` by a fixed hash.

    Hashing(num_bins=3)(np.asarray([["A"], ["B"], ["C"], ["D"], ["E"]]))
    -> [[1], [0], [1], [1], [2]]

Strings go through TensorFlow's `to_hash_bucket_fast` (FarmHash Fingerprint64 modulo
`num_bins`), integers through their decimal text first, so the same value gets the same id in
every process and every run. Input: a string or integer tensor, `tf.RaggedTensor` or
`tf.SparseTensor`; output: int64 ids of the same structure.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer, map_values


class Hashing(Layer):
    def __init__(self, num_bins: int, **kwargs: Any) -> None:
        if num_bins is None or int(num_bins) <= 0:
            raise ValueError(f"Hashing: num_bins must be a positive int, got {num_bins!r}")
        super().__init__(**kwargs)
        self.num_bins = int(num_bins)

    def call(self, inputs: Any) -> Any:
        return map_values(inputs, self._hash)

    def _hash(self, values: tf.Tensor) -> tf.Tensor:
        if values.dtype != tf.string:
            values = tf.strings.as_string(values)
        return tf.strings.to_hash_bucket_fast(values, self.num_bins)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_bins": self.num_bins}
