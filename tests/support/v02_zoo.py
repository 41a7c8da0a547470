"""`COMMON`: the start of a model file in ElasticDL v0.2's style (its imports, a functional
regression model on the `regression` data set, `loss`, `optimizer`, `feed`, `eval_metrics_fn`);
the compatibility tests append their callbacks, processors and readers to it."""

COMMON = """
import os

import tensorflow as tf

from elasticdl.python.common.constants import MaxComputeConfig, Mode
from elasticdl.python.common.log_utils import default_logger as logger

FEATURES = ["x%d" % i for i in range(8)]


def custom_model():
    inputs = tf.keras.layers.Input(shape=(8,), name="x")
    hidden = tf.keras.layers.Dense(16, activation="relu")(inputs)
    outputs = tf.keras.layers.Dense(1, name="output")(hidden)
    return tf.keras.Model(inputs=inputs, outputs=outputs, name="v02_model")


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(predictions - labels))


def optimizer(lr=0.05):
    return tf.optimizers.SGD(lr)


def feed(dataset, mode, _):
    def _parse_data(record):
        spec = {name: tf.io.FixedLenFeature([1], tf.float32) for name in FEATURES}
        if mode != Mode.PREDICTION:
            spec["label"] = tf.io.FixedLenFeature([1], tf.float32)
        r = tf.io.parse_single_example(record, spec)
        x = tf.concat([r[name] for name in FEATURES], 0)
        if mode == Mode.PREDICTION:
            return x
        return x, r["label"]

    dataset = dataset.map(_parse_data)
    if mode == Mode.TRAINING:
        dataset = dataset.shuffle(buffer_size=256)
    return dataset


def eval_metrics_fn():
    return {"mse": lambda labels, predictions: tf.square(predictions - labels)}
"""
