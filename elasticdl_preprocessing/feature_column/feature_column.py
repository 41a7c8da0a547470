"""`concatenated_categorical_column(categorical_columns)`: several categorical columns as one.

Many small categorical columns, each with its own embedding table, make many variables; one
table over their concatenated ids is cheaper. The ids of the k-th column move by the buckets of
the columns before it, so column k's `[0, num_buckets_k)` becomes
`[offset_k, offset_k + num_buckets_k)`, and the result has `sum(num_buckets)` buckets:

    user_id = categorical_column_with_identity("user_id", num_buckets=32)
    item_id = categorical_column_with_identity("item_id", num_buckets=128)
    both = concatenated_categorical_column([user_id, item_id])    # 160 buckets
    # {"user_id": [[10]], "item_id": [[1]]} -> ids [[10, 33]]

Its name joins the columns' sorted names with "_C_"; its parse spec is theirs merged. It is a
TensorFlow feature column (v2, and v1 where every column is): use it with `embedding_column`,
`indicator_column` and `DenseFeatures`, which are Keras 2 APIs -- a model file using feature
columns runs in Keras 2 mode (`elasticdl.runtime.keras_mode`, chosen for it automatically).
Weights of weighted columns are not carried over (each id counts once).
"""

from __future__ import annotations

import collections
import itertools
from typing import Any

import tensorflow as tf
from tensorflow.python.feature_column import feature_column as fc_v1
from tensorflow.python.feature_column import feature_column_v2 as fc_v2
from tensorflow.python.feature_column import serialization


def concatenated_categorical_column(
    categorical_columns: list[Any],
) -> ConcatenatedCategoricalColumn:
    """One categorical column over the ids of `categorical_columns` (a non-empty list)."""
    if not isinstance(categorical_columns, list) or not categorical_columns:
        raise ValueError(
            "concatenated_categorical_column: give a non-empty list of categorical columns"
        )
    for column in categorical_columns:
        if not isinstance(column, fc_v2.CategoricalColumn):
            raise ValueError(
                f"concatenated_categorical_column: {column!r} is not a categorical column"
            )
    return ConcatenatedCategoricalColumn(categorical_columns=tuple(categorical_columns))


@serialization.register_feature_column
class ConcatenatedCategoricalColumn(
    fc_v2.CategoricalColumn,
    fc_v1._CategoricalColumn,
    collections.namedtuple("ConcatenatedCategoricalColumn", ("categorical_columns",)),
):
    """See `concatenated_categorical_column`."""

    @property
    def offsets(self) -> list[int]:
        """The first id of each column's range."""
        sizes = [column.num_buckets for column in self.categorical_columns]
        return list(itertools.accumulate([0, *sizes[:-1]]))

    @property
    def _is_v2_column(self) -> bool:
        return all(column._is_v2_column for column in self.categorical_columns)

    @property
    def name(self) -> str:
        return "_C_".join(sorted(column.name for column in self.categorical_columns))

    @property
    def num_buckets(self) -> int:
        return sum(column.num_buckets for column in self.categorical_columns)

    @property
    def _num_buckets(self) -> int:
        return self.num_buckets

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        for column in self.categorical_columns:
            spec.update(column.parse_example_spec)
        return spec

    @property
    def _parse_example_spec(self) -> dict[str, Any]:
        return self.parse_example_spec

    @property
    def parents(self) -> list[Any]:
        return list(self.categorical_columns)

    def _concatenate(self, id_tensors: list[tf.SparseTensor]) -> tf.SparseTensor:
        shifted = [
            tf.SparseTensor(ids.indices, tf.cast(ids.values, tf.int64) + offset, ids.dense_shape)
            for ids, offset in zip(id_tensors, self.offsets, strict=True)
        ]
        return tf.sparse.concat(axis=-1, sp_inputs=shifted)

    def transform_feature(self, transformation_cache: Any, state_manager: Any) -> tf.SparseTensor:
        return self._concatenate(
            [
                column.get_sparse_tensors(transformation_cache, state_manager).id_tensor
                for column in self.categorical_columns
            ]
        )

    def _transform_feature(self, inputs: Any) -> tf.SparseTensor:
        return self._concatenate(
            [column._get_sparse_tensors(inputs).id_tensor for column in self.categorical_columns]
        )

    def get_sparse_tensors(self, transformation_cache: Any, state_manager: Any) -> Any:
        return fc_v2.CategoricalColumn.IdWeightPair(
            transformation_cache.get(self, state_manager), None
        )

    def _get_sparse_tensors(
        self, inputs: Any, weight_collections: Any = None, trainable: Any = None
    ) -> Any:
        return fc_v2.CategoricalColumn.IdWeightPair(inputs.get(self), None)

    def get_config(self) -> dict[str, Any]:
        return {
            "categorical_columns": tuple(
                serialization.serialize_feature_column(column)
                for column in self.categorical_columns
            )
        }

    @classmethod
    def from_config(
        cls, config: dict[str, Any], custom_objects: Any = None, columns_by_name: Any = None
    ) -> ConcatenatedCategoricalColumn:
        columns = tuple(
            serialization.deserialize_feature_column(c, custom_objects, columns_by_name)
            for c in config["categorical_columns"]
        )
        return cls(categorical_columns=columns)
