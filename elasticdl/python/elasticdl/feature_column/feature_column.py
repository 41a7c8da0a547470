"""ElasticDL v0.2's `elasticdl.python.elasticdl.feature_column.feature_column`, the path v0.2's
model files import `embedding_column` from: the same function as
`elasticdl.feature_column.feature_column.embedding_column` (see there for what it is here)."""

from elasticdl.feature_column.feature_column import embedding_column

__all__ = ["embedding_column"]
