"""`wide_and_deep.WideAndDeep`: Wide & Deep (Cheng et al., 2016) for Criteo-layout click data.

    elasticdl train --model_def wide_and_deep.WideAndDeep --data 'data/ctr/*.recordio' ...

Deep: per-field tables on the parameter servers (as `deepfm.DeepFM`, without the FM term) and
a ReLU DNN. Wide: the fields' first-order weights, a linear term of the log-scaled counts, and
13 crossed features (C1 x C2, C3 x C4, ...) hashed into one more PS table of 1-wide rows,
summed by the layer's combiner. Same params as DeepFM; see `zoo_common.ctr`.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf
from zoo_common.ctr import FULL_HASH, CTRModel

from elasticdl.layers import Embedding


class WideAndDeep(CTRModel):
    """Wide (first order + crosses) and deep (DNN) parts (see the module docstring)."""

    def __init__(
        self,
        embedding_dim: int = 8,
        hidden_units: Sequence[int] = (64, 32),
        learning_rate: float = 0.001,
        optimizer: str = "adam",
        embedding: str = "elasticdl",
        hash_buckets: int | None = None,
        name: str = "wide_and_deep",
    ) -> None:
        super().__init__(
            embedding_dim=embedding_dim,
            hidden_units=hidden_units,
            learning_rate=learning_rate,
            optimizer=optimizer,
            embedding=embedding,
            hash_buckets=hash_buckets,
            fm=False,
            name=name,
        )
        if embedding == "keras":
            self.crosses = keras.layers.Embedding(self.hash_buckets, 1, name="crosses")
        else:
            self.crosses = Embedding(1, combiner="sum", name="crosses")

    def logit(self, inputs: dict[str, tf.Tensor]) -> tf.Tensor:
        """The deep part's logit plus the crossed features' weights."""
        ids = inputs["ids"]
        text = tf.strings.as_string(ids)
        pairs = tf.strings.join([text[:, 0::2], text[:, 1::2]], separator="x")
        cross = tf.strings.to_hash_bucket_fast(pairs, self.hash_buckets or FULL_HASH)
        if isinstance(self.crosses, Embedding):
            wide = self.crosses(cross)
        else:
            wide = tf.reduce_sum(self.crosses(cross), axis=1)
        return super().logit(inputs) + wide
