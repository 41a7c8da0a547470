"""`ElasticDLSpec`: the high-level way to describe a model to ElasticDL (design doc 003)."""

from __future__ import annotations

import abc
from typing import Any

from elasticdl.mode import Mode


class ElasticDLSpec(abc.ABC):
    """Tells ElasticDL how to create the model, dataset, loss, optimizer and metrics.

    Subclasses receive `context=` (a dict of job facts such as worker id, or None) and the
    `--params` as keyword arguments; each is passed only when the constructor names it (or
    takes `**kwargs`).
    """

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        self.context = context
        self.params = dict(params)

    @abc.abstractmethod
    def create_model(self) -> Any:
        """Return a Keras model (functional or subclassed)."""

    @abc.abstractmethod
    def create_dataset(self, dataset: Any, mode: Mode) -> Any:
        """Map a dataset of serialized records to (features, labels), or features in PREDICTION."""

    @abc.abstractmethod
    def create_loss(self, outputs: Any = None, labels: Any = None) -> Any:
        """Return a scalar loss tensor for model `outputs` and `labels`."""

    @abc.abstractmethod
    def create_optimizer(self, lr: float = 0.1) -> Any:
        """Return a Keras optimizer."""

    @abc.abstractmethod
    def create_metrics(
        self, mode: Mode = Mode.TRAINING, outputs: Any = None, labels: Any = None
    ) -> dict[str, Any]:
        """Return evaluation metrics (name -> callable(labels, predictions) or Keras metric).

        Return an empty dict for modes that have no metrics.
        """
