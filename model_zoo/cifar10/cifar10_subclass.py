"""CIFAR-10 with a subclassed Keras model, in the module-functions style.

`--model_def=cifar10.cifar10_subclass.CustomModel`, optionally `--params="filters=[16, 32, 64]"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf
from zoo_common.classification import accuracy, sparse_softmax_loss
from zoo_common.images import parse_image_dataset

from elasticdl import Mode

IMAGE_SHAPE = (32, 32, 3)
NUM_CLASSES = 10


class CustomModel(tf.keras.Model):
    """Convolution blocks (conv, batch norm, ReLU, max pool), global average pooling, logits.

    Accepts {"image": [batch, 32, 32, 3]} or the image tensor itself.
    """

    def __init__(
        self,
        filters: Sequence[int] = (16, 32, 32),
        dropout_rate: float = 0.2,
        name: str = "cifar10_model",
    ) -> None:
        super().__init__(name=name)
        self.filters = tuple(int(f) for f in filters)
        self.dropout_rate = float(dropout_rate)
        layers = tf.keras.layers
        # Named layers give stable variable paths ("cifar10_model/conv_1/kernel", ...).
        self._blocks = []
        for i, n in enumerate(self.filters, start=1):
            self._blocks.append(
                (
                    layers.Conv2D(n, (3, 3), padding="same", use_bias=False, name=f"conv_{i}"),
                    layers.BatchNormalization(name=f"batch_norm_{i}"),
                    layers.MaxPooling2D(pool_size=(2, 2), name=f"max_pool_{i}"),
                )
            )
        self._pool = layers.GlobalAveragePooling2D(name="global_pool")
        self._dropout = layers.Dropout(self.dropout_rate, name="dropout")
        self._dense = layers.Dense(NUM_CLASSES, name="logits")

    def call(self, inputs: Any, training: bool = False) -> tf.Tensor:
        """Return 10 logits per image."""
        x = inputs["image"] if isinstance(inputs, dict) else inputs
        for conv, batch_norm, max_pool in self._blocks:
            x = tf.nn.relu(batch_norm(conv(x), training=training))
            x = max_pool(x)
        x = self._dropout(self._pool(x), training=training)
        return self._dense(x)

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments, so Keras can re-create the model."""
        return {"filters": list(self.filters), "dropout_rate": self.dropout_rate, "name": self.name}


def dataset_fn(dataset: tf.data.Dataset, mode: Mode, metadata: Any = None) -> tf.data.Dataset:
    """Parse records into ({"image": ...}, label); shuffle only when training."""
    return parse_image_dataset(dataset, mode, IMAGE_SHAPE)


def loss(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    """Mean sparse softmax cross-entropy; labels have shape [batch, 1]."""
    return sparse_softmax_loss(labels, predictions)


def optimizer(lr: float = 0.01) -> tf.keras.optimizers.Optimizer:
    """Adam with learning rate `lr`."""
    return tf.keras.optimizers.Adam(learning_rate=lr)


def eval_metrics_fn() -> dict[str, Any]:
    """Per-example accuracy."""
    return {"accuracy": accuracy}
