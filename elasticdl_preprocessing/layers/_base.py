"""What the preprocessing layers share: their Keras base class and value-wise mapping.

`Layer` is the layer base class of this process's Keras (runtime/keras_mode.py): Keras 3's,
or tf_keras's in a Keras 2 process, so a layer fits the models of the file that uses it. The
layers never override `compute_output_shape`: both Kerases then trace `call` to learn the
output's dtype and whether it is sparse or ragged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from elasticdl.runtime import keras_mode

Layer: Any = keras_mode.keras().layers.Layer


def map_values(inputs: Any, fn: Callable[[tf.Tensor], tf.Tensor]) -> Any:
    """`fn` applied to the values of a dense, ragged or sparse tensor; the structure (shape,
    row lengths, indices) is kept."""
    if isinstance(inputs, tf.SparseTensor):
        return tf.SparseTensor(inputs.indices, fn(inputs.values), inputs.dense_shape)
    if isinstance(inputs, tf.RaggedTensor):
        return inputs.with_flat_values(fn(inputs.flat_values))
    return fn(tf.convert_to_tensor(inputs))


def dtype_of(inputs: Any) -> tf.DType:
    return inputs.dtype if hasattr(inputs, "dtype") else tf.convert_to_tensor(inputs).dtype
