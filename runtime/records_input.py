"""The first design document's input contract: `input_fn(records)` over decoded records.

A model file in that style defines `input_fn(records)`, which receives the records of one
minibatch as dicts (feature name -> NumPy array of the feature's values; a bytes feature is
its bytes, several bytes values a list) and returns `(features, labels)`: a dict of arrays and
an array. `feature_columns()` and `label_columns()` (lists of
`tf.feature_column.numeric_column`) give each array's key, dtype and per-example shape.

`RecordsInput` turns that into a `dataset_fn(dataset, mode, metadata)` like any other style's:
the records are grouped `records_per_call` at a time (the job's minibatch size, set by the
worker's pipelines, so `input_fn` sees exactly each minibatch), handed to `input_fn` through
`tf.py_function`, shaped by the columns, and split back into examples for the pipeline to
batch again. The model receives the one feature's tensor, or a dict by key when there are
several; in PREDICTION mode the labels are dropped (the records may still carry them:
`input_fn` is the user's and may expect them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from elasticdl.mode import Mode

DEFAULT_RECORDS_PER_CALL = 64


def takes_records(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is an `input_fn(records)` (one positional parameter)."""
    import inspect

    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) == 1


def decode(record: bytes) -> dict[str, Any]:
    """A serialized tf.train.Example as {feature name: NumPy array, or bytes}."""
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example.FromString(record)
    decoded: dict[str, Any] = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        if kind == "bytes_list":
            values = list(feature.bytes_list.value)
            decoded[name] = values[0] if len(values) == 1 else values
        elif kind == "float_list":
            decoded[name] = np.asarray(feature.float_list.value, dtype=np.float32)
        elif kind == "int64_list":
            decoded[name] = np.asarray(feature.int64_list.value, dtype=np.int64)
        else:
            decoded[name] = np.zeros(0, np.float32)
    return decoded


class RecordsInput:
    """`dataset_fn(dataset, mode, metadata)` from `input_fn(records)` and its columns."""

    def __init__(
        self,
        input_fn: Callable[[list[dict[str, Any]]], Any],
        feature_columns: Callable[[], list[Any]],
        label_columns: Callable[[], list[Any]] | None,
    ) -> None:
        self.input_fn = input_fn
        self.features = list(feature_columns())
        self.labels = list(label_columns()) if label_columns else []
        if not self.features:
            raise ValueError("feature_columns() returned no columns: give one per model input")
        self.records_per_call = DEFAULT_RECORDS_PER_CALL

    def _arrays(self, records: Any, with_labels: bool) -> list[np.ndarray]:
        batch = [decode(bytes(r)) for r in records.numpy()]
        features, labels = self.input_fn(batch)
        if not isinstance(features, dict):
            features = {self.features[0].key: features}
        out = []
        for column in self.features:
            if column.key not in features:
                raise ValueError(
                    f"input_fn returned no feature {column.key!r} (feature_columns() names it); "
                    f"it returned {sorted(features)}"
                )
            out.append(_shaped(features[column.key], column, len(batch)))
        if with_labels:
            if len(self.labels) == 1 and not isinstance(labels, dict):
                labels = {self.labels[0].key: labels}
            out += [_shaped(labels[c.key], c, len(batch)) for c in self.labels]
        return out

    def __call__(self, dataset: Any, mode: Mode, metadata: Any = None) -> Any:
        import tensorflow as tf

        with_labels = mode != Mode.PREDICTION and bool(self.labels)
        columns = self.features + (self.labels if with_labels else [])

        def convert(records: Any) -> Any:
            tensors = tf.py_function(
                lambda r: self._arrays(r, with_labels), [records], [c.dtype for c in columns]
            )
            for tensor, column in zip(tensors, columns, strict=True):
                tensor.set_shape([None, *column.shape])
            features = tensors[: len(self.features)]
            inputs = (
                features[0]
                if len(features) == 1
                else {c.key: t for c, t in zip(self.features, features, strict=True)}
            )
            if not with_labels:
                return inputs
            labels = tensors[len(self.features) :]
            return inputs, labels[0] if len(labels) == 1 else tuple(labels)

        return dataset.batch(self.records_per_call).map(convert).unbatch()


def _shaped(value: Any, column: Any, size: int) -> np.ndarray:
    array = np.asarray(value, dtype=column.dtype.as_numpy_dtype)
    try:
        return array.reshape((size, *column.shape))
    except ValueError:
        raise ValueError(
            f"input_fn returned {column.key!r} of shape {array.shape}; its column says "
            f"{size} examples of shape {tuple(column.shape)}"
        ) from None
