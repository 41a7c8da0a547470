"""`deepfm.DeepFM`: DeepFM (Guo et al., 2017) for Criteo-layout click data, no --params needed.

    elasticdl data gen ctr --output data/ctr --num_records 100000 --records_per_file 20000
    elasticdl train --model_def deepfm.DeepFM --data 'data/ctr/*.recordio' --num_ps 2 ...

Each of the 26 categorical fields has its own table on the parameter servers (ids: the
field's value hashed to 63 bits, no table size), 9 wide: an 8-dim factor plus a first-order
weight. The logit adds a linear term of the 13 log-scaled counts, the first-order weights,
the factorization-machine pairwise term of the factors, and a ReLU DNN over factors and counts.
Output: the click probability. Loss: binary cross-entropy; optimizer Adam (0.001); metrics:
AUC and log loss. Params: `embedding_dim` (8), `hidden_units` ([64, 32]), `learning_rate`,
`optimizer` ("adam", "sgd", "adagrad"), and for a single-process reference
`embedding="keras", hash_buckets=N` (plain Keras tables of N rows each). See `zoo_common.ctr`.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoo_common.ctr import CTRModel


class DeepFM(CTRModel):
    """First-order weights + FM pairwise term + DNN (see the module docstring)."""

    def __init__(
        self,
        embedding_dim: int = 8,
        hidden_units: Sequence[int] = (64, 32),
        learning_rate: float = 0.001,
        optimizer: str = "adam",
        embedding: str = "elasticdl",
        hash_buckets: int | None = None,
        name: str = "deepfm",
    ) -> None:
        super().__init__(
            embedding_dim=embedding_dim,
            hidden_units=hidden_units,
            learning_rate=learning_rate,
            optimizer=optimizer,
            embedding=embedding,
            hash_buckets=hash_buckets,
            fm=True,
            name=name,
        )
