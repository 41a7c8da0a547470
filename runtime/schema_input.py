"""The built-in input function: records of a converted table -> ({column: tensor}, label).

SQLFlow generated an input function per statement, so its model zoo defines none; a zoo
without one gets this (and any zoo may name it: `--dataset_fn
elasticdl.runtime.schema_input.from_schema`). It parses each record (a tf.train.Example, one
feature per column, as `elasticdl data convert` and the SQL steps write them) into a dict
keyed by column name, each value `[length]` per record in the column's own type — float32 for
numbers with a fraction, int64 for integers (class ids, category ids), string for text — which
is what feature columns (`DenseFeatures`) and functional models with named inputs take. The
label is int64 when the column holds integers, else float32; PREDICTION returns the features
alone.

Which columns: the model's resolved feature columns (runtime/column_spec.py) when the job has
them — so prediction data with more columns (the label, others the model does not use) feeds
exactly what the model was trained on — else every column of the metadata but the label and
`id`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elasticdl.mode import Mode
from elasticdl.runtime.column_spec import ResolvedFeatures, parse_spec
from elasticdl.runtime.data.metadata import DatasetMetadata

PARSE_CHUNK = 512
_TYPES = {"float": "float32", "int64": "int64", "bytes": "string"}
_DEFAULTS = {"float32": 0.0, "int64": 0, "string": b""}


def _metadata(dataset: Any, metadata: DatasetMetadata | None) -> DatasetMetadata:
    if metadata is not None:
        return metadata
    for record in dataset.take(1):
        return DatasetMetadata.from_example(record.numpy())
    raise ValueError("the built-in input function: the dataset is empty and no metadata given")


def columns_of(
    metadata: DatasetMetadata, features: ResolvedFeatures | None
) -> dict[str, tuple[str, int]]:
    """Column -> (TensorFlow dtype name, values per record) of the features to parse."""
    if features is not None:
        return parse_spec(features)
    return {
        name: (_TYPES[info.kind], info.length) for name, info in metadata.feature_columns().items()
    }


def parse_table(
    dataset: Any,
    mode: Mode,
    metadata: DatasetMetadata | None,
    features: ResolvedFeatures | None = None,
) -> Any:
    """The module docstring's function, for `features` (None: every column)."""
    import tensorflow as tf

    metadata = _metadata(dataset, metadata)
    columns = columns_of(metadata, features)
    spec = {
        name: tf.io.FixedLenFeature([length], dtype, [_DEFAULTS[dtype]] * length)
        for name, (dtype, length) in columns.items()
    }
    label = None
    if mode != Mode.PREDICTION:
        label = metadata.label or ("label" if "label" in metadata.columns else None)
        if label is None or label not in metadata.columns:
            raise ValueError(
                f"no label column among {sorted(metadata.columns)}; name it with LABEL (SQL), "
                "--label (elasticdl data convert), or call the column `label`"
            )
        info = metadata.columns[label]
        if info.kind == "bytes" or info.length != 1:
            raise ValueError(
                f"label column {label!r} must hold one number per record, found "
                f"{info.kind} x {info.length}"
            )
        spec[label] = tf.io.FixedLenFeature([1], tf.int64 if info.kind == "int64" else tf.float32)

    @tf.autograph.experimental.do_not_convert
    def parse(records: Any) -> Any:
        parsed = tf.io.parse_example(records, spec)
        inputs = {name: parsed[name] for name in columns}
        return inputs if label is None else (inputs, parsed[label])

    return dataset.batch(PARSE_CHUNK).map(parse, num_parallel_calls=tf.data.AUTOTUNE).unbatch()


def from_schema(dataset: Any, mode: Mode, metadata: DatasetMetadata | None = None) -> Any:
    """The built-in input function over every column (see the module docstring)."""
    return parse_table(dataset, mode, metadata)


def for_features(features: ResolvedFeatures | None) -> Callable[[Any, Mode, Any], Any]:
    """The built-in input function bound to a job's resolved feature columns."""

    def input_fn(dataset: Any, mode: Mode, metadata: DatasetMetadata | None = None) -> Any:
        return parse_table(dataset, mode, metadata, features)

    return input_fn


BUILTIN_NAME = "elasticdl.runtime.schema_input.from_schema"
"""The documented name of the built-in input function (`--dataset_fn`)."""
