"""MNIST with a subclassed Keras model, in the module-functions style.

`--model_def=mnist.mnist_subclass.CustomModel`. Same network and pipeline as
`mnist_functional_api` (8 and 16 filters instead of the guide's 32 and 64, for CPU speed).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from zoo_common.classification import accuracy, sparse_softmax_loss
from zoo_common.images import parse_image_dataset

from elasticdl import Mode

IMAGE_SHAPE = (28, 28)
NUM_CLASSES = 10


class CustomModel(tf.keras.Model):
    """A small CNN; accepts {"image": [batch, 28, 28]} or the image tensor itself."""

    def __init__(self, dropout_rate: float = 0.25, name: str = "mnist_model") -> None:
        super().__init__(name=name)
        self.dropout_rate = float(dropout_rate)
        layers = tf.keras.layers
        # Named layers give stable variable paths ("mnist_model/conv_1/kernel", ...).
        self._reshape = layers.Reshape((*IMAGE_SHAPE, 1), name="reshape")
        self._conv1 = layers.Conv2D(8, kernel_size=(3, 3), activation="relu", name="conv_1")
        self._conv2 = layers.Conv2D(16, kernel_size=(3, 3), activation="relu", name="conv_2")
        self._batch_norm = layers.BatchNormalization(name="batch_norm")
        self._max_pool = layers.MaxPooling2D(pool_size=(2, 2), name="max_pool")
        self._dropout = layers.Dropout(self.dropout_rate, name="dropout")
        self._flatten = layers.Flatten(name="flatten")
        self._dense = layers.Dense(NUM_CLASSES, name="logits")

    def call(self, inputs: Any, training: bool = False) -> tf.Tensor:
        """Return 10 logits per image."""
        if isinstance(inputs, dict):
            inputs = inputs["image"]
        x = self._reshape(inputs)
        x = self._conv1(x)
        x = self._conv2(x)
        x = self._batch_norm(x, training=training)
        x = self._max_pool(x)
        x = self._dropout(x, training=training)
        x = self._flatten(x)
        return self._dense(x)

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments, so Keras can re-create the model."""
        return {"dropout_rate": self.dropout_rate, "name": self.name}


def dataset_fn(dataset: tf.data.Dataset, mode: Mode, metadata: Any = None) -> tf.data.Dataset:
    """Parse records into ({"image": ...}, label); shuffle only when training."""
    return parse_image_dataset(dataset, mode, IMAGE_SHAPE)


def loss(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    """Mean sparse softmax cross-entropy; labels have shape [batch, 1]."""
    return sparse_softmax_loss(labels, predictions)


def optimizer(lr: float = 0.1) -> tf.keras.optimizers.Optimizer:
    """Plain SGD with learning rate `lr`."""
    return tf.keras.optimizers.SGD(learning_rate=lr)


def eval_metrics_fn() -> dict[str, Any]:
    """Per-example accuracy."""
    return {"accuracy": accuracy}
