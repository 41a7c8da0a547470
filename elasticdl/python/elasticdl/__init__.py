"""Compatibility path for ElasticDL v0.2 model files (`elasticdl.python.elasticdl.layers`)."""
