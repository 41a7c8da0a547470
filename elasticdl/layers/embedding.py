"""`elasticdl.layers.embedding.Embedding`: the PS-backed embedding layer."""

from elasticdl.runtime.embedding.layer import Embedding

__all__ = ["Embedding"]
