"""A feature's statistics from the environment, or the model file's default.

A data-analysis step (SQLFlow's) exports each statistic as an environment variable named by
`constants.AnalysisEnvTemplate` (`_age_min`, `_city_vocab`, ...); a model file asks for it with
a default, so it also runs where no analysis ran (tests, a first try).
"""

from __future__ import annotations

import os
from typing import Any

from elasticdl_preprocessing.constants import AnalysisEnvTemplate


def _value(template: str, feature_name: str) -> str | None:
    return os.environ.get(template.format(feature_name))


def get_min(feature_name: str, default_value: float) -> float:
    value = _value(AnalysisEnvTemplate.MIN_ENV, feature_name)
    return default_value if value is None else float(value)


def get_max(feature_name: str, default_value: float) -> float:
    value = _value(AnalysisEnvTemplate.MAX_ENV, feature_name)
    return default_value if value is None else float(value)


def get_avg(feature_name: str, default_value: float) -> float:
    value = _value(AnalysisEnvTemplate.AVG_ENV, feature_name)
    return default_value if value is None else float(value)


def get_stddev(feature_name: str, default_value: float) -> float:
    value = _value(AnalysisEnvTemplate.STDDEV_ENV, feature_name)
    return default_value if value is None else float(value)


def get_bucket_boundaries(feature_name: str, default_value: list[float]) -> list[float]:
    """Comma-separated boundaries, sorted and without repeats."""
    value = _value(AnalysisEnvTemplate.BUCKET_BOUNDARIES_ENV, feature_name)
    if value is None:
        return default_value
    return sorted({float(part) for part in value.split(",")})


def get_distinct_count(feature_name: str, default_value: int) -> int:
    value = _value(AnalysisEnvTemplate.DISTINCT_COUNT_ENV, feature_name)
    return default_value if value is None else int(value)


def get_vocabulary(feature_name: str, default_value: Any) -> Any:
    """The path of the feature's vocabulary file, or the default (a list or a path)."""
    value = _value(AnalysisEnvTemplate.VOCABULARY_ENV, feature_name)
    return default_value if value is None else value
