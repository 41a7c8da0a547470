"""`SparseEmbedding(input_dim, output_dim, embeddings_initializer="uniform", combiner="mean")`:
the combined embedding of each row's ids.

Input: a `tf.SparseTensor` of int ids `[batch, n]` (a dense tensor is read as sparse with its
0 ids dropped, as ElasticDL did); negative ids take no part (an `IndexLookup` without OOV
tokens gives -1). Output: `[batch, output_dim]`, each row the `combiner` ("sum", "mean" or
"sqrtn") of its ids' vectors; a row without ids gives zeros.

Where the table lives (`on_ps`, decided by `on_parameter_servers` unless given):

* small -- `input_dim * output_dim` under `PS_TABLE_MIN_ENTRIES` (4 MiB of float32) -- a
  dense `[input_dim, output_dim]` variable, as in ElasticDL: the parameter servers hold and
  update it whole, which costs less than per-id traffic at that size;
* large, or `input_dim` 0 / None (ids of any size) -- a table on the parameter servers
  (`elasticdl.layers.Embedding` with the combiner, its sublayer `table`): rows created on first
  touch, only the minibatch's rows pulled and pushed. `input_dim` is then not enforced. The
  sublayer is named after this layer without Keras's counter (`sparse_embedding_3` ->
  `sparse_embedding_table`), so every process names the table alike (runtime/embedding/
  tables.py numbers tables by position).

Both start from the same initializer (Keras's uniform(-0.05, 0.05) by default).
"""

from __future__ import annotations

import re
from typing import Any

import tensorflow as tf

from elasticdl.runtime import keras_mode
from elasticdl.runtime.embedding import layer_class
from elasticdl_preprocessing.layers._base import Layer

COMBINERS = ("sum", "mean", "sqrtn")
_COUNTER = re.compile(r"_\d+$")
PS_TABLE_MIN_ENTRIES = 1 << 20


def on_parameter_servers(input_dim: int | None, output_dim: int) -> bool:
    """Whether a table of `input_dim` rows of `output_dim` lives on the parameter servers."""
    return not input_dim or int(input_dim) * int(output_dim) >= PS_TABLE_MIN_ENTRIES


class SparseEmbedding(Layer):
    def __init__(
        self,
        input_dim: int | None,
        output_dim: int,
        embeddings_initializer: Any = "uniform",
        combiner: str = "mean",
        on_ps: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if combiner not in COMBINERS:
            raise ValueError(
                f"SparseEmbedding: combiner must be one of {COMBINERS}, got {combiner!r}"
            )
        if int(output_dim) < 1 or (input_dim is not None and int(input_dim) < 0):
            raise ValueError(
                f"SparseEmbedding: needs output_dim >= 1 and input_dim >= 0 (or None), got "
                f"input_dim={input_dim!r}, output_dim={output_dim!r}"
            )
        super().__init__(**kwargs)
        self.input_dim = int(input_dim or 0)
        self.output_dim = int(output_dim)
        self.embeddings_initializer = embeddings_initializer
        self.combiner = combiner
        self.on_ps = (
            on_parameter_servers(self.input_dim, self.output_dim) if on_ps is None else bool(on_ps)
        )
        if self.on_ps:
            self.table = layer_class()(
                self.output_dim,
                embeddings_initializer=embeddings_initializer,
                combiner=combiner,
                name=f"{_COUNTER.sub('', self.name)}_table",  # no process-local counter
            )
        elif not self.input_dim:
            raise ValueError("SparseEmbedding: a table off the parameter servers needs input_dim")

    def build(self, input_shape: Any = None) -> None:
        if not self.on_ps:
            self.embeddings = self.add_weight(
                name="embeddings",
                shape=(self.input_dim, self.output_dim),
                initializer=self.embeddings_initializer,
                trainable=True,
            )
        self.built = True

    def call(self, inputs: Any) -> Any:
        ids = sparse_ids(inputs)
        if self.on_ps:
            return self.table(ids)
        table = keras_mode.read(self.embeddings)  # a Keras 3 variable is no tf.Variable
        return tf.nn.safe_embedding_lookup_sparse(table, ids, combiner=self.combiner)

    def get_config(self) -> dict[str, Any]:
        initializer = self.embeddings_initializer
        if not isinstance(initializer, str):
            initializer = keras_mode.keras().initializers.serialize(initializer)
        return {
            **super().get_config(),
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "embeddings_initializer": initializer,
            "combiner": self.combiner,
            "on_ps": self.on_ps,
        }


def sparse_ids(inputs: Any) -> tf.SparseTensor:
    """int64 ids as a `tf.SparseTensor` without negative ids (and, from a dense tensor, without
    its 0 ids)."""
    if isinstance(inputs, tf.RaggedTensor):
        inputs = inputs.to_sparse()
    if not isinstance(inputs, tf.SparseTensor):
        dense = tf.convert_to_tensor(inputs)
        where = tf.where(tf.not_equal(dense, 0))
        inputs = tf.SparseTensor(where, tf.gather_nd(dense, where), tf.shape(dense, tf.int64))
    ids = tf.SparseTensor(inputs.indices, tf.cast(inputs.values, tf.int64), inputs.dense_shape)
    return tf.sparse.retain(ids, ids.values >= 0)
