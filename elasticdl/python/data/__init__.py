"""ElasticDL v0.2's `elasticdl.python.data` package: data readers and the ODPS stubs."""
