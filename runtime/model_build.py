"""Building a model's variables from real data, the same way in every process.

A subclassed Keras model has no variables until it is called, so master, workers and
exporters all build it by calling it on one small batch produced by the spec's own
`dataset_fn` from the first records of the data.
"""

from __future__ import annotations

from typing import Any

from elasticdl.mode import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata


def sample_batch(
    instance: Any,
    records: list[bytes],
    mode: Mode = Mode.TRAINING,
    metadata: DatasetMetadata | None = None,
) -> Any:
    """(features, labels) — or features in PREDICTION — for `records`, via the dataset_fn.

    `metadata` defaults to a description of the first record.
    """
    import tensorflow as tf

    if not records:
        raise ValueError("cannot build the model: the data has no records")
    metadata = metadata or DatasetMetadata.from_example(records[0])
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(records, dtype=tf.string))
    dataset = instance.dataset_fn(dataset, mode, metadata).batch(len(records))
    return next(iter(dataset))


def build_model(
    instance: Any,
    records: list[bytes],
    mode: Mode = Mode.TRAINING,
    metadata: DatasetMetadata | None = None,
) -> Any:
    """Call the model once on a batch so all its variables exist; return the batch."""
    batch = sample_batch(instance, records, mode, metadata)
    features = batch[0] if isinstance(batch, tuple) and mode != Mode.PREDICTION else batch
    instance.model(features, training=False)
    return batch
