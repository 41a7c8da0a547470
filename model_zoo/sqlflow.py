"""`sqlflow.elasticdl_input_function`: the standard input function for converted SQL tables.

    elasticdl train --model_def my_models.Wide --dataset_fn sqlflow.elasticdl_input_function ...

Parses the records of a table converted by `elasticdl data convert` (or a SQL statement)
using the columns and label of its `schema.json` (passed in as `metadata.schema`) and returns
`(features, label)`: `features` maps each column but the label to a `[1]` tensor (float32 for
numbers, string for text), so a model can take named inputs. The label is float32, or int64
when the column holds integers (class ids). In PREDICTION mode only the features are returned.
Without a schema, the columns found in the records are used, with `label` as the label.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from zoo_common.chunks import parse_in_chunks

from elasticdl import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata

_PARSED = {"float": tf.float32, "int64": tf.int64, "bytes": tf.string}


def _columns(metadata: DatasetMetadata) -> tuple[dict[str, str], str | None]:
    schema = metadata.schema or {}
    if schema.get("columns"):
        kinds = {c["name"]: c["dtype"] for c in schema["columns"]}
        return kinds, schema.get("label")
    return {name: info.kind for name, info in metadata.columns.items()}, metadata.label


def elasticdl_input_function(
    dataset: tf.data.Dataset, mode: Mode, metadata: DatasetMetadata | None = None
) -> tf.data.Dataset:
    """(features dict, label) per record of a converted SQL table (see the module docstring)."""
    if metadata is None:
        for record in dataset.take(1):
            metadata = DatasetMetadata.from_example(record.numpy())
        if metadata is None:
            raise ValueError("sqlflow.elasticdl_input_function: the dataset is empty")
    kinds, label = _columns(metadata)
    if mode != Mode.PREDICTION and (label is None or label not in kinds):
        raise ValueError(
            f"sqlflow.elasticdl_input_function: no label column among {sorted(kinds)}; "
            "convert the table with --label COLUMN (or name the column `label`)"
        )
    features = [name for name in kinds if name != label]
    spec: dict[str, Any] = {
        name: tf.io.FixedLenFeature([1], _PARSED[kinds[name]]) for name in features
    }
    if mode != Mode.PREDICTION:
        spec[label] = tf.io.FixedLenFeature([1], _PARSED[kinds[label]])

    @tf.autograph.experimental.do_not_convert  # plain tensor code: no AutoGraph needed
    def parse(records: tf.Tensor) -> Any:
        parsed = tf.io.parse_example(records, spec)  # [n, 1] each
        inputs = {
            name: tf.cast(parsed[name], tf.float32) if kinds[name] != "bytes" else parsed[name]
            for name in features
        }
        if mode == Mode.PREDICTION:
            return inputs
        target = parsed[label]
        return inputs, target if kinds[label] == "int64" else tf.cast(target, tf.float32)

    return parse_in_chunks(dataset, parse)  # zoo_common/chunks.py: one parse per chunk
