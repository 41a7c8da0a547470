"""Tables of tf.Example records for the built-in DNNs (`regressor.DNN`, `classifier.DNN`).

Any table works: each column is its own feature (`x0`, `x1`, ... floats; an `id` column is
ignored). The columns come from the `DatasetMetadata` the runtime passes to `dataset_fn`; when
none is given, the first record of the dataset is inspected instead.

A parsed record becomes two model inputs:

* `"dense"` — the numeric (float and int64) features concatenated in column order, as float32;
* `"categorical"` — one hash-bucket id per value of each string (bytes) column. The column name
  is hashed with the value, so equal strings in different columns get different buckets; all
  columns share one embedding table in the model (a Keras variable of `hash_buckets` rows);
* `"sparse"` — the same for the text columns with many distinct values (`ps_columns`), hashed
  to 63-bit ids instead: they share one table on the parameter servers
  (`elasticdl.layers.Embedding`, a row per value seen, no collisions).

The rule for `"sparse"` (`goes_to_ps`): the SQL source's column statistics (`schema.json`)
estimate at least `ps_embedding_min_distinct` distinct values (default 1000: more than the
shared table's default 1000 buckets could keep apart) and the values repeat, on average at
least twice per value (a column of unique values, such as a name or key, has nothing to learn
per value and stays hashed). Without statistics (data not from SQL) every text column is
hashed into buckets; `ps_embedding_min_distinct=0` turns the PS tables off. Prediction replays
the training statistics (the TrainedModel keeps them), so it routes the columns the same way.

Numeric features are standardized with the column statistics of the SQL source's
`schema.json` (`metadata.schema`) when there is one (`transform_numeric`), unscaled otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf
from zoo_common.chunks import parse_in_chunks

from elasticdl import Mode
from elasticdl.layers import Embedding
from elasticdl.runtime.data.metadata import DatasetMetadata, FeatureInfo

DENSE_KEY = "dense"
CATEGORICAL_KEY = "categorical"
SPARSE_KEY = "sparse"
PS_MIN_DISTINCT = 1000
PS_MIN_REPEATS = 2.0
FULL_HASH = (1 << 63) - 1

_PARSE_TYPES = {"float": tf.float32, "int64": tf.int64, "bytes": tf.string}
_DEFAULTS = {"float": 0.0, "int64": 0, "bytes": b""}


def resolve_metadata(dataset: tf.data.Dataset, metadata: DatasetMetadata | None) -> DatasetMetadata:
    """Return `metadata`, or describe the dataset's first record when it is None."""
    if metadata is not None:
        return metadata
    for record in dataset.take(1):
        return DatasetMetadata.from_example(record.numpy())
    raise ValueError("cannot infer the table's columns: the dataset is empty and no metadata given")


def column_stats(metadata: DatasetMetadata | None, name: str) -> dict[str, Any]:
    """Statistics of column `name` from the SQL source's `schema.json` ({} when unknown)."""
    schema = (metadata.schema if metadata is not None else None) or {}
    for column in schema.get("columns", []):
        if column.get("name") == name:
            return dict(column.get("stats") or {})
    return {}


def goes_to_ps(stats: dict[str, Any], min_distinct: int) -> bool:
    """Whether a text column with these `schema.json` statistics is embedded on the parameter
    servers (see the module docstring): many distinct values, each seen repeatedly."""
    distinct = int(stats.get("distinct_estimate") or 0)
    count = int(stats.get("count") or 0)
    return 0 < min_distinct <= distinct and count >= PS_MIN_REPEATS * distinct


def ps_columns(metadata: DatasetMetadata | None, min_distinct: int) -> set[str]:
    """The text feature columns of `metadata` embedded on the parameter servers."""
    if metadata is None:
        return set()
    return {
        name
        for name, info in metadata.feature_columns().items()
        if info.kind == "bytes" and goes_to_ps(column_stats(metadata, name), min_distinct)
    }


def transform_numeric(
    name: str, values: tf.Tensor, info: FeatureInfo, metadata: DatasetMetadata
) -> tf.Tensor:
    """Standardize numeric `values` (float32) with the column's mean and std from
    `schema.json` when the data came from SQL; the identity otherwise."""
    del info
    stats = column_stats(metadata, name)
    std = float(stats.get("std") or 0.0)
    if std > 0:
        return (values - float(stats["mean"])) / std
    return values


def parse_table_dataset(
    dataset: tf.data.Dataset,
    mode: Mode,
    metadata: DatasetMetadata | None,
    *,
    label_dtype: tf.DType,
    hash_buckets: int,
    model_name: str,
    ps_min_distinct: int = 0,
) -> tf.data.Dataset:
    """Map serialized tf.Example records to ({"dense", "categorical", "sparse"}, label [1])
    (the keys present: see the module docstring; `ps_min_distinct`: see `goes_to_ps`).

    In PREDICTION mode only the features are returned. A feature missing from a record reads as
    0 (numbers) or "" (strings). Records are shuffled only when training; they are parsed a
    chunk at a time (`zoo_common.chunks`).
    """
    metadata = resolve_metadata(dataset, metadata)
    columns = metadata.feature_columns()
    on_ps = ps_columns(metadata, ps_min_distinct)
    if not columns:
        raise ValueError(
            f"{model_name}: the records have no feature columns (found {sorted(metadata.columns)},"
            f" label {metadata.label!r}); give the table at least one column besides label and id"
        )
    spec: dict[str, Any] = {}
    for name, info in columns.items():
        if info.length < 1:
            raise ValueError(f"{model_name}: column {name!r} is empty in the sampled record")
        default = [_DEFAULTS[info.kind]] * info.length
        spec[name] = tf.io.FixedLenFeature([info.length], _PARSE_TYPES[info.kind], default)
    label = None
    if mode != Mode.PREDICTION:
        label = metadata.label or ("label" if "label" in metadata.columns else None)
        if label is None:
            raise ValueError(
                f"{model_name}: no label column among {sorted(metadata.columns)}; "
                "name the label column `label` or set it in the dataset metadata"
            )
        label_info = metadata.columns[label]
        if label_info.length != 1 or label_info.kind == "bytes":
            raise ValueError(
                f"{model_name}: label column {label!r} must hold one number per record, "
                f"found {label_info.kind} x {label_info.length}"
            )
        spec[label] = tf.io.FixedLenFeature([1], _PARSE_TYPES[label_info.kind])

    @tf.autograph.experimental.do_not_convert  # see zoo_common/__init__.py
    def _parse(records: tf.Tensor) -> Any:
        parsed = tf.io.parse_example(records, spec)  # each column [n, length]
        dense, categorical, sparse = [], [], []
        for name, info in columns.items():
            values = parsed[name]
            if info.kind == "bytes":
                keyed = tf.strings.join([tf.constant(name + "="), values])
                if name in on_ps:
                    sparse.append(tf.strings.to_hash_bucket_fast(keyed, FULL_HASH))
                else:
                    categorical.append(tf.strings.to_hash_bucket_fast(keyed, hash_buckets))
            else:
                values = tf.cast(values, tf.float32)
                dense.append(transform_numeric(name, values, info, metadata))
        features = {}
        if dense:
            features[DENSE_KEY] = tf.concat(dense, axis=1)
        if categorical:
            features[CATEGORICAL_KEY] = tf.concat(categorical, axis=1)
        if sparse:
            features[SPARSE_KEY] = tf.concat(sparse, axis=1)
        if label is None:
            return features
        return features, tf.cast(parsed[label], label_dtype)

    dataset = parse_in_chunks(dataset, _parse)
    if mode == Mode.TRAINING:
        dataset = dataset.shuffle(buffer_size=1024)
    return dataset


class TableDNN(tf.keras.Model):
    """Fully connected network over the "dense", embedded "categorical" and PS-embedded
    "sparse" inputs.

    `hidden_units=()` gives a linear model. Subclasses add the output size, loss, optimizer and
    metrics (the `default_*` methods the model-zoo loader calls). The PS table exists only when
    the inputs have "sparse" ids (created in `build`).
    """

    def __init__(
        self,
        output_units: int,
        hidden_units: Sequence[int] = (64, 32),
        activation: str = "relu",
        dropout_rate: float = 0.0,
        hash_buckets: int = 1000,
        embedding_dim: int = 8,
        name: str | None = None,
        ps_embedding_min_distinct: int = PS_MIN_DISTINCT,
    ) -> None:
        super().__init__(name=name)
        if isinstance(hidden_units, int):
            hidden_units = (hidden_units,)
        self.hidden_units = tuple(int(u) for u in hidden_units)
        if any(u < 1 for u in self.hidden_units):
            raise ValueError(f"hidden_units must be positive integers, got {list(hidden_units)}")
        self.activation = str(activation)
        self.dropout_rate = float(dropout_rate)
        self.hash_buckets = int(hash_buckets)
        self.embedding_dim = int(embedding_dim)
        self.ps_embedding_min_distinct = int(ps_embedding_min_distinct)
        self._ps_embedding: Any = None
        layers = tf.keras.layers
        # Named layers give stable variable paths ("<name>/hidden_1/kernel", ...).
        self._embedding = layers.Embedding(self.hash_buckets, self.embedding_dim, name="embedding")
        self._flatten = layers.Flatten(name="flatten")
        self._hidden = [
            layers.Dense(units, activation=self.activation, name=f"hidden_{i}")
            for i, units in enumerate(self.hidden_units, start=1)
        ]
        self._dropout = layers.Dropout(self.dropout_rate, name="dropout")
        self._output = layers.Dense(int(output_units), name="output")

    def build(self, input_shape: dict[str, Any]) -> None:
        """Create the weights for the inputs present (no embedding without string columns)."""
        width = 0
        if DENSE_KEY in input_shape:
            width += int(input_shape[DENSE_KEY][-1])
        if CATEGORICAL_KEY in input_shape:
            self._embedding.build(input_shape[CATEGORICAL_KEY])
            width += int(input_shape[CATEGORICAL_KEY][-1]) * self.embedding_dim
        if SPARSE_KEY in input_shape:
            self._ps_embedding = Embedding(self.embedding_dim, name="ps_embedding")
            width += int(input_shape[SPARSE_KEY][-1]) * self.embedding_dim
        for layer in self._hidden:
            layer.build((None, width))
            width = layer.units
        self._output.build((None, width))
        self.built = True

    def call(self, inputs: dict[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        """Return [batch, output_units] outputs (values or logits)."""
        parts = []
        if DENSE_KEY in inputs:
            parts.append(tf.cast(inputs[DENSE_KEY], tf.float32))
        if CATEGORICAL_KEY in inputs:
            parts.append(self._flatten(self._embedding(inputs[CATEGORICAL_KEY])))
        if SPARSE_KEY in inputs:
            parts.append(self._flatten(self._ps_embedding(inputs[SPARSE_KEY])))
        if not parts:
            raise ValueError(f"{self.name} expects inputs {DENSE_KEY!r} and/or {CATEGORICAL_KEY!r}")
        x = parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)
        for layer in self._hidden:
            x = layer(x)
            if self.dropout_rate > 0:
                x = self._dropout(x, training=training)
        return self._output(x)

    def table_config(self) -> dict[str, Any]:
        """The constructor arguments this base class owns."""
        return {
            "hidden_units": list(self.hidden_units),
            "activation": self.activation,
            "dropout_rate": self.dropout_rate,
            "hash_buckets": self.hash_buckets,
            "embedding_dim": self.embedding_dim,
            "name": self.name,
            "ps_embedding_min_distinct": self.ps_embedding_min_distinct,
        }
