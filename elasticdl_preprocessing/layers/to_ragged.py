"""`ToRagged(sep=",", ignore_value=None)`: a tensor to a `tf.RaggedTensor` without the
ignored cells.

    ToRagged()(tf.constant([[1], [-1], [4]], tf.int64)) -> [[1], [], [4]]
    ToRagged()(tf.constant([["1,2,3"], ["4,5"], [""]])) -> [["1", "2", "3"], ["4", "5"], []]

String cells are split at `sep` first, as ElasticDL's docstring says (its code skipped the
split; for cells without `sep` the two agree, as in its tests); `sep=None` keeps cells whole.
`ignore_value` None ignores "" for strings and -1 for integers, nothing for floats. Input: a
tensor of rank 2 or more, or a `tf.RaggedTensor`; output: a `tf.RaggedTensor` of the same
rank, its last dimension ragged.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer

_COMMA = ","


def default_ignore(dtype: tf.DType, ignore_value: Any) -> Any:
    """The value a cell equal to which is dropped: the given one, "" for strings, -1 for
    integers, None (nothing) for floats."""
    if ignore_value is not None:
        return ignore_value
    if dtype == tf.string:
        return ""
    if dtype.is_integer:
        return -1
    return None


class ToRagged(Layer):
    def __init__(self, sep: str | None = _COMMA, ignore_value: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sep = sep
        self.ignore_value = ignore_value

    def call(self, inputs: Any) -> Any:
        if isinstance(inputs, tf.SparseTensor):
            raise TypeError("ToRagged takes a Tensor or a RaggedTensor, not a SparseTensor")
        if not isinstance(inputs, tf.RaggedTensor):
            inputs = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(inputs))
        if inputs.dtype == tf.string and self.sep:
            inputs = tf.strings.split(inputs, sep=self.sep).merge_dims(-2, -1)
        ignore = default_ignore(inputs.dtype, self.ignore_value)
        if ignore is None:
            return inputs
        return tf.ragged.boolean_mask(inputs, tf.not_equal(inputs, tf.cast(ignore, inputs.dtype)))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "sep": self.sep, "ignore_value": self.ignore_value}
