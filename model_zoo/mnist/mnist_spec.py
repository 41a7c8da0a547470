"""MNIST as an `ElasticDLSpec` subclass (the high-level API style).

`--model_def=mnist.mnist_spec.MnistSpec`, optionally `--params="dropout_rate=0.1"`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from zoo_common.classification import accuracy, sparse_softmax_loss
from zoo_common.images import parse_image_dataset

from elasticdl import ElasticDLSpec, Mode

from .mnist_subclass import IMAGE_SHAPE, CustomModel


class MnistSpec(ElasticDLSpec):
    """The MNIST CNN of `mnist_subclass`, its input pipeline, SGD and accuracy."""

    def __init__(self, context: dict[str, Any] | None = None, dropout_rate: float = 0.25) -> None:
        super().__init__(context=context)
        self.dropout_rate = float(dropout_rate)

    def create_model(self) -> tf.keras.Model:
        """A small CNN returning 10 logits."""
        return CustomModel(dropout_rate=self.dropout_rate)

    def create_dataset(self, dataset: tf.data.Dataset, mode: Mode) -> tf.data.Dataset:
        """Parse records into ({"image": ...}, label); shuffle only when training."""
        return parse_image_dataset(dataset, mode, IMAGE_SHAPE)

    def create_loss(self, outputs: Any = None, labels: Any = None) -> tf.Tensor:
        """Mean sparse softmax cross-entropy of the logits `outputs`."""
        return sparse_softmax_loss(labels, outputs)

    def create_optimizer(self, lr: float = 0.1) -> tf.keras.optimizers.Optimizer:
        """Plain SGD with learning rate `lr`."""
        return tf.keras.optimizers.SGD(learning_rate=lr)

    def create_metrics(
        self, mode: Mode = Mode.TRAINING, outputs: Any = None, labels: Any = None
    ) -> dict[str, Any]:
        """Per-example accuracy when evaluating; no metrics in other modes."""
        if mode == Mode.EVALUATION:
            return {"accuracy": accuracy}
        return {}
