"""`tiny.py`, a small functions-style zoo module for the prediction tests.

A regression on the `regression` data set (x0..x7 -> label: one Dense(8) layer), with its
input function, loss, optimizer and metrics; `tiny_zoo(processor)` appends the test's own
`PredictionOutputsProcessor` (source text; the module imports os, signal and time for it).
"""

from __future__ import annotations

MODEL = """import os
import signal
import time

import tensorflow as tf

from elasticdl import Mode

FEATURES = [f"x{i}" for i in range(8)]


def custom_model():
    inputs = tf.keras.Input(shape=(8,), name="x")
    hidden = tf.keras.layers.Dense(8, activation="relu")(inputs)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(1)(hidden))


def dataset_fn(dataset, mode, metadata=None):
    spec = {name: tf.io.FixedLenFeature([1], tf.float32) for name in FEATURES}
    if mode != Mode.PREDICTION:
        spec["label"] = tf.io.FixedLenFeature([1], tf.float32)

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        x = tf.concat([parsed[name] for name in FEATURES], 0)
        return x if mode == Mode.PREDICTION else (x, parsed["label"])

    return dataset.map(parse)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(predictions - labels))


def optimizer(lr=0.02):
    return tf.keras.optimizers.SGD(lr)


def eval_metrics_fn():
    return {
        "mse": lambda labels, predictions: tf.square(predictions - labels),
        "mae": tf.keras.metrics.MeanAbsoluteError(),
    }
"""


def tiny_zoo(processor: str) -> str:
    """The module's source: MODEL, then `processor` (a class definition, unindented)."""
    return f"{MODEL}\n\n{processor.strip()}\n"
