"""`ConcatenateWithOffset(offsets, axis=-1)`: id tensors, each shifted by its offset, in one.

    ConcatenateWithOffset(offsets=[0, 10], axis=1)([[[1], [1], [1]], [[2], [2], [2]]])
    -> [[1, 12], [1, 12], [1, 12]]

Several id features share one embedding table this way: the ids of input i move to
`[offsets[i], offsets[i] + buckets_i)`. The inputs are all dense, all `tf.RaggedTensor` or all
`tf.SparseTensor` (sparse ones are concatenated with `tf.sparse.concat`, their indices along
`axis` shifted by the inputs before them). `offsets` None concatenates without shifting; its
length must equal the number of inputs. A single tensor (not a list) passes through.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer


class ConcatenateWithOffset(Layer):
    def __init__(self, offsets: list[int] | None, axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.offsets = None if offsets is None else [int(o) for o in offsets]
        self.axis = int(axis)

    def call(self, inputs: Any) -> Any:
        if not isinstance(inputs, list | tuple):
            return inputs
        inputs = list(inputs)
        if self.offsets is not None:
            if len(self.offsets) != len(inputs):
                raise ValueError(
                    f"ConcatenateWithOffset: {len(self.offsets)} offsets for {len(inputs)} inputs"
                )
            inputs = [_shift(t, o) for t, o in zip(inputs, self.offsets, strict=True)]
        if len({_kind(t) for t in inputs}) > 1:
            raise TypeError(
                "ConcatenateWithOffset: the inputs must be all dense, all ragged or all sparse"
            )
        if isinstance(inputs[0], tf.SparseTensor):
            return tf.sparse.concat(axis=self.axis, sp_inputs=inputs)
        return tf.concat(inputs, axis=self.axis)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "offsets": self.offsets, "axis": self.axis}


def _kind(ids: Any) -> str:
    if isinstance(ids, tf.SparseTensor):
        return "sparse"
    return "ragged" if isinstance(ids, tf.RaggedTensor) else "dense"


def _shift(ids: Any, offset: int) -> Any:
    if isinstance(ids, tf.SparseTensor):
        shifted = ids.values + tf.cast(offset, ids.dtype)
        return tf.SparseTensor(ids.indices, shifted, ids.dense_shape)
    return ids + tf.cast(offset, ids.dtype)
