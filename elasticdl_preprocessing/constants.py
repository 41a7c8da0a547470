"""`AnalysisEnvTemplate`: the environment variables that carry a feature's statistics
(`utils.analyzer_utils` reads them), named after the feature."""


class AnalysisEnvTemplate:
    MIN_ENV = "_{}_min"
    MAX_ENV = "_{}_max"
    AVG_ENV = "_{}_avg"
    STDDEV_ENV = "_{}_stddev"
    BUCKET_BOUNDARIES_ENV = "_{}_boundaries"
    DISTINCT_COUNT_ENV = "_{}_distinct_count"
    VOCABULARY_ENV = "_{}_vocab"
