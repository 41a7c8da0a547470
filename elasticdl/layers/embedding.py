"""`elasticdl.layers.embedding.Embedding`: the PS-backed embedding layer, a layer of this
process's Keras (Keras 3, or tf_keras for Keras 2 model files: runtime/keras_mode.py)."""

from elasticdl.runtime.embedding import layer_class

Embedding = layer_class()

__all__ = ["Embedding"]
