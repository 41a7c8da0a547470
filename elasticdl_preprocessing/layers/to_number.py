"""`ToNumber(out_type, default_value)`: strings (or numbers) to numbers of `out_type`.

    ToNumber(tf.int32, default_value=-1)([["123", ""], ["456", "-789"]])
    -> [[123, -1], [456, -789]]

An empty string becomes `default_value`; any other string must be a number of that type
(TensorFlow's `strings.to_number`). Numeric input is cast. `out_type`: a numeric `tf.DType` or
its name. Input: a tensor or `tf.SparseTensor` (ragged too); output: the same structure.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer, map_values


class ToNumber(Layer):
    def __init__(self, out_type: Any, default_value: Any, **kwargs: Any) -> None:
        dtype = tf.as_dtype(out_type)
        if not (dtype.is_integer or dtype.is_floating):
            raise ValueError(f"ToNumber: {out_type!r} is not a number type")
        super().__init__(**kwargs)
        self.out_type = dtype
        self.default_value = default_value

    def call(self, inputs: Any) -> Any:
        return map_values(inputs, self._to_number)

    def _to_number(self, values: tf.Tensor) -> tf.Tensor:
        if values.dtype != tf.string:
            return tf.cast(values, self.out_type)
        empty = tf.equal(values, "")
        text = tf.where(empty, tf.constant("0", tf.string), values)
        parsed_type = self.out_type if self.out_type in _PARSABLE else tf.float64
        numbers = tf.cast(tf.strings.to_number(text, parsed_type), self.out_type)
        return tf.where(empty, tf.cast(self.default_value, self.out_type), numbers)

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "out_type": self.out_type.name,
            "default_value": self.default_value,
        }


_PARSABLE = (tf.float32, tf.float64, tf.int32, tf.int64)
"""The types `tf.strings.to_number` parses into; others parse as float64 and are cast."""
