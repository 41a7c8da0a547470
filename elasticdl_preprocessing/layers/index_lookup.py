"""`IndexLookup(vocabulary, num_oov_tokens=1)`: strings to their index in a vocabulary.

    IndexLookup(vocabulary=["A", "B", "C"])([["A"], ["B"], ["C"], ["D"], ["E"]])
    -> [[0], [1], [2], [3], [3]]

`vocabulary` is a list of terms or the path of a text file with one term a line (any fsspec or
TensorFlow path; surrounding blanks stripped); a term given twice is refused. A value outside
the vocabulary gets `len(vocabulary) + hash(value) % num_oov_tokens` (with 0 OOV tokens: -1).
`vocab_size()` is `len(vocabulary) + num_oov_tokens`. Input: a string tensor (other dtypes are
turned into their text), `tf.RaggedTensor` or `tf.SparseTensor`; output: int64 of the same
structure. The table is built when the layer is made, outside any traced function.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import tensorflow as tf

from elasticdl_preprocessing.layers._base import Layer, map_values


def read_vocabulary(path: str) -> list[str]:
    with tf.io.gfile.GFile(path, "r") as source:
        return [line.strip() for line in source.read().splitlines()]


class IndexLookup(Layer):
    def __init__(
        self, vocabulary: list[str] | str | None = None, num_oov_tokens: int = 1, **kwargs: Any
    ) -> None:
        if vocabulary is None:
            raise ValueError("IndexLookup: give vocabulary=, a list of terms or a file path")
        terms = read_vocabulary(vocabulary) if isinstance(vocabulary, str) else list(vocabulary)
        repeated = sorted(t for t, n in Counter(terms).items() if n > 1)
        if repeated:
            raise ValueError(f"IndexLookup: the vocabulary repeats terms: {repeated}")
        if int(num_oov_tokens) < 0:
            raise ValueError(f"IndexLookup: num_oov_tokens must be >= 0, got {num_oov_tokens}")
        super().__init__(**kwargs)
        self.vocabulary = terms
        self.num_oov_tokens = int(num_oov_tokens)
        with tf.init_scope():
            keys = tf.constant(terms, tf.string)
            init = tf.lookup.KeyValueTensorInitializer(keys, tf.range(len(terms), dtype=tf.int64))
            if self.num_oov_tokens:
                self._table = tf.lookup.StaticVocabularyTable(init, self.num_oov_tokens)
            else:
                self._table = tf.lookup.StaticHashTable(init, default_value=-1)

    def vocab_size(self) -> int:
        return len(self.vocabulary) + self.num_oov_tokens

    def call(self, inputs: Any) -> Any:
        return map_values(inputs, self._lookup)

    def _lookup(self, values: tf.Tensor) -> tf.Tensor:
        if values.dtype != tf.string:
            values = tf.strings.as_string(values)
        return tf.cast(self._table.lookup(values), tf.int64)

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "vocabulary": list(self.vocabulary),
            "num_oov_tokens": self.num_oov_tokens,
        }
