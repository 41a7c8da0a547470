"""Input pipeline shared by the image classifiers (MNIST, CIFAR-10)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf
from zoo_common.chunks import parse_in_chunks

from elasticdl import Mode


def parse_image_dataset(
    dataset: tf.data.Dataset, mode: Mode, image_shape: Sequence[int]
) -> tf.data.Dataset:
    """Map serialized tf.train.Example records to ({"image": pixels / 255}, label [1]).

    `image` is a float list of pixels in 0-255 (row-major `image_shape`); `label` an int64 list
    of one. In PREDICTION mode only the features are returned and `label` may be absent.
    Records are shuffled only when training; they are parsed a chunk at a time
    (`zoo_common.chunks`).
    """
    spec = {"image": tf.io.FixedLenFeature(list(image_shape), tf.float32)}
    if mode != Mode.PREDICTION:
        spec["label"] = tf.io.FixedLenFeature([1], tf.int64)

    @tf.autograph.experimental.do_not_convert  # see zoo_common/__init__.py
    def _parse(records: tf.Tensor) -> Any:
        parsed = tf.io.parse_example(records, spec)
        features = {"image": parsed["image"] / 255.0}
        if mode == Mode.PREDICTION:
            return features
        return features, tf.cast(parsed["label"], tf.int32)

    dataset = parse_in_chunks(dataset, _parse)
    if mode == Mode.TRAINING:
        dataset = dataset.shuffle(buffer_size=1024)
    return dataset
