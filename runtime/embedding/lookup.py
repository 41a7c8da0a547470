"""What a PS-backed embedding layer does, whichever Keras it is a layer of.

`TableLookup` holds the whole behaviour of `elasticdl.layers.Embedding` (see
`runtime/embedding/layer.py` for the contract): where rows come from, combiners, ragged and
sparse ids, trained rows. The layer classes add only what differs between Keras 3 (`layer.py`,
a `keras.layers.Layer`) and Keras 2 (`layer_keras2.py`, a `tf_keras.layers.Layer`): their base
class, the mask op and the initializer serialization. The runtime recognises both by this
class (`tables.embedding_layers`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from elasticdl.runtime.embedding import feed

COMBINERS = (None, "sum", "mean", "sqrtn")


class _TrainedRows:
    """The served table and rows, in a plain object: tf_keras tracks a variable it finds in an
    attribute (or a tuple) of a layer as one of the layer's weights, and these are no weights
    of the model (the parameter servers hold none of them); exports track them explicitly."""

    def __init__(self, table: Any, rows: Any) -> None:
        self.table = table
        self.rows = rows


class TableLookup:
    """The behaviour shared by both Keras layer classes; they call `_configure` first."""

    output_dim: int
    embeddings_initializer: str
    mask_zero: bool
    combiner: str | None
    seed: int
    table_name: str
    name: str

    def _configure(
        self,
        output_dim: int,
        initializer: str,
        mask_zero: bool,
        input_length: int | None,
        combiner: str | None,
        seed: int,
    ) -> None:
        if int(output_dim) < 1:
            raise ValueError(f"Embedding: output_dim must be >= 1, got {output_dim}")
        if combiner not in COMBINERS:
            raise ValueError(f"Embedding: combiner must be one of {COMBINERS}, got {combiner!r}")
        self.output_dim = int(output_dim)
        self.embeddings_initializer = initializer
        self.mask_zero = bool(mask_zero)
        self.input_length = input_length
        self.combiner = combiner
        self.seed = int(seed)
        self.table_name = ""
        self.supports_masking = self.mask_zero and combiner is None
        self._local: Any = None
        self._trained: Any = None

    @property
    def table(self) -> str:
        """The name of this layer's table on the parameter servers."""
        return self.table_name or self.name

    def build(self, input_shape: Any = None) -> None:
        self.built = True

    # -- rows --------------------------------------------------------------------------------
    def set_trained_rows(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Serve from trained rows: `ids` (n,) int64 and `rows` (n, output_dim); other ids
        read as zeros."""
        ids = np.asarray(ids, np.int64).reshape(-1)
        rows = np.asarray(rows, np.float32).reshape(len(ids), self.output_dim)
        matrix = np.concatenate([rows, np.zeros((1, self.output_dim), np.float32)])
        zeros_row = len(ids)
        index = np.arange(len(ids), dtype=np.int64)
        if not len(ids):  # a hash table cannot be empty: one key, mapped to the zeros row
            ids, index = np.zeros(1, np.int64), np.zeros(1, np.int64)
        init = tf.lookup.KeyValueTensorInitializer(tf.constant(ids), tf.constant(index))
        table = tf.lookup.StaticHashTable(init, default_value=zeros_row)
        rows_variable = tf.Variable(matrix, trainable=False, name="trained_rows")
        self._trained = _TrainedRows(table, rows_variable)

    @property
    def trained_resources(self) -> tuple[Any, ...]:
        """The hash table and rows variable of `set_trained_rows` (for SavedModel tracking)."""
        return (self._trained.table, self._trained.rows) if self._trained else ()

    def local_table(self) -> Any:
        """The in-process table used outside a worker (created on first use)."""
        if self._local is None:
            from elasticdl.runtime.ps.embedding_table import EmbeddingTable

            self._local = EmbeddingTable(
                self.table, self.output_dim, self.embeddings_initializer, self.seed
            )
        return self._local

    def _embed(self, ids: tf.Tensor) -> tf.Tensor:
        """[n, output_dim] vectors of the flat int64 `ids`."""
        context = feed.active()
        if isinstance(context, feed.CollectedIds):
            context.record(self.table, ids)
            return tf.zeros([tf.size(ids), self.output_dim], tf.float32)
        if isinstance(context, feed.FedRows):
            rows, index = context.take(self.table)
            return tf.gather(rows, index)
        if self._trained is not None:
            return tf.gather(self._trained.rows, self._trained.table.lookup(ids))
        unique, index = tf.unique(ids, out_idx=tf.int32)

        def lookup(values: tf.Tensor) -> np.ndarray:
            return self.local_table().lookup(values.numpy())

        rows = tf.py_function(lookup, [unique], tf.float32)
        rows = tf.ensure_shape(rows, [None, self.output_dim])
        return tf.gather(tf.stop_gradient(rows), index)

    # -- call --------------------------------------------------------------------------------
    def call(self, inputs: Any) -> Any:
        if isinstance(inputs, tf.SparseTensor):
            inputs = tf.RaggedTensor.from_sparse(inputs)
        if isinstance(inputs, tf.RaggedTensor):
            return self._call_ragged(inputs)
        ids = as_ids(inputs)
        vectors = self._embed(tf.reshape(ids, [-1]))
        out = tf.reshape(vectors, tf.concat([tf.shape(ids), [self.output_dim]], axis=0))
        if self.combiner is None:
            return out
        weights = tf.ones_like(ids, tf.float32)
        if self.mask_zero:
            weights = tf.cast(tf.not_equal(ids, 0), tf.float32)
        total = tf.reduce_sum(out * weights[..., None], axis=-2)
        return self._normalize(total, tf.reduce_sum(weights, axis=-1, keepdims=True))

    def _call_ragged(self, inputs: tf.RaggedTensor) -> Any:
        ids = as_ids(inputs.flat_values)
        vectors = self._embed(tf.reshape(ids, [-1]))
        if self.combiner is None:
            return inputs.with_flat_values(vectors)
        weights = tf.ones_like(ids, tf.float32)
        if self.mask_zero:
            weights = tf.cast(tf.not_equal(ids, 0), tf.float32)
        weighted = inputs.with_flat_values(vectors * weights[:, None])
        total = tf.reduce_sum(weighted, axis=-2)
        counts = tf.reduce_sum(inputs.with_flat_values(weights), axis=-1)
        return self._normalize(total, tf.expand_dims(counts, -1))

    def _normalize(self, total: tf.Tensor, counts: tf.Tensor) -> tf.Tensor:
        if self.combiner == "mean":
            return tf.math.divide_no_nan(total, counts)
        if self.combiner == "sqrtn":
            return tf.math.divide_no_nan(total, tf.sqrt(counts))
        return total

    def _output_shape(self, input_shape: Any) -> tuple[Any, ...]:
        shape = tuple(input_shape)
        if self.combiner is None:
            return (*shape, self.output_dim)
        return (*shape[:-1], self.output_dim)

    def _own_config(self) -> dict[str, Any]:
        return {
            "output_dim": self.output_dim,
            "embeddings_initializer": self.embeddings_initializer,
            "mask_zero": self.mask_zero,
            "input_length": self.input_length,
            "combiner": self.combiner,
            "seed": self.seed,
        }


def as_ids(values: Any) -> tf.Tensor:
    """`values` as int64 ids. Integers, and floats holding whole numbers (ElasticDL v0.2's
    layer cast its input the same way: model files feed ids through float `Input`s); strings
    are refused, they must be hashed first."""
    values = tf.convert_to_tensor(values)
    if not (values.dtype.is_integer or values.dtype.is_floating):
        raise TypeError(
            f"Embedding takes integer ids, got {values.dtype.name}; hash strings to int64 ids "
            "first (e.g. tf.strings.to_hash_bucket_fast)"
        )
    return tf.cast(values, tf.int64)
