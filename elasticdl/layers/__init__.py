"""Keras layers of ElasticDL: `Embedding`, a table on the parameter servers
(see `elasticdl.runtime.embedding.layer`)."""

from elasticdl.layers.embedding import Embedding

__all__ = ["Embedding"]
