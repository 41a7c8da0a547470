"""ElasticDL v0.2's `elasticdl.python.elasticdl.layers.embedding.Embedding`, the same class as
`elasticdl.layers.Embedding` (a layer of this process's Keras)."""

from elasticdl.layers.embedding import Embedding

__all__ = ["Embedding"]
