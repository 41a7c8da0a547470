"""Embedding tables that live on the parameter servers (`layer.Embedding`, and
`layer_keras2.Embedding` for Keras 2 model files) and how a process supplies their rows
(`feed.py`: worker minibatches; `tables.py`: naming, specs, trained rows)."""

from __future__ import annotations


def layer_class() -> type:
    """The `Embedding` class of this process's Keras (runtime/keras_mode.py): the tf_keras
    layer in Keras 2 mode, the Keras 3 one otherwise."""
    from elasticdl.runtime import keras_mode

    if keras_mode.current() == keras_mode.KERAS2:
        from elasticdl.runtime.embedding.layer_keras2 import Embedding
    else:
        from elasticdl.runtime.embedding.layer import Embedding
    return Embedding
