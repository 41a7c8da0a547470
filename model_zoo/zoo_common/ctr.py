"""Click-through-rate models on the Criteo layout: `deepfm.DeepFM`, `wide_and_deep.WideAndDeep`.

Records: `I1`..`I13` (counts), `C1`..`C26` (categorical values), `label` (0/1), as
`elasticdl data gen ctr` writes them and Criteo converted to tf.train.Example looks. Any
record of that layout works: a missing or empty feature reads as 0 / "", counts may be int64
or float, categorical values bytes or int64 (ints are hashed through their decimal text), the
label int64 or float. Other columns (`id`, ...) are ignored.

`parse_ctr` turns a record into
* `"dense"`: [13] float32, `log1p(max(I, 0))` of each count (Criteo's heavy tails tamed);
* `"ids"`: [26] int64, each field's value hashed with its column name (equal strings in
  different columns get different ids): to 63 bits for PS-backed tables (no table size), or to
  `hash_buckets` buckets when given (needed by plain Keras tables).

`CTRModel` embeds each field in its own table (`k + 1` wide: a `k`-dim factor and a first-order
weight), PS-backed (`elasticdl.layers.Embedding`) by default or plain Keras
(`embedding="keras"`, `hash_buckets` rows each: the single-process reference). It outputs the
click probability [batch, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf
from zoo_common.chunks import parse_in_chunks

from elasticdl import Mode
from elasticdl.layers import Embedding

INT_COLUMNS = tuple(f"I{i}" for i in range(1, 14))
CAT_COLUMNS = tuple(f"C{i}" for i in range(1, 27))
LABEL = "label"
FULL_HASH = (1 << 63) - 1


def _column_kind(metadata: Any, name: str, default: str) -> str:
    columns = getattr(metadata, "columns", None) or {}
    info = columns.get(name)
    return info.kind if info is not None else default


def _first(values: tf.RaggedTensor, default: Any) -> tf.Tensor:
    """[n] first values of a ragged-parsed feature, `default` where absent or empty."""
    return values.to_tensor(default_value=default, shape=[None, 1])[:, 0]


def parse_ctr(
    dataset: tf.data.Dataset,
    mode: Mode,
    metadata: Any = None,
    hash_buckets: int | None = None,
) -> tf.data.Dataset:
    """Map serialized records to ({"dense": [13], "ids": [26]}, label [1]) (see above).

    Records are parsed and hashed a chunk at a time (`zoo_common.chunks`: one `parse_example`
    for the chunk; per-record parsing of 40 features costs several times more)."""
    kinds = {
        name: _column_kind(metadata, name, "bytes" if name in CAT_COLUMNS else "int64")
        for name in (*INT_COLUMNS, *CAT_COLUMNS, LABEL)
    }
    types = {"int64": tf.int64, "float": tf.float32, "bytes": tf.string}
    spec = {name: tf.io.RaggedFeature(types[kind]) for name, kind in kinds.items()}
    if mode == Mode.PREDICTION:
        spec.pop(LABEL)
    buckets = int(hash_buckets) if hash_buckets else FULL_HASH

    @tf.autograph.experimental.do_not_convert  # see zoo_common/__init__.py
    def parse(records: tf.Tensor) -> Any:
        parsed = tf.io.parse_example(records, spec)
        counts = [tf.cast(_first(parsed[name], 0), tf.float32) for name in INT_COLUMNS]
        dense = tf.math.log1p(tf.maximum(tf.stack(counts, axis=1), 0.0))
        values = []
        for name in CAT_COLUMNS:
            value = parsed[name]
            if value.dtype != tf.string:
                value = tf.strings.as_string(value)
            values.append(_first(value, ""))
        values = tf.stack(values, axis=1)  # [n, 26]
        prefixes = tf.constant([f"{name}=" for name in CAT_COLUMNS])
        keyed = tf.strings.join([tf.broadcast_to(prefixes, tf.shape(values)), values])
        features = {"dense": dense, "ids": tf.strings.to_hash_bucket_fast(keyed, buckets)}
        if mode == Mode.PREDICTION:
            return features
        label = tf.cast(_first(parsed[LABEL], 0), tf.float32)
        return features, label[:, None]

    dataset = parse_in_chunks(dataset, parse)
    if mode == Mode.TRAINING:
        dataset = dataset.shuffle(buffer_size=1024)
    return dataset


class CTRModel(keras.Model):
    """Per-field embeddings + first-order weights, optional FM term, DNN; sigmoid output."""

    def __init__(
        self,
        embedding_dim: int = 8,
        hidden_units: Sequence[int] = (64, 32),
        learning_rate: float = 0.001,
        optimizer: str = "adam",
        embedding: str = "elasticdl",
        hash_buckets: int | None = None,
        fm: bool = True,
        name: str = "ctr",
    ) -> None:
        super().__init__(name=name)
        if embedding not in ("elasticdl", "keras"):
            raise ValueError(f"embedding must be 'elasticdl' or 'keras', got {embedding!r}")
        if embedding == "keras" and not hash_buckets:
            raise ValueError("embedding='keras' needs hash_buckets (the rows of each table)")
        if optimizer not in ("adam", "sgd", "adagrad"):
            raise ValueError(f"optimizer must be 'adam', 'sgd' or 'adagrad', got {optimizer!r}")
        self.embedding_dim = int(embedding_dim)
        self.hidden_units = tuple(int(u) for u in hidden_units)
        self.learning_rate = float(learning_rate)
        self.optimizer_name = optimizer
        self.embedding_kind = embedding
        self.hash_buckets = int(hash_buckets) if hash_buckets else None
        self.fm = bool(fm)
        width = self.embedding_dim + 1
        if embedding == "keras":
            self.fields = [
                keras.layers.Embedding(self.hash_buckets, width, name=f"field_{c}")
                for c in CAT_COLUMNS
            ]
        else:
            self.fields = [Embedding(width, name=f"field_{c}") for c in CAT_COLUMNS]
        self.dense_linear = keras.layers.Dense(1, name="dense_linear")
        self.hidden = [
            keras.layers.Dense(u, activation="relu", name=f"hidden_{i}")
            for i, u in enumerate(self.hidden_units, start=1)
        ]
        self.deep_output = keras.layers.Dense(1, name="deep_output")

    def call(self, inputs: dict[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        return tf.sigmoid(self.logit(inputs))

    def logit(self, inputs: dict[str, tf.Tensor]) -> tf.Tensor:
        """[batch, 1] logit of the click probability."""
        dense = tf.cast(inputs["dense"], tf.float32)
        ids = inputs["ids"]
        vectors = tf.stack(
            [field(ids[:, i]) for i, field in enumerate(self.fields)], axis=1
        )  # [batch, 26, k + 1]
        factors, weights = vectors[..., :-1], vectors[..., -1]
        logit = self.dense_linear(dense) + tf.reduce_sum(weights, axis=1, keepdims=True)
        if self.fm:
            summed = tf.reduce_sum(factors, axis=1)
            pairs = tf.square(summed) - tf.reduce_sum(tf.square(factors), axis=1)
            logit += 0.5 * tf.reduce_sum(pairs, axis=1, keepdims=True)
        x = tf.concat([tf.reshape(factors, [-1, len(CAT_COLUMNS) * self.embedding_dim]), dense], 1)
        for layer in self.hidden:
            x = layer(x)
        return logit + self.deep_output(x)

    def get_config(self) -> dict[str, Any]:
        return {
            "embedding_dim": self.embedding_dim,
            "hidden_units": list(self.hidden_units),
            "learning_rate": self.learning_rate,
            "optimizer": self.optimizer_name,
            "embedding": self.embedding_kind,
            "hash_buckets": self.hash_buckets,
            "name": self.name,
        }

    # -- the model-zoo contract (Keras class with defaults) --------------------------------------
    def default_input(self, dataset: tf.data.Dataset, mode: Mode, metadata: Any = None) -> Any:
        """Parse Criteo-layout records (see `parse_ctr`)."""
        return parse_ctr(dataset, mode, metadata, self.hash_buckets)

    def default_loss(self, labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
        """Mean binary cross-entropy of the click probability."""
        return tf.reduce_mean(keras.losses.binary_crossentropy(labels, predictions))

    def default_optimizer(self) -> keras.optimizers.Optimizer:
        """Adam (default), SGD or Adagrad with the model's `learning_rate`."""
        kinds = {
            "adam": keras.optimizers.Adam,
            "sgd": keras.optimizers.SGD,
            "adagrad": keras.optimizers.Adagrad,
        }
        return kinds[self.optimizer_name](learning_rate=self.learning_rate)

    def default_metrics(self) -> dict[str, Any]:
        """AUC (ROC) and mean log loss."""
        return {
            "auc": keras.metrics.AUC(num_thresholds=1000, name="auc"),
            "logloss": lambda labels, predictions: keras.losses.binary_crossentropy(
                labels, predictions
            ),
        }
