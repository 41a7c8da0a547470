"""`regressor.DNN`: a DNN regressor for any table of tf.Example records (Keras class style).

    elasticdl train --model_def=regressor.DNN \\
        --params="hidden_units=[64, 32], learning_rate=0.01" --data=...

The label column (`label` unless the metadata names another) holds one number per record; every
other column except `id` is a feature (see `zoo_common.tabular`).

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
from zoo_common.tabular import PS_MIN_DISTINCT, TableDNN, column_stats, parse_table_dataset

from elasticdl import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata


def squared_error(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    """Per-example squared error."""
    diff = tf.reshape(predictions, [-1]) - tf.reshape(tf.cast(labels, tf.float32), [-1])
    return tf.square(diff)


def absolute_error(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    """Per-example absolute error."""
    diff = tf.reshape(predictions, [-1]) - tf.reshape(tf.cast(labels, tf.float32), [-1])
    return tf.abs(diff)


class DNN(TableDNN):
    """Hidden ReLU layers and one linear output, trained with mean squared error and Adam."""

    def __init__(
        self,
        hidden_units: Sequence[int] = (64, 32),
        learning_rate: float = 0.01,
        activation: str = "relu",
        dropout_rate: float = 0.0,
        hash_buckets: int = 1000,
        embedding_dim: int = 8,
        ps_embedding_min_distinct: int = PS_MIN_DISTINCT,
        name: str = "regressor_dnn",
    ) -> None:
        super().__init__(
            output_units=1,
            hidden_units=hidden_units,
            activation=activation,
            dropout_rate=dropout_rate,
            hash_buckets=hash_buckets,
            embedding_dim=embedding_dim,
            name=name,
            ps_embedding_min_distinct=ps_embedding_min_distinct,
        )
        self.learning_rate = float(learning_rate)
        self._label_scale: tuple[float, float] | None = None

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments, so Keras can re-create the model."""
        return {**self.table_config(), "learning_rate": self.learning_rate}

    def default_input(
        self, dataset: tf.data.Dataset, mode: Mode, metadata: DatasetMetadata | None = None
    ) -> tf.data.Dataset:
        """Parse the table's records into (features, float label [1]).

        With a SQL source's statistics the model learns the standardized label and its output
        is mapped back to the label's units, so training is well conditioned for any scale of
        label while predictions stay in the table's units.
        """
        stats = column_stats(metadata, metadata.label) if metadata and metadata.label else {}
        if float(stats.get("std") or 0.0) > 0:
            self._label_scale = (float(stats["mean"]), float(stats["std"]))
        return parse_table_dataset(
            dataset,
            mode,
            metadata,
            label_dtype=tf.float32,
            hash_buckets=self.hash_buckets,
            model_name="regressor.DNN",
            ps_min_distinct=self.ps_embedding_min_distinct,
        )

    def call(self, inputs: dict[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        """[batch, 1] predictions in the label's units."""
        outputs = super().call(inputs, training=training)
        if self._label_scale is not None:
            mean, std = self._label_scale
            outputs = outputs * std + mean
        return outputs

    @property
    def loss_units(self) -> str:
        """What the loss is measured in, when not the label's units (the job report's
        `loss_units`; `elasticdl train` and `sql` print it next to the loss)."""
        if self._label_scale is None:
            return ""
        mean, std = self._label_scale
        return (
            f"standardized label units, (label - {mean:.6g}) / {std:.6g}: times "
            f"{std * std:.4g} for the label's units, those of the metrics"
        )

    def default_loss(self, labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
        """Mean squared error, in standardized label units when the label's scale is known."""
        if self._label_scale is not None:
            mean, std = self._label_scale
            labels = (tf.cast(labels, tf.float32) - mean) / std
            predictions = (predictions - mean) / std
        return tf.reduce_mean(squared_error(labels, predictions))

    def default_optimizer(self) -> tf.keras.optimizers.Optimizer:
        """Adam with the model's `learning_rate`."""
        return tf.keras.optimizers.Adam(learning_rate=self.learning_rate)

    def default_metrics(self) -> dict[str, Any]:
        """Per-example squared and absolute errors (averaged: MSE and MAE)."""
        return {"mse": squared_error, "mae": absolute_error}
