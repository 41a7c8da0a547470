"""Shared test steps: run a resolved model spec on real records for one gradient step."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from elasticdl import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata


def one_gradient_step(spec, records: list[bytes], batch_size: int = 8):
    """Build the spec's model, feed a batch from its own dataset_fn, apply one gradient step.

    Returns (loss before, loss after on the same batch, predictions before).
    """
    instance = spec.instantiate()
    metadata = DatasetMetadata.from_example(records[0])
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(records, dtype=tf.string))
    dataset = instance.dataset_fn(dataset, Mode.TRAINING, metadata).batch(batch_size)
    features, labels = next(iter(dataset))
    model = instance.model
    predictions = model(features, training=False)
    with tf.GradientTape() as tape:
        loss = instance.loss(labels, model(features, training=True))
    variables = model.trainable_variables
    before = [v.numpy().copy() for v in variables]
    gradients = tape.gradient(loss, variables)
    assert all(g is not None for g in gradients), "every trainable variable gets a gradient"
    instance.optimizer.apply_gradients(zip(gradients, variables, strict=True))
    changed = any(not np.array_equal(b, v.numpy()) for b, v in zip(before, variables, strict=True))
    assert changed, "one gradient step changes the weights"
    loss_after = instance.loss(labels, model(features, training=False))
    return float(loss), float(loss_after), predictions
