"""Rows of CSV, Parquet and TFRecord files, streamed in batches for `elasticdl data convert
--from csv|parquet|tfrecord` (the conversion itself, to RecordIO + schema.json, is the SQL
one: runtime/sql/convert.py `convert_rows`).

Each reader returns (column names, an iterator of row batches, close, where): `where(i)` says
where row `i` (0-based, over all the files) came from, "data.csv line 2502", for the
conversion's messages. Inputs are a file, a directory (its files, sorted) or a glob, local or
any fsspec URL; the files are read one after the other and must have the same columns.

* CSV: a header line names the columns. A column's type comes from its first
  `CSV_TYPE_SAMPLE_ROWS` rows: integers, else numbers, else text; an empty field is NULL.
  In a numeric column `nan`, `inf` and `-inf` (any case, as Python's float() reads them) are
  non-finite numbers, which the conversion refuses by default (its `--on_null` rules); a line
  number counts the lines of quoted fields that span several.
* Parquet: needs pyarrow (the `parquet` extra); read a row group batch at a time.
* TFRecord: tf.train.Example records whose features hold one value each (int64, float or bytes);
  the columns are the first record's features.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import fsspec

FORMATS = ("csv", "parquet", "tfrecord")
CSV_TYPE_SAMPLE_ROWS = 1000

Where = Callable[[int], str]
Rows = tuple[list[str], Iterator[list[list[Any]]], Callable[[], None], Where]


class InputError(ValueError):
    """The input cannot be read; the message names the file and the fix."""


def input_files(location: str) -> list[str]:
    """The files at `location` (file, directory or glob; any fsspec URL), as URLs, sorted."""
    fs, path = fsspec.core.url_to_fs(location)
    if fs.isdir(path):
        found = [p for p in fs.find(path) if not p.rsplit("/", 1)[-1].startswith((".", "_"))]
    elif any(c in path for c in "*?["):
        found = fs.glob(path)
    elif fs.exists(path):
        found = [path]
    else:
        raise InputError(f"--input {location!r}: no such file or directory")
    if not found:
        raise InputError(f"--input {location!r}: no files")
    local = "file" in (fs.protocol if isinstance(fs.protocol, tuple | list) else [fs.protocol])
    return sorted(found) if local else [fs.unstrip_protocol(p) for p in sorted(found)]


def read_rows(fmt: str, location: str, batch_rows: int = 4096) -> Rows:
    """The rows of the `fmt` files at `location`."""
    if fmt not in FORMATS:
        raise InputError(f"--from {fmt!r}: expected one of {', '.join(FORMATS)} (or sql)")
    files = input_files(location)
    reader = {"csv": _csv, "parquet": _parquet, "tfrecord": _tfrecord}[fmt]
    return reader(files, batch_rows)


def _same_columns(first: list[str], names: list[str], file: str) -> None:
    if names != first:
        raise InputError(f"{file}: columns {names} differ from the first file's {first}")


def _batched(rows: Iterator[list[Any]], batch_rows: int) -> Iterator[list[list[Any]]]:
    while batch := list(itertools.islice(rows, batch_rows)):
        yield batch


class _FileStarts:
    """Where row i came from: the file that holds it, and its place in that file."""

    def __init__(self, unit: str) -> None:
        self._unit = unit
        self._starts: list[int] = []
        self._files: list[str] = []

    def begin(self, file: str, first_row: int) -> None:
        """`file`'s rows start at row `first_row` of the whole input."""
        self._starts.append(first_row)
        self._files.append(file)

    def locate(self, row: int) -> tuple[int, int]:
        """(index of the file, 0-based row in it) of input row `row`."""
        index = max(0, bisect.bisect_right(self._starts, row) - 1)
        return index, row - self._starts[index] if self._starts else row

    def where(self, row: int) -> str:
        if not self._files:
            return f"{self._unit} {row + 1}"
        index, inside = self.locate(row)
        return f"{self._files[index]} {self._unit} {inside + 1}"


# -- CSV --------------------------------------------------------------------------------------


def _csv_type(values: list[str]) -> Callable[[str], Any]:
    present = [v for v in values if v != ""]
    for parse in (int, float):
        try:
            for value in present:
                parse(value)
        except ValueError:
            continue
        if present:
            return parse
    return str


def _csv_value(parse: Callable[[str], Any], text: str) -> Any:
    if text == "":
        return None
    try:
        return parse(text)
    except ValueError:
        pass
    if parse is int:
        try:
            number = float(text)
        except ValueError:
            return text
        if not math.isfinite(number):
            return number  # nan/inf in an integer column: non-finite, not another type
    return text  # the conversion names the column and row of a value of another type


class _CsvLines(_FileStarts):
    """Line numbers of CSV rows, kept compactly: a row's line is the header's last line + 1 +
    its index in the file, shifted by the extra lines of quoted multi-line rows before it
    (stored only where the shift changes)."""

    def __init__(self) -> None:
        super().__init__("row")
        self._header_end: list[int] = []
        self._shifts: list[tuple[list[int], list[int]]] = []

    def numbered(self, file: str, reader: Any, first_row: int) -> Iterator[tuple[list[str], int]]:
        """The rows of `reader` (after its header) with the line each starts on."""
        self.begin(file, first_row)
        header_end = reader.line_num
        rows, shifts = [0], [0]
        self._header_end.append(header_end)
        self._shifts.append((rows, shifts))
        end = header_end
        for index, row in enumerate(reader):
            line = end + 1
            shift = line - (header_end + 1 + index)
            if shift != shifts[-1]:
                rows.append(index)
                shifts.append(shift)
            end = reader.line_num
            yield row, line

    def where(self, row: int) -> str:
        if not self._header_end:
            return f"row {row + 1}"
        index, inside = self.locate(row)
        rows, shifts = self._shifts[index]
        shift = shifts[bisect.bisect_right(rows, inside) - 1]
        return f"{self._files[index]} line {self._header_end[index] + 1 + inside + shift}"


def _csv(files: list[str], batch_rows: int) -> Rows:
    opened: list[Any] = []
    lines = _CsvLines()
    read = [0]

    def rows_of(file: str) -> tuple[list[str], Iterator[tuple[list[str], int]]]:
        handle = fsspec.open(file, "r", newline="", encoding="utf-8").open()
        opened.append(handle)
        reader = csv.reader(handle)
        header = next(reader, None)
        if not header:
            raise InputError(f"{file}: empty; a CSV file needs a header line naming the columns")
        return [h.strip() for h in header], lines.numbered(file, reader, read[0])

    names, first_rows = rows_of(files[0])
    sample = list(itertools.islice(first_rows, CSV_TYPE_SAMPLE_ROWS))
    parsers = [_csv_type([row[i] for row, _ in sample if i < len(row)]) for i in range(len(names))]

    def typed(file: str, rows: Iterator[tuple[list[str], int]]) -> Iterator[list[Any]]:
        for row, line in rows:
            if len(row) != len(names):
                raise InputError(
                    f"{file} line {line}: {len(row)} fields, the header names {len(names)}"
                )
            read[0] += 1
            yield [_csv_value(p, v) for p, v in zip(parsers, row, strict=True)]

    def all_rows() -> Iterator[list[Any]]:
        yield from typed(files[0], iter(sample))
        yield from typed(files[0], first_rows)
        for file in files[1:]:
            more, rows = rows_of(file)
            _same_columns(names, more, file)
            yield from typed(file, rows)

    def close() -> None:
        for handle in opened:
            handle.close()

    return names, _batched(all_rows(), batch_rows), close, lines.where


# -- Parquet ----------------------------------------------------------------------------------


def _parquet(files: list[str], batch_rows: int) -> Rows:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        from elasticdl.runtime.distribution import extra_hint

        raise InputError(f"--from parquet needs pyarrow: {extra_hint('parquet')}") from None
    opened: list[Any] = []

    def open_file(file: str) -> Any:
        handle = fsspec.open(file, "rb").open()
        opened.append(handle)
        try:
            return pq.ParquetFile(handle)
        except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds
            raise InputError(f"{file}: not a Parquet file ({err})") from None

    first = open_file(files[0])
    names = list(first.schema_arrow.names)
    starts, read = _FileStarts("row"), [0]

    def batches() -> Iterator[list[list[Any]]]:
        for index, file in enumerate(files):
            parquet = first if index == 0 else open_file(file)
            _same_columns(names, list(parquet.schema_arrow.names), file)
            starts.begin(file, read[0])
            for batch in parquet.iter_batches(batch_size=batch_rows):
                read[0] += batch.num_rows
                columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
                yield [list(row) for row in zip(*columns, strict=True)]

    def close() -> None:
        for handle in opened:
            handle.close()

    return names, batches(), close, starts.where


# -- TFRecord ---------------------------------------------------------------------------------


def _example_row(record: bytes, file: str) -> dict[str, Any]:
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example()
    try:
        example.ParseFromString(record)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError
        raise InputError(f"{file}: a record is not a tf.train.Example") from None
    row = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        values = list(getattr(feature, kind).value) if kind else []
        if len(values) != 1:
            raise InputError(
                f"{file}: feature {name!r} holds {len(values)} values; only features with "
                "one value per record convert to columns"
            )
        row[name] = values[0]
    return row


def _tfrecord(files: list[str], batch_rows: int) -> Rows:
    import tensorflow as tf

    starts, read = _FileStarts("record"), [0]

    def records() -> Iterator[tuple[str, bytes]]:
        for file in files:
            starts.begin(file, read[0])
            try:
                for record in tf.data.TFRecordDataset(file).as_numpy_iterator():
                    yield file, bytes(record)
            except tf.errors.OpError as err:
                raise InputError(f"{file}: not a TFRecord file ({err.message})") from None

    stream = records()
    first = next(stream, None)
    if first is None:
        raise InputError(f"{files[0]}: no records (is it a TFRecord file?)")
    names = sorted(_example_row(first[1], first[0]))

    def rows() -> Iterator[list[Any]]:
        for file, record in itertools.chain([first], stream):
            row = _example_row(record, file)
            if sorted(row) != names:
                raise InputError(f"{file}: a record's features {sorted(row)} are not {names}")
            read[0] += 1
            yield [row[n] for n in names]

    return names, _batched(rows(), batch_rows), lambda: None, starts.where


def describe(fmt: str, location: str) -> dict[str, Any]:
    """What schema.json records of the source."""
    return {"input": location, "input_format": fmt}
