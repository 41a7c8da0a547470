"""Resolved feature columns (the COLUMN clause, runtime/column_spec.py) as one Keras 3 layer.

`FeatureLayer(features)` takes the dict the built-in input function parses (runtime/
schema_input.py: one `[n, length]` tensor per column, in the column's own type) and returns
one `[n, width]` float tensor, the columns in COLUMN order:

* NUMERIC: the values, standardized with the column's mean and standard deviation from the SQL
  source's statistics when there are some (prediction replays them from the TrainedModel);
* CATEGORY_ID: ids in [0, n); an id outside reads as an extra out-of-range bucket;
* CATEGORY_HASH: values (text, or numbers as text) hashed into n buckets;
* BUCKET: numbers cut at the boundaries;
* INDICATOR: a categorical column multi-hot (n wide);
* EMBEDDING: a categorical column embedded and combined over its values (mean, sum, sqrtn) —
  a Keras table, or, from `PS_MIN_BUCKETS` buckets on, a table on the parameter servers
  (`elasticdl.layers.Embedding`: only the rows a minibatch touches travel).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elasticdl.layers import Embedding as PSEmbedding
from elasticdl.runtime.column_spec import (
    Bucket,
    CategoryHash,
    CategoryId,
    Column,
    Embedding,
    Indicator,
    Numeric,
    ResolvedFeatures,
)

PS_MIN_BUCKETS = 10_000
"""From this many buckets on an EMBEDDING's table lives on the parameter servers: a Keras table
of that size would send its whole gradient with every push."""


def _ids(column: Column, inputs: dict[str, tf.Tensor]) -> tuple[tf.Tensor, int]:
    """Integer ids `[n, length]` of a categorical column and how many buckets they span."""
    values = inputs[column.name]
    if isinstance(column, CategoryId):
        ids = tf.cast(values, tf.int64)
        inside = tf.logical_and(ids >= 0, ids < column.buckets)
        return tf.where(inside, ids, tf.cast(column.buckets, tf.int64)), column.buckets + 1
    if isinstance(column, CategoryHash):
        text = values if values.dtype == tf.string else tf.strings.as_string(values)
        return tf.strings.to_hash_bucket_fast(text, column.buckets), column.buckets
    if isinstance(column, Bucket):
        numbers = tf.cast(values, tf.float32)
        ids = tf.raw_ops.Bucketize(input=numbers, boundaries=list(column.boundaries))
        return tf.cast(ids, tf.int64), column.buckets
    raise TypeError(f"{column!r} is not categorical")


def _combine(rows: tf.Tensor, combiner: str) -> tf.Tensor:
    """`[n, length, dim]` -> `[n, dim]`."""
    if combiner == "sum":
        return tf.reduce_sum(rows, axis=1)
    if combiner == "sqrtn":
        count = tf.cast(tf.shape(rows)[1], rows.dtype)
        return tf.reduce_sum(rows, axis=1) / tf.sqrt(count)
    return tf.reduce_mean(rows, axis=1)


class FeatureLayer(tf.keras.layers.Layer):
    """The resolved columns of one group as one dense tensor (module docstring)."""

    def __init__(self, features: ResolvedFeatures, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.features = features
        self.columns = features.groups[0].columns
        self._tables: dict[str, Any] = {}  # string keys: TensorFlow's export tracks them
        for i, column in enumerate(self.columns):
            if isinstance(column, Embedding):
                _, buckets = _bucket_count(column.source)
                name = f"embedding_{i}_{column.source.name}"
                if buckets >= PS_MIN_BUCKETS:
                    self._tables[f"c{i}"] = PSEmbedding(
                        column.dimension, combiner=column.combiner, name=name
                    )
                else:
                    self._tables[f"c{i}"] = tf.keras.layers.Embedding(
                        buckets, column.dimension, name=name
                    )

    def build(self, input_shape: Any = None) -> None:
        for key, table in self._tables.items():
            if isinstance(table, tf.keras.layers.Embedding):
                source = self.columns[int(key[1:])].source.name
                table.build((None, self.features.inputs[source].length))
        self.built = True

    def call(self, inputs: dict[str, tf.Tensor]) -> tf.Tensor:
        parts = [self._column(i, column, inputs) for i, column in enumerate(self.columns)]
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)

    def _column(self, i: int, column: Column, inputs: dict[str, tf.Tensor]) -> tf.Tensor:
        if isinstance(column, Numeric):
            values = tf.cast(inputs[column.name], tf.float32)
            stats = self.features.inputs[column.name].stats
            std = float(stats.get("std") or 0.0)
            if std > 0:
                values = (values - float(stats.get("mean") or 0.0)) / std
            return tf.reshape(values, [-1, _size(column.shape)])
        if isinstance(column, Indicator):
            ids, buckets = _ids(column.source, inputs)
            return tf.reduce_max(tf.one_hot(ids, buckets), axis=1)
        if isinstance(column, Embedding):
            ids, _ = _ids(column.source, inputs)
            table = self._tables[f"c{i}"]
            if isinstance(table, PSEmbedding):
                return table(ids)
            return _combine(table(ids), column.combiner)
        ids, buckets = _ids(column, inputs)  # a categorical column alone: its one-hot
        return tf.reduce_max(tf.one_hot(ids, buckets), axis=1)


def _bucket_count(column: Column) -> tuple[Column, int]:
    if isinstance(column, CategoryId):
        return column, column.buckets + 1
    if isinstance(column, CategoryHash | Bucket):
        return column, column.buckets
    raise TypeError(f"{column!r} is not categorical")


def _size(shape: tuple[int, ...]) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size
