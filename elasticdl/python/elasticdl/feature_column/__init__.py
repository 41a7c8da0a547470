"""ElasticDL v0.2's `elasticdl.python.elasticdl.feature_column` package (`feature_column.py`)."""
