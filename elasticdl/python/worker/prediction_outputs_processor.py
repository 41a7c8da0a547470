"""ElasticDL v0.2's `BasePredictionOutputsProcessor`.

A model file's `PredictionOutputsProcessor` (a subclass, or any class with this method) is
created once per prediction worker; `process(predictions, worker_id)` receives the model's
outputs for each prediction task, after the task's output part is written. `predictions` is a
numpy array (or a dict of them, for a model with named outputs) that also has v0.2's
`.numpy()`. A retried task calls it again for the same records: write idempotently, or take
`process(predictions, worker_id, task=...)` to get the part name and record range.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class BasePredictionOutputsProcessor(ABC):
    """Base class of a model file's `PredictionOutputsProcessor`."""

    @abstractmethod
    def process(self, predictions: Any, worker_id: int) -> None:
        """Handle one task's predictions made by worker `worker_id`."""


__all__ = ["BasePredictionOutputsProcessor"]
