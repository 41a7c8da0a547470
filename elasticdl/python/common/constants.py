"""ElasticDL v0.2 compatibility: model files import `Mode` from this module path."""

from elasticdl.mode import Mode

__all__ = ["Mode"]
