"""CIFAR-10 with the Keras functional API, in the module-functions style.

`--model_def=cifar10.cifar10_functional_api.custom_model`. A deliberately small CNN (three
convolution blocks of 16-32 filters and global average pooling) so a step is quick on a CPU.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from zoo_common.classification import accuracy, sparse_softmax_loss
from zoo_common.images import parse_image_dataset

from elasticdl import Mode

IMAGE_SHAPE = (32, 32, 3)
NUM_CLASSES = 10


def _conv_block(x: Any, filters: int, index: int) -> Any:
    """Convolution, batch norm, ReLU, 2x2 max pool; layers named `conv_<index>` etc."""
    layers = tf.keras.layers
    x = layers.Conv2D(filters, (3, 3), padding="same", use_bias=False, name=f"conv_{index}")(x)
    x = layers.BatchNormalization(name=f"batch_norm_{index}")(x)
    x = layers.Activation("relu", name=f"relu_{index}")(x)
    return layers.MaxPooling2D(pool_size=(2, 2), name=f"max_pool_{index}")(x)


def custom_model() -> tf.keras.Model:
    """A small CNN taking {"image": [batch, 32, 32, 3]} (values in 0-1), returning 10 logits."""
    image = tf.keras.Input(shape=IMAGE_SHAPE, name="image")
    # Layers are named so variable paths ("conv_1/kernel", ...) are stable across processes.
    x = _conv_block(image, 16, 1)
    x = _conv_block(x, 32, 2)
    x = _conv_block(x, 32, 3)
    x = tf.keras.layers.GlobalAveragePooling2D(name="global_pool")(x)
    x = tf.keras.layers.Dropout(0.2, name="dropout")(x)
    logits = tf.keras.layers.Dense(NUM_CLASSES, name="logits")(x)
    return tf.keras.Model(inputs={"image": image}, outputs=logits, name="cifar10_model")


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
