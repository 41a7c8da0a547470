"""ElasticDL v0.2's `elasticdl.feature_column` package (see `feature_column.py`)."""
