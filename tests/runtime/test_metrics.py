"""Merged metric state equals the metric computed on all the data in one process."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from elasticdl.runtime.metrics import MetricAccumulator, compute, merge
from elasticdl.runtime.model_spec import EvalMetrics


def fresh() -> EvalMetrics:
    return EvalMetrics.from_dict(
        {
            "accuracy": lambda labels, predictions: tf.cast(
                tf.equal(tf.cast(predictions > 0.5, tf.int32), labels), tf.float32
            ),
            "auc": keras.metrics.AUC(num_thresholds=50),
            "mean_prob": lambda labels, predictions: tf.reduce_mean(predictions),
        }
    )


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    probs = rng.random((1000, 1)).astype(np.float32)
    labels = (rng.random((1000, 1)) < probs).astype(np.int32)
    return labels, probs


def test_merged_state_equals_single_process(data):
    labels, probs = data
    # Three "workers" with uneven shares and minibatches of 64.
    states = []
    for part in np.split(np.arange(1000), [130, 610]):
        accumulator = MetricAccumulator(fresh())
        for batch in np.array_split(part, max(1, len(part) // 64)):
            accumulator.update(tf.constant(labels[batch]), tf.constant(probs[batch]))
        states.append(accumulator.states())
    merged = compute(fresh(), merge(states))

    whole = keras.metrics.AUC(num_thresholds=50)
    whole.update_state(labels, probs)
    assert merged["auc"] == pytest.approx(float(whole.result()), abs=1e-6)
    accuracy = np.mean((probs > 0.5).astype(np.int32) == labels)
    assert merged["accuracy"] == pytest.approx(accuracy, abs=1e-9)
    assert merged["mean_prob"] == pytest.approx(float(np.mean(probs)), abs=1e-5)


def test_batch_metrics_of_a_spec_are_weighted_by_batch_size():
    def batch_fn(labels, predictions):
        return {"mae": tf.reduce_mean(tf.abs(labels - predictions))}

    metrics = EvalMetrics(batch_fn=batch_fn)
    accumulator = MetricAccumulator(metrics)
    accumulator.update(tf.constant([[1.0]] * 3), tf.constant([[0.0]] * 3))
    accumulator.update(tf.constant([[1.0]]), tf.constant([[5.0]]))
    assert compute(metrics, accumulator.states())["mae"] == pytest.approx((3 * 1 + 4) / 4)
