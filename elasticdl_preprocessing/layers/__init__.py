"""ElasticDL's preprocessing layers (`elasticdl_preprocessing.layers`), each also importable
from its own module (`elasticdl_preprocessing.layers.hashing.Hashing`, ...)."""

from elasticdl_preprocessing.layers.concatenate_with_offset import ConcatenateWithOffset
from elasticdl_preprocessing.layers.discretization import Discretization
from elasticdl_preprocessing.layers.hashing import Hashing
from elasticdl_preprocessing.layers.index_lookup import IndexLookup
from elasticdl_preprocessing.layers.log_round import LogRound
from elasticdl_preprocessing.layers.normalizer import Normalizer
from elasticdl_preprocessing.layers.round_identity import RoundIdentity
from elasticdl_preprocessing.layers.sparse_embedding import SparseEmbedding
from elasticdl_preprocessing.layers.to_number import ToNumber
from elasticdl_preprocessing.layers.to_ragged import ToRagged
from elasticdl_preprocessing.layers.to_sparse import ToSparse

__all__ = [
    "ConcatenateWithOffset",
    "Discretization",
    "Hashing",
    "IndexLookup",
    "LogRound",
    "Normalizer",
    "RoundIdentity",
    "SparseEmbedding",
    "ToNumber",
    "ToRagged",
    "ToSparse",
]
