"""`Embedding` for Keras 2 model files: the PS-backed layer as a `tf_keras.layers.Layer`.

ElasticDL v0.2's model files use its `Embedding` inside functional models that apply TensorFlow
ops to Keras tensors (`K.sum`, `tf.reshape` of layer outputs), which only Keras 2 (tf_keras)
allows; a Keras 3 layer cannot sit in such a model. This class is `layer.Embedding` (same
constructor, behaviour and config: `lookup.TableLookup`) on tf_keras's base class. Import it
only in a Keras 2 process (runtime/keras_mode.py), where `elasticdl.layers.Embedding` is it.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras

from elasticdl.runtime.embedding.layer import initializer_spec
from elasticdl.runtime.embedding.lookup import TableLookup

__all__ = ["Embedding"]


class Embedding(TableLookup, tf_keras.layers.Layer):
    """A parameter-server-backed embedding lookup for Keras 2 (see `layer.Embedding`)."""

    def __init__(
        self,
        output_dim: int,
        embeddings_initializer: Any = "uniform",
        mask_zero: bool = False,
        input_length: int | None = None,
        combiner: str | None = None,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("input_dim", None)
        super().__init__(**kwargs)
        self._configure(
            output_dim,
            initializer_spec(embeddings_initializer, tf_keras.initializers.serialize),
            mask_zero,
            input_length,
            combiner,
            seed,
        )

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        if not self.mask_zero or self.combiner is not None:
            return None
        return tf.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape: Any) -> tf.TensorShape:
        return tf.TensorShape(self._output_shape(tf.TensorShape(input_shape)))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self._own_config()}
