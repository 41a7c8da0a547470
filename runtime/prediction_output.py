"""Prediction output parts: rows of (kept input columns, prediction columns), one part per task.

Every prediction task writes exactly one part, named by the record range it covers
(`part-<file index>-<start>-<end>.<ext>`), so a retried task overwrites its own part and the
parts, sorted by name, hold the input rows in input order, each once.

Rows carry the input's id columns (`id` and `*_id` columns, or the `--keep_columns` given)
and the model's outputs: a model returning one tensor gives column `prediction` (one value
per row, or a vector); a model returning a dict gives one column per key.

Formats: `recordio` (the default) holds one tf.train.Example per row, kept columns copied
as they were; `csv` has a header row, vectors spread over `<column>_<i>` columns.
"""

from __future__ import annotations

import csv
import io
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

FORMATS = ("recordio", "csv")
PART_PREFIX = "part-"


def part_name(file_index: int, start: int, end: int, output_format: str) -> str:
    """The name of the part holding the predictions of records [start, end) of file #index."""
    return f"{PART_PREFIX}{file_index:05d}-{start:010d}-{end:010d}.{output_format}"


def default_kept_columns(columns: Sequence[str]) -> list[str]:
    """Input columns copied into the output when --keep_columns is not given: the ids."""
    return [c for c in columns if c == "id" or c.endswith("_id")]


def prediction_columns(outputs: Any, rows: int) -> dict[str, np.ndarray]:
    """The model's outputs as named 2-D arrays of `rows` rows (one column or a vector each)."""
    if isinstance(outputs, Mapping):
        named = {str(k): v for k, v in outputs.items()}
    elif isinstance(outputs, list | tuple):
        named = {f"prediction_{i}": v for i, v in enumerate(outputs)}
    else:
        named = {"prediction": outputs}
    columns = {}
    for name, value in named.items():
        array = np.asarray(value)
        if array.ndim == 0 or array.shape[0] != rows:
            raise ValueError(
                f"the model returned {array.shape[0] if array.ndim else 'a scalar'} "
                f"prediction(s) for {rows} record(s) in output {name!r}; in PREDICTION mode "
                "dataset_fn must keep every record (no filter) and return features only"
            )
        columns[name] = array.reshape(rows, -1)
    return columns


def kept_values(records: Sequence[bytes], kept: Sequence[str]) -> list[dict[str, Any]]:
    """The kept columns of each record, as tf.train.Feature messages (missing ones absent)."""
    from tensorflow.core.example import example_pb2

    found = []
    for record in records:
        features = example_pb2.Example.FromString(record).features.feature
        found.append({name: features[name] for name in kept if name in features})
    return found


def recordio_part(
    records: Sequence[bytes], kept: Sequence[str], predictions: Mapping[str, np.ndarray]
) -> bytes:
    """The part as RecordIO bytes: one tf.train.Example per input record.

    Rows are encoded straight to wire bytes (`runtime/sql/example_encoder.py`), without
    building a protobuf message per row.
    """
    from elasticdl.runtime.data.recordio import RecordIOWriter
    from elasticdl.runtime.sql.example_encoder import ExampleEncoder

    inputs = kept_values(records, kept) if kept else [{}] * len(records)
    kinds = {name: "bytes" for name in kept}
    for row in inputs[:1]:
        for name, feature in row.items():
            kinds[name] = {"float_list": "float", "int64_list": "int64"}.get(
                feature.WhichOneof("kind"), "bytes"
            )
    columns = [(name, kinds[name]) for name in kept]
    for name, values in predictions.items():
        kind = "int64" if values.dtype.kind in "iub" else "float"
        columns.append((name, "bytes" if values.dtype.kind in "SOU" else kind))
    encoder = ExampleEncoder(columns)
    buffer = io.BytesIO()
    with RecordIOWriter(buffer) as writer:
        for row, features in enumerate(inputs):
            values = [
                _feature_values_raw(features[name]) if name in features else None for name in kept
            ]
            values += [values_[row] for values_ in predictions.values()]
            writer.write(encoder.encode(values))
    return buffer.getvalue()


def _feature_values_raw(feature: Any) -> list[Any]:
    which = feature.WhichOneof("kind")
    return list(getattr(feature, which).value) if which else []


def _feature_values(feature: Any) -> list[Any]:
    """A feature's values as Python values (bytes decoded as UTF-8)."""
    which = feature.WhichOneof("kind")
    if which == "bytes_list":
        return [v.decode("utf-8", "replace") for v in feature.bytes_list.value]
    if which == "int64_list":
        return list(feature.int64_list.value)
    if which == "float_list":
        return [float(v) for v in feature.float_list.value]
    return []


def _cell(values: list[Any]) -> str:
    """One CSV cell: a single value as itself, a list space-separated."""
    return " ".join(_format(v) for v in values)


def csv_header(kept: Sequence[str], predictions: Mapping[str, np.ndarray]) -> list[str]:
    header = list(kept)
    for name, values in predictions.items():
        width = values.shape[1]
        header += [name] if width == 1 else [f"{name}_{i}" for i in range(width)]
    return header


def csv_part(
    records: Sequence[bytes], kept: Sequence[str], predictions: Mapping[str, np.ndarray]
) -> bytes:
    """The part as CSV with a header row; vector columns spread over `<name>_<i>`."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(csv_header(kept, predictions))
    for row, inputs in enumerate(kept_values(records, kept)):
        cells = [_cell(_feature_values(inputs[name])) if name in inputs else "" for name in kept]
        for values in predictions.values():
            cells += [_format(v) for v in values[row]]
        writer.writerow(cells)
    return text.getvalue().encode()


def _format(value: Any) -> str:
    """Text of one value; floats in the shortest form that reads back to the same value."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.floating):
        return str(value)
    if isinstance(value, float):
        return str(np.float32(value))  # tf.train.Example floats are float32
    return str(value)


def encode_part(
    output_format: str,
    records: Sequence[bytes],
    kept: Sequence[str],
    predictions: Mapping[str, np.ndarray],
) -> bytes:
    if output_format == "csv":
        return csv_part(records, kept, predictions)
    if output_format == "recordio":
        return recordio_part(records, kept, predictions)
    raise ValueError(f"--output_format must be one of {', '.join(FORMATS)}, got {output_format!r}")


def write_part(directory: str, name: str, data: bytes) -> str:
    """Write one part under `directory` (fsspec URL) so readers never see half of it.

    A local part is written beside its final name and renamed over it (a retried task's part
    replaces the earlier one in one step); object stores make each upload atomic themselves.
    """
    import fsspec

    fs, root = fsspec.core.url_to_fs(directory)
    path = f"{root.rstrip('/')}/{name}"
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    if protocol in ("file", "local"):
        os.makedirs(root, exist_ok=True)
        temporary = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
        with open(temporary, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    else:
        fs.pipe_file(path, data)
    return path


def read_rows(path: str, output_format: str) -> list[dict[str, Any]]:
    """Rows of one part as dicts: CSV cells as strings, RecordIO features as value lists."""
    if output_format == "csv":
        import fsspec

        with fsspec.open(path, "rb") as f:
            return list(csv.DictReader(io.StringIO(f.read().decode())))
    from tensorflow.core.example import example_pb2

    from elasticdl.runtime.data.recordio import RecordIOReader

    rows = []
    with RecordIOReader(path) as reader:
        for record in reader.read(0, reader.num_records):
            feature = example_pb2.Example.FromString(record).features.feature
            rows.append({name: _feature_values(feature[name]) for name in sorted(feature)})
    return rows
