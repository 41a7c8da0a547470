"""Evaluation metrics as additive state, so the master can merge what workers computed.

A worker never ships predictions. For each metric it keeps a state that adds up across
minibatches and workers:

* a callable `(labels, predictions) -> values` (per-example values, or one batch mean):
  `[sum of values, number of values]`;
* a Keras metric: its state variables (totals and counts, the confusion buckets of AUC, ...),
  which are sums for Keras' built-in metrics;
* an ElasticDLSpec's `create_metrics` values: batch means weighted by batch size.

`merge` adds states; `compute` turns merged state into values. The merged value equals the
metric computed over all the data in one process (for Keras metrics whose state is additive,
which covers Mean-based metrics, accuracy, AUC, precision, recall and MSE).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from elasticdl.runtime.model_spec import EvalMetrics


def _batch_size(labels: Any) -> int:
    import tensorflow as tf

    first = tf.nest.flatten(labels)[0]
    return int(first.shape[0]) if first.shape[0] is not None else int(tf.shape(first)[0])


def _sum_count(values: Any, batch: int) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 0:
        return np.array([float(array) * batch, float(batch)])
    return np.array([float(array.sum()), float(array.size)])


class MetricAccumulator:
    """Accumulates one worker's metric state over the minibatches it evaluates."""

    def __init__(self, metrics: EvalMetrics) -> None:
        self.metrics = metrics
        self._sums: dict[str, np.ndarray] = {}
        for metric in metrics.keras_metrics.values():
            metric.reset_state()

    def update(self, labels: Any, predictions: Any) -> None:
        batch = _batch_size(labels)
        read = self.metrics.prediction_for
        for name, fn in self.metrics.functions.items():
            self._add(f"fn/{name}", _sum_count(fn(labels, read(name, predictions)), batch))
        if self.metrics.batch_fn is not None:
            for name, value in self.metrics.batch_fn(labels, predictions).items():
                self._add(f"batch/{name}", _sum_count(value, batch))
        for name, metric in self.metrics.keras_metrics.items():
            transform = self.metrics.transforms.get(name)
            outputs = read(name, predictions)
            metric.update_state(*(transform(labels, outputs) if transform else (labels, outputs)))

    def _add(self, key: str, value: np.ndarray) -> None:
        self._sums[key] = self._sums[key] + value if key in self._sums else value

    def states(self) -> dict[str, np.ndarray]:
        """The additive state accumulated so far, by flat name."""
        found = dict(self._sums)
        for name, metric in self.metrics.keras_metrics.items():
            for i, variable in enumerate(metric.variables):
                found[f"keras/{name}/{i}"] = np.asarray(variable.numpy())
        return found


def merge(states: Iterable[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Element-wise sum of metric states (from tasks, workers, minibatches)."""
    merged: dict[str, np.ndarray] = {}
    for state in states:
        for key, value in state.items():
            merged[key] = merged[key] + value if key in merged else np.array(value, copy=True)
    return merged


def compute(metrics: EvalMetrics, state: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Metric values from merged state; `metrics` must be a fresh EvalMetrics of the spec."""
    import tensorflow as tf

    values: dict[str, float] = {}
    for key, value in state.items():
        kind, _, name = key.partition("/")
        if kind in ("fn", "batch"):
            total, count = float(value[0]), float(value[1])
            values[name] = total / count if count else float("nan")
    for name, metric in metrics.keras_metrics.items():
        metric.reset_state()
        for i, variable in enumerate(metric.variables):
            key = f"keras/{name}/{i}"
            if key in state:
                dtype = tf.as_dtype(variable.dtype).as_numpy_dtype  # Keras 3 str, Keras 2 DType
                variable.assign(np.asarray(state[key], dtype=dtype))
        if any(k.startswith(f"keras/{name}/") for k in state):
            values[name] = float(np.asarray(metric.result()))
    return values
