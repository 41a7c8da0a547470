"""ElasticDL v0.2's `elasticdl.python.common.log_utils`: `default_logger` and `get_logger`.

Both are standard `logging` loggers under `elasticdl.`, so what a model file logs goes where
the worker's own log lines go (the worker's log file, or the pod's output).
"""

from __future__ import annotations

import logging


def get_logger(name: str, level: int | str | None = None) -> logging.Logger:
    """The logger `elasticdl.<name>` (with `level`, when given)."""
    logger = logging.getLogger(name if name.startswith("elasticdl") else f"elasticdl.{name}")
    if level is not None:
        logger.setLevel(level)
    return logger


default_logger = get_logger("elasticdl.model_zoo")

__all__ = ["default_logger", "get_logger"]
