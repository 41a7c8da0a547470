"""`classifier.DNN`: a DNN classifier for any table of tf.Example records (Keras class style).

    elasticdl train --model_def=classifier.DNN \\
        --params="hidden_units=[64, 32], n_classes=3, learning_rate=0.01" --data=...

The label column (`label` unless the metadata names another) holds a class id in
`[0, n_classes)`; every other column except `id` is a feature (see `zoo_common.tabular`).
The model outputs `n_classes` logits.

Text columns are hashed into one shared table of `hash_buckets` rows, except those with many
distinct values: when the SQL source's statistics (`schema.json`) estimate at least
`ps_embedding_min_distinct` (1000) distinct values, each seen at least twice on average, the
column goes through a table on the parameter servers instead (`elasticdl.layers.Embedding`, one
row per value, ids hashed to 63 bits: no collisions; an unseen value reads zeros at prediction).
`ps_embedding_min_distinct=0` keeps every text column in the shared table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf
from zoo_common.classification import accuracy, sparse_softmax_loss
from zoo_common.tabular import PS_MIN_DISTINCT, TableDNN, parse_table_dataset

from elasticdl import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata


class DNN(TableDNN):
    """Hidden ReLU layers and `n_classes` logits, trained with cross-entropy and Adam."""

    def __init__(
        self,
        hidden_units: Sequence[int] = (64, 32),
        n_classes: int = 2,
        learning_rate: float = 0.01,
        activation: str = "relu",
        dropout_rate: float = 0.0,
        hash_buckets: int = 1000,
        embedding_dim: int = 8,
        ps_embedding_min_distinct: int = PS_MIN_DISTINCT,
        name: str = "classifier_dnn",
    ) -> None:
        if int(n_classes) < 2:
            raise ValueError(f"n_classes must be at least 2, got {n_classes}")
        super().__init__(
            output_units=int(n_classes),
            hidden_units=hidden_units,
            activation=activation,
            dropout_rate=dropout_rate,
            hash_buckets=hash_buckets,
            embedding_dim=embedding_dim,
            name=name,
            ps_embedding_min_distinct=ps_embedding_min_distinct,
        )
        self.n_classes = int(n_classes)
        self.learning_rate = float(learning_rate)

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments, so Keras can re-create the model."""
        return {
            **self.table_config(),
            "n_classes": self.n_classes,
            "learning_rate": self.learning_rate,
        }

    def default_input(
        self, dataset: tf.data.Dataset, mode: Mode, metadata: DatasetMetadata | None = None
    ) -> tf.data.Dataset:
        """Parse the table's records into (features, int32 class id [1])."""
        return parse_table_dataset(
            dataset,
            mode,
            metadata,
            label_dtype=tf.int32,
            hash_buckets=self.hash_buckets,
            model_name="classifier.DNN",
            ps_min_distinct=self.ps_embedding_min_distinct,
        )

    def default_loss(self, labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
        """Mean sparse softmax cross-entropy of the logits."""
        return sparse_softmax_loss(labels, predictions)

    def default_optimizer(self) -> tf.keras.optimizers.Optimizer:
        """Adam with the model's `learning_rate`."""
        return tf.keras.optimizers.Adam(learning_rate=self.learning_rate)

    def default_metrics(self) -> dict[str, Any]:
        """Per-example accuracy."""
        return {"accuracy": accuracy}
