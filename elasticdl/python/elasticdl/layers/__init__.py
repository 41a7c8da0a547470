"""ElasticDL v0.2's `elasticdl.python.elasticdl.layers` package."""
