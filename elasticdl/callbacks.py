"""Callbacks that elastic jobs honour (also importable as ElasticDL v0.2's
`elasticdl.python.elasticdl.callbacks`); see README, "Coming from ElasticDL"."""

from elasticdl.python.elasticdl.callbacks import (
    LearningRateScheduler,
    MaxStepsStopping,
    SavedModelExporter,
)

__all__ = ["LearningRateScheduler", "MaxStepsStopping", "SavedModelExporter"]
