"""ElasticDL v0.2's `elasticdl.python.elasticdl.layers.embedding.Embedding`, the same class as
`elasticdl.layers.Embedding`."""

from elasticdl.runtime.embedding.layer import Embedding

__all__ = ["Embedding"]
