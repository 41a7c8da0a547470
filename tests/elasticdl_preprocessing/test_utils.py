"""`elasticdl_preprocessing.utils`: statistics from the environment and model-input names."""

from __future__ import annotations

import pytest

from elasticdl_preprocessing.constants import AnalysisEnvTemplate
from elasticdl_preprocessing.utils import analyzer_utils as au
from elasticdl_preprocessing.utils.decorators import declare_model_inputs


def test_statistics_default_without_the_environment(monkeypatch):
    for name in ("_age_min", "_age_max", "_age_avg", "_age_stddev", "_age_boundaries"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("_city_distinct_count", raising=False)
    monkeypatch.delenv("_city_vocab", raising=False)
    assert au.get_min("age", 10) == 10 and au.get_max("age", 100) == 100
    assert au.get_avg("age", 10) == 10 and au.get_stddev("age", 10) == 10
    assert au.get_bucket_boundaries("age", [10, 78]) == [10, 78]
    assert au.get_distinct_count("city", 19) == 19
    assert au.get_vocabulary("city", ["a", "b"]) == ["a", "b"]


def test_statistics_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(AnalysisEnvTemplate.MIN_ENV.format("age"), "11")
    monkeypatch.setenv("_age_max", "100")
    monkeypatch.setenv("_age_avg", "50.9")
    monkeypatch.setenv("_age_stddev", "90.87")
    monkeypatch.setenv("_age_boundaries", "67,15,89,15")
    monkeypatch.setenv("_city_distinct_count", "50")
    monkeypatch.setenv("_city_vocab", "./city.txt")
    assert au.get_min("age", 10) == 11.0 and au.get_max("age", 10) == 100.0
    assert au.get_avg("age", 10) == 50.9 and au.get_stddev("age", 10) == 90.87
    assert au.get_bucket_boundaries("age", [10, 78]) == [15.0, 67.0, 89.0]
    assert au.get_distinct_count("city", 19) == 50
    assert au.get_vocabulary("city", ["a", "b"]) == "./city.txt"


def test_declare_model_inputs_names_the_inputs_of_a_class():
    @declare_model_inputs("wide_embeddings", "deep_embeddings")
    class WideAndDeep:
        pass

    assert WideAndDeep._model_inputs == ["wide_embeddings", "deep_embeddings"]
    with pytest.raises(ValueError, match="at least one"):
        declare_model_inputs()
    with pytest.raises(ValueError, match="strings"):
        declare_model_inputs("a", 3)
