"""Helpers of ElasticDL's preprocessing package: `decorators`, `analyzer_utils`."""
