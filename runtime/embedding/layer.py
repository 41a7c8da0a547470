"""`Embedding`: a Keras 3 embedding layer whose table lives on the parameter servers.

    Embedding(output_dim, embeddings_initializer="uniform", mask_zero=False,
              input_length=None, combiner=None, seed=0, name=None)

ElasticDL v0.2's constructor, with no `input_dim`: ids are int64 values of any size (hash
strings to ids before the layer; floats holding whole numbers are cast, as v0.2 did).
Inputs: an integer tensor of any shape (output: its shape plus `output_dim`), or with
`combiner` ("sum", "mean", "sqrtn") the ids of the last axis -- or of each row of a
`tf.RaggedTensor` / 2-D `tf.SparseTensor` -- are combined into one vector (output:
`[..., output_dim]`; a row without ids gives zeros). With `mask_zero=True`, id 0 is padding:
without a combiner the layer returns a Keras mask (`ids != 0`), with one, id 0 takes no part
in the combination.

Where the rows come from, in this order:

* inside a worker (`feed.active()`): rows pulled from the PS for the minibatch's unique ids,
  and the worker pushes their gradients back (the table is not a Keras variable, so Keras
  optimizers never see it);
* trained rows set with `set_trained_rows(ids, rows)` (prediction, export): a static hash
  table id -> row index plus the rows matrix; an id never seen in training reads as zeros;
* otherwise (plain Keras use, tests): an in-process `EmbeddingTable` with the same rows the PS
  would create (a pure function of table name, seed and id). Its rows are read only: plain
  Keras `fit` does not train this layer -- train it with `elasticdl train`.

Table names: `table_name` defaults to the layer's name; a worker names the tables of a model
by position and layer name (`tables.assign_table_names`) so every process agrees.

This is the Keras 3 class; `layer_keras2.Embedding` is the same layer for Keras 2 model files
(tf_keras), and `elasticdl.layers.Embedding` is the one of the process's Keras mode
(runtime/keras_mode.py). Both share `lookup.TableLookup`, which holds the behaviour.
"""

from __future__ import annotations

import json
from typing import Any

import keras

from elasticdl.runtime.embedding.lookup import COMBINERS, TableLookup

__all__ = ["COMBINERS", "Embedding", "initializer_spec"]


def initializer_spec(initializer: Any, serialize: Any = None) -> str:
    """The PS-side spec of a Keras initializer: its name, or the JSON of its config
    (`serialize`: the Keras module's `initializers.serialize`, Keras 3's by default)."""
    if isinstance(initializer, str):
        return initializer
    if isinstance(initializer, dict):
        return json.dumps(initializer, sort_keys=True)
    return json.dumps((serialize or keras.initializers.serialize)(initializer), sort_keys=True)


class Embedding(TableLookup, keras.layers.Layer):
    """A parameter-server-backed embedding lookup (see the module docstring)."""

    def __init__(
        self,
        output_dim: int,
        embeddings_initializer: Any = "uniform",
        mask_zero: bool = False,
        input_length: int | None = None,
        combiner: str | None = None,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("input_dim", None)  # accepted for keras.layers.Embedding compatibility
        super().__init__(**kwargs)
        self._configure(
            output_dim,
            initializer_spec(embeddings_initializer),
            mask_zero,
            input_length,
            combiner,
            seed,
        )

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        if not self.mask_zero or self.combiner is not None:
            return None
        return keras.ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape: Any) -> tuple[Any, ...]:
        return self._output_shape(input_shape)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self._own_config()}
