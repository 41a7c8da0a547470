"""`Normalizer(subtractor, divisor)`: `(x - subtractor) / divisor` as float32.

    Normalizer(subtractor=1.0, divisor=2.0)([[3.0], [5.0], [7.0]]) -> [[1.0], [2.0], [3.0]]

Input: a numeric tensor, `tf.RaggedTensor` or `tf.SparseTensor` (integers too); output:
float32 of the same structure. A divisor of 0 is refused when the layer is made.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer, map_values


class Normalizer(Layer):
    def __init__(self, subtractor: float, divisor: float, **kwargs: Any) -> None:
        if float(divisor) == 0.0:
            raise ValueError("Normalizer: the divisor cannot be 0")
        super().__init__(**kwargs)
        self.subtractor = float(subtractor)
        self.divisor = float(divisor)

    def call(self, inputs: Any) -> Any:
        return map_values(inputs, self._normalize)

    def _normalize(self, values: tf.Tensor) -> tf.Tensor:
        return (tf.cast(values, tf.float32) - self.subtractor) / self.divisor

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "subtractor": self.subtractor, "divisor": self.divisor}
