"""ElasticDL v0.2's `elasticdl.python.worker` package (the prediction outputs processor)."""
