"""What a `dataset_fn` may learn about its input without parsing it itself.

ElasticDL v0.2 passed a third `metadata` argument to `dataset_fn(dataset, mode, metadata)`
carrying the data source's column names. We keep that shape and add the feature types found
in the records, so built-in models (`regressor.DNN`, `classifier.DNN`) can parse any table of
tf.train.Example records without user code.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

FeatureKind = Literal["float", "int64", "bytes"]

SCHEMA_FILE = "schema.json"


@dataclass(frozen=True)
class FeatureInfo:
    """One tf.train.Example feature: its list kind and its length in the sampled record."""

    kind: FeatureKind
    length: int


@dataclass(frozen=True)
class DatasetMetadata:
    """Features of the records a task reads, plus the label column when one is known.

    `columns` keeps the order features were found in (sorted by name for RecordIO of
    tf.Example, whose map has no order). `schema` is the parsed `schema.json` written by the
    SQL conversion step, when the data came from SQL; None otherwise.
    """

    columns: dict[str, FeatureInfo] = field(default_factory=dict)
    label: str | None = None
    schema: dict[str, Any] | None = None

    @property
    def column_names(self) -> list[str]:
        """ElasticDL v0.2 name for the list of columns."""
        return list(self.columns)

    def feature_columns(self, exclude: tuple[str, ...] = ("id",)) -> dict[str, FeatureInfo]:
        """Columns that are model inputs: all but the label and the excluded id-like ones."""
        return {
            name: info
            for name, info in self.columns.items()
            if name != self.label and name not in exclude
        }

    def to_json(self) -> str:
        """Columns, label and SQL schema as JSON, for the TrainedModel: a prediction job must
        parse and normalize its data exactly as training did."""
        import json

        columns = {name: [info.kind, info.length] for name, info in self.columns.items()}
        data: dict[str, Any] = {"columns": columns, "label": self.label}
        if self.schema is not None:
            data["schema"] = self.schema
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DatasetMetadata:
        import json

        data = json.loads(text)
        columns = {name: FeatureInfo(kind, int(n)) for name, (kind, n) in data["columns"].items()}
        return cls(columns=columns, label=data.get("label"), schema=data.get("schema"))

    @classmethod
    def for_file(cls, url: str, first_record: bytes) -> DatasetMetadata:
        """Metadata of a RecordIO file: its first record, plus the `schema.json` beside it
        (written by SQL conversion) which names the label and holds column statistics."""
        schema = schema_beside(url)
        label = (schema or {}).get("label") or "label"
        found = cls.from_example(first_record, label=label)
        return cls(columns=found.columns, label=found.label, schema=schema)

    def missing_from(
        self, other: DatasetMetadata, needed: Collection[str] | None = None
    ) -> list[str]:
        """Columns of `self` that `other` lacks or holds with another kind or length.

        The contract for prediction data: every column the model was trained on, except the
        label and id columns (`id`, `*_id`), with the same kind and length; with `needed` (the
        columns the model's feature columns read), those alone.
        """
        found = []
        for name, info in self.feature_columns().items():
            if name.endswith("_id") or (needed is not None and name not in needed):
                continue
            theirs = other.columns.get(name)
            if theirs is None:
                found.append(f"{name!r} (absent)")
            elif theirs != info:
                found.append(
                    f"{name!r} ({theirs.kind} x {theirs.length}, trained on "
                    f"{info.kind} x {info.length})"
                )
        return found

    @classmethod
    def from_example(cls, serialized: bytes, label: str | None = "label") -> DatasetMetadata:
        """Describe the features of one serialized tf.train.Example."""
        from tensorflow.core.example import example_pb2

        example = example_pb2.Example.FromString(serialized)
        columns: dict[str, FeatureInfo] = {}
        for name in sorted(example.features.feature):
            feature = example.features.feature[name]
            which = feature.WhichOneof("kind")
            if which == "float_list":
                columns[name] = FeatureInfo("float", len(feature.float_list.value))
            elif which == "int64_list":
                columns[name] = FeatureInfo("int64", len(feature.int64_list.value))
            elif which == "bytes_list":
                columns[name] = FeatureInfo("bytes", len(feature.bytes_list.value))
        return cls(columns=columns, label=label if label in columns else None)


def schema_in(directory: str) -> dict[str, Any] | None:
    """The parsed `schema.json` of data directory `directory` (what the SQL conversion
    writes), or None; ValueError when it is not JSON."""
    import json

    import fsspec

    fs, path = fsspec.core.url_to_fs(directory)
    try:
        raw = fs.cat_file(f"{path.rstrip('/')}/{SCHEMA_FILE}")
    except FileNotFoundError:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(f"{directory}/{SCHEMA_FILE} is not valid JSON: {err}") from None


_cached_schema_in = functools.lru_cache(maxsize=64)(schema_in)
"""Data files of one directory share its schema: read once per process."""


def schema_beside(url: str) -> dict[str, Any] | None:
    """The parsed `schema.json` in the directory of data file `url`, or None."""
    directory = url.rsplit("/", 1)[0] if "/" in url else "."
    return _cached_schema_in(directory)
