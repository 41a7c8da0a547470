"""The phase a model-zoo callable is asked to serve."""

from __future__ import annotations

import enum


class Mode(enum.StrEnum):
    """Which phase a `dataset_fn` / `create_dataset` is called for.

    A string enum so `mode == "training"` works too, as ElasticDL v0.2 string constants did.
    """

    TRAINING = "training"
    EVALUATION = "evaluation"
    PREDICTION = "prediction"
