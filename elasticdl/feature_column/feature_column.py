"""`elasticdl.feature_column.feature_column.embedding_column`, as ElasticDL v0.2 model files
import it.

In ElasticDL v0.2 this column kept its table on the parameter servers, each worker pulling the
rows of the ids in its minibatch. Here it is TensorFlow's own embedding column, a dense
variable: the whole `[num_buckets, dimension]` table is a model variable that the parameter
servers hold and update like any other. That pays for the vocabularies such columns usually
have (hash buckets in the thousands); a table of millions of rows belongs in
`elasticdl.layers.Embedding`, whose rows live in the PS tables and move per id. Feature columns
are a Keras 2 API: a model file using them runs in Keras 2 mode (runtime/keras_mode.py), which
is chosen for it automatically.
"""

from __future__ import annotations

from typing import Any


def embedding_column(
    categorical_column: Any,
    dimension: int,
    combiner: str = "mean",
    initializer: Any = None,
    max_norm: float | None = None,
    trainable: bool = True,
) -> Any:
    """A dense column of `dimension`-wide embeddings of `categorical_column`'s ids (for
    `DenseFeatures`), combined per example by `combiner` (mean, sum or sqrtn)."""
    import tensorflow as tf

    if not isinstance(dimension, int) or dimension < 1:
        raise ValueError(f"embedding_column: dimension must be a positive int, got {dimension!r}")
    return tf.feature_column.embedding_column(
        categorical_column,
        dimension,
        combiner=combiner,
        initializer=initializer,
        max_norm=max_norm,
        trainable=trainable,
    )
