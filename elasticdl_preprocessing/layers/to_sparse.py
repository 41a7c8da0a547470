"""`ToSparse(ignore_value=None)`: a tensor to a `tf.SparseTensor` without the ignored cells.

    ToSparse()(tf.constant([["A", ""], ["B", "C"]]))
    -> SparseTensor(indices=[[0, 0], [1, 0], [1, 1]], values=["A", "B", "C"], dense_shape=[2, 2])

`ignore_value` None ignores "" for strings, -1 for integers and 0.0 for floats. A
`tf.SparseTensor` passes through unchanged; a `tf.RaggedTensor` becomes sparse (its ignored
cells dropped too). Output: a `tf.SparseTensor` of the input's dense shape.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer
from elasticdl_preprocessing.layers.to_ragged import default_ignore


class ToSparse(Layer):
    def __init__(self, ignore_value: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ignore_value = ignore_value

    def call(self, inputs: Any) -> Any:
        if isinstance(inputs, tf.SparseTensor):
            return inputs
        if isinstance(inputs, tf.RaggedTensor):
            inputs = inputs.to_sparse()
            keep = tf.not_equal(inputs.values, self._ignore(inputs.dtype))
            return tf.sparse.retain(inputs, keep)
        inputs = tf.convert_to_tensor(inputs)
        indices = tf.where(tf.not_equal(inputs, self._ignore(inputs.dtype)))
        return tf.SparseTensor(
            indices, tf.gather_nd(inputs, indices), tf.shape(inputs, out_type=tf.int64)
        )

    def _ignore(self, dtype: tf.DType) -> tf.Tensor:
        value = default_ignore(dtype, self.ignore_value)
        return tf.cast(0.0 if value is None else value, dtype)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "ignore_value": self.ignore_value}
