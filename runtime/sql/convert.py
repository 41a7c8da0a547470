"""Streaming the result of a SELECT into sharded RecordIO plus `schema.json`, all or nothing.

    convert("sqlite:///hr.db", "SELECT name, role, salary FROM employee", "gs://b/employee",
            label="salary")

Rows stream through a server-side cursor (SQLAlchemy `stream_results`), `batch_rows` at a time,
so memory stays flat whatever the table's size. Each row becomes one tf.train.Example: integer
and boolean columns -> int64, real and decimal columns -> float, text and binary -> bytes.
Other types (dates, JSON, ...) are refused with the column named: cast them in the SELECT.
A column's kind is taken from its first non-NULL values; a later value of another kind is an
error (SQLite types values, not columns), except integers in a real column.

NULLs follow `on_null`: `error` (the default: name the column and row), `skip` (drop the row,
counted in the schema) or `fill:VALUE`. So do non-finite numbers (NaN, inf, -inf): statistics
and training need finite ones, and `schema.json` stays strict JSON.

Files are written to a local staging directory and published at the end: renamed into place
on a local disk; elsewhere uploaded with `schema.json` last, the marker that the data is
complete. `schema.json` records the columns with their kinds and statistics, the label, the
row count, the SQL text and the database URL without its password.
"""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import numpy as np

from elasticdl.runtime.sql.column_stats import NumericStats, TextStats
from elasticdl.runtime.sql.example_encoder import ExampleEncoder, Kind

log = logging.getLogger("elasticdl.sql")

SCHEMA_FILE = "schema.json"
CARRIED_FILE = "_carried.jsonl"
SCHEMA_VERSION = 1
_TYPE_SAMPLE_BATCHES = 20


class ConversionError(ValueError):
    """The conversion cannot run or went wrong; the message names the cause and the fix."""


@dataclass(frozen=True)
class NullPolicy:
    action: str
    fill: str = ""

    @classmethod
    def parse(cls, text: str) -> NullPolicy:
        if text in ("error", "skip"):
            return cls(text)
        if text.startswith("fill:"):
            return cls("fill", text[5:])
        raise ConversionError(
            f"--on_null {text!r}: expected error, skip or fill:VALUE (e.g. fill:0)"
        )


@dataclass
class ConversionResult:
    output: str
    rows: int
    files: list[str]
    schema: dict[str, Any]


def redact_url(url: str) -> str:
    """The database URL without its password (safe to print, log and store)."""
    from sqlalchemy.engine import URL, make_url

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - an unparsable URL: keep only its scheme
        return url.split(":", 1)[0] + "://..."
    bare = URL.create(
        parsed.drivername,
        username=parsed.username,
        host=parsed.host,
        port=parsed.port,
        database=parsed.database,
        query=parsed.query,
    )
    return bare.render_as_string(hide_password=False)


def _password(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).password or ""
    except Exception:  # noqa: BLE001
        return ""


def _scrub(text: str, url: str) -> str:
    secret = _password(url)
    return text.replace(secret, "***") if secret else text


def _kind_of(value: Any, column: str) -> Kind:
    if isinstance(value, bool | int | np.integer):
        return "int64"
    if isinstance(value, float | decimal.Decimal | np.floating):
        return "float"
    if isinstance(value, str | bytes | bytearray | memoryview):
        return "bytes"
    cast = "TEXT" if isinstance(value, dt.date | dt.time | dt.datetime) else "a number or text"
    raise ConversionError(
        f"column {column!r} holds {type(value).__name__} values, which have no tf.train.Example "
        f"feature; cast it in the SELECT, e.g. CAST({column} AS {cast.split()[0]})"
    )


def _check_select(sql: str) -> None:
    words = [line.split("--", 1)[0] for line in sql.strip().splitlines()]
    first = " ".join(words).strip().split(None, 1)
    if not first or first[0].upper().rstrip("(") not in ("SELECT", "WITH", "VALUES"):
        raise ConversionError(
            f"--sql must be a SELECT (or WITH ... SELECT) query, got {sql.strip()[:60]!r}"
        )


_OUR_FILE = re.compile(r"^data-\d{5}\.recordio$")


def check_output(output: str, storage_options: dict[str, Any] | None = None) -> None:
    """Refuse an output that holds anything, except the debris of an unfinished conversion.

    An object store upload that died midway leaves `data-NNNNN.recordio` files without the
    `schema.json` that completes them; a retried conversion (an Argo retry) replaces those.
    """
    fs, path = fsspec.core.url_to_fs(output, **(storage_options or {}))
    if not fs.exists(path):
        return
    if not fs.isdir(path):
        raise ConversionError(f"--output {output!r} is a file; give a directory location")
    names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)]
    if names and all(_OUR_FILE.match(n) for n in names):
        log.warning("removing an unfinished earlier conversion at %s", output)
        for name in names:
            fs.rm(f"{path.rstrip('/')}/{name}")
        return
    if names:
        raise ConversionError(
            f"--output {output!r} already exists and is not empty; choose a new location "
            "(converted data is never overwritten)"
        )


_SUMMARY_AFTER_S = 2.0
"""A conversion this long or longer ends with its summary at INFO; a shorter one at DEBUG (the
command that ran it says how many rows; a bad statement stays one line)."""


class _Progress:
    def __init__(self, interval_s: float = 2.0) -> None:
        self._tty = sys.stderr.isatty()
        self._interval = 0.2 if self._tty else interval_s
        self._start = self._last = time.monotonic()
        self._told = False

    def update(self, rows: int, force: bool = False) -> None:
        """Told every interval; the final count (`force`) only after an earlier line, so a
        conversion shorter than the interval prints nothing before a one-line error."""
        now = time.monotonic()
        if now - self._last < self._interval and not (force and self._told):
            return
        self._last = now
        self._told = True
        rate = rows / max(now - self._start, 1e-9)
        text = f"converted {rows:,} rows ({rate:,.0f} rows/s)"
        if self._tty:
            sys.stderr.write(f"\r{text}\x1b[K" + ("\n" if force else ""))
            sys.stderr.flush()
        else:
            log.info("%s", text)


class _Shards:
    """RecordIO files of at most `per_file` records each in a local directory."""

    def __init__(self, directory: Path, per_file: int) -> None:
        from elasticdl.runtime.data.recordio import RecordIOWriter

        self._writer_type = RecordIOWriter
        self._dir = directory
        self._per_file = per_file
        self._writer: Any = None
        self.files: list[str] = []

    def write(self, record: bytes) -> None:
        if self._writer is None or self._writer.num_records >= self._per_file:
            self.close()
            name = f"data-{len(self.files):05d}.recordio"
            self.files.append(name)
            self._writer = self._writer_type(str(self._dir / name))
        self._writer.write(record)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class _NonFinite(Exception):
    """A batch holds a non-finite number (NaN, ±inf): it is cleaned again, value by value."""


@dataclass(frozen=True)
class _Nonfinite:
    """A non-finite number in a row, marked so the NULL rules (`--on_null`) handle it."""

    value: Any


def _is_nonfinite(value: Any) -> bool:
    if isinstance(value, float | np.floating):
        return not np.isfinite(value)
    return isinstance(value, decimal.Decimal) and not value.is_finite()


def _marked(row: Sequence[Any]) -> list[Any]:
    return [_Nonfinite(v) if _is_nonfinite(v) else v for v in row]


def _missing(value: Any) -> bool:
    return value is None or isinstance(value, _Nonfinite)


class _Columns:
    """Kinds, NULL and non-finite handling and statistics of the result's columns.

    A non-finite number (NaN, inf, -inf: a `nan` cell of a CSV file, a NaN in Parquet, a
    PostgreSQL 'NaN'::real) follows the NULL rules: refused by default, naming the column and
    where the row came from (`where(i)`, i 0-based), else skipped or filled. Statistics only
    ever see finite numbers. `from_sql`: the rows are a query's (fixes name the SELECT)."""

    def __init__(
        self,
        names: Sequence[str],
        kinds: Sequence[Kind],
        nulls: NullPolicy,
        where: Callable[[int], str] | None = None,
        from_sql: bool = True,
    ) -> None:
        self.names = list(names)
        self.kinds = list(kinds)
        self.nulls = nulls
        self.null_counts = [0] * len(names)
        self.nonfinite_counts = [0] * len(names)
        self.skipped_rows = 0
        self.skipped_nonfinite = 0
        self.stats: list[Any] = [TextStats() if k == "bytes" else NumericStats() for k in kinds]
        self.fill = [self._fill_value(i) for i in range(len(names))] if nulls.fill else []
        self._where = where or (lambda row: f"row {row + 1}")
        self._sql = from_sql

    def _fill_value(self, i: int) -> Any:
        text, kind, name = self.nulls.fill, self.kinds[i], self.names[i]
        if kind == "bytes":
            return text
        try:
            value = int(text) if kind == "int64" else float(text)
        except ValueError:
            raise ConversionError(
                f"--on_null fill:{text}: {text!r} is not a number, but column {name!r} is "
                f"{kind}; give a numeric fill value"
            ) from None
        if not np.isfinite(value):
            raise ConversionError(
                f"--on_null fill:{text}: column {name!r} is a number column and the fill value "
                "must be a finite number (e.g. fill:0)"
            )
        return value

    def clean(
        self, rows: list[Sequence[Any]], first_row: int, kept: list[int] | None = None
    ) -> list[Any]:
        """The batch column by column, NULLs and non-finite numbers handled, values normalized
        to their kind; the offsets of the rows kept are appended to `kept` when given."""
        offsets = list(range(len(rows)))
        if any(None in row for row in rows):
            rows, offsets = self._without_missing(rows, offsets, first_row)
        try:
            columns, feed = self._normalized(rows, offsets, first_row)
        except _NonFinite:  # rare: find them value by value
            rows, offsets = self._without_missing([_marked(r) for r in rows], offsets, first_row)
            columns, feed = self._normalized(rows, offsets, first_row)
        for stats, values in zip(self.stats, feed, strict=True):
            stats.update(values)
        if kept is not None:
            kept.extend(offsets)
        return columns

    def _without_missing(
        self, rows: list[Sequence[Any]], offsets: list[int], first_row: int
    ) -> tuple[list[Sequence[Any]], list[int]]:
        out, out_offsets = [], []
        for offset, row in zip(offsets, rows, strict=True):
            missing = [i for i, v in enumerate(row) if _missing(v)]
            if not missing:
                out.append(row)
                out_offsets.append(offset)
                continue
            nonfinite = False
            for i in missing:
                if row[i] is None:
                    self.null_counts[i] += 1
                else:
                    self.nonfinite_counts[i] += 1
                    nonfinite = True
            if self.nulls.action == "skip":
                if nonfinite:
                    self.skipped_nonfinite += 1
                else:
                    self.skipped_rows += 1
                continue
            if self.nulls.action == "error":
                raise self._refused(missing[0], row[missing[0]], first_row + offset)
            out.append([self.fill[i] if _missing(v) else v for i, v in enumerate(row)])
            out_offsets.append(offset)
        return out, out_offsets

    def _refused(self, i: int, value: Any, row: int) -> ConversionError:
        column, where = self.names[i], self._where(row)
        rules = "--on_null skip (drop such rows) or --on_null fill:VALUE"
        if value is None:
            if self._sql:
                return ConversionError(
                    f"column {column!r} is NULL in {where}; filter it in the SELECT or pass "
                    "--on_null skip or --on_null fill:VALUE"
                )
            return ConversionError(f"column {column!r} is empty in {where}; pass {rules}")
        fix = "filter it in the SELECT" if self._sql else "correct or remove that row"
        return ConversionError(
            f"column {column!r} holds {value.value} in {where}, not a finite number (statistics "
            f"and training need finite numbers); {fix}, or pass {rules}"
        )

    def _normalized(
        self, rows: list[Sequence[Any]], offsets: list[int], first_row: int
    ) -> tuple[list[Any], list[Any]]:
        """(columns normalized to their kinds, what each column's statistics take); raises
        _NonFinite (nothing updated) when a value is a non-finite number."""
        if not rows:
            return [[] for _ in self.names], [[] for _ in self.names]
        columns: list[Any] = list(zip(*rows, strict=True))
        feed: list[Any] = []
        for i, kind in enumerate(self.kinds):
            columns[i], values = self._normalize(i, kind, columns[i], first_row, offsets)
            feed.append(values)
        return columns, feed

    def _normalize(
        self, i: int, kind: Kind, column: Sequence[Any], first_row: int, offsets: list[int]
    ) -> tuple[Any, Any]:
        if kind == "float":
            if any(isinstance(v, str | bytes | bool) for v in column):
                at = next(k for k, v in enumerate(column) if isinstance(v, str | bytes | bool))
                raise self._mismatch(i, column[at], first_row + offsets[at])
            try:
                array = np.asarray(column, dtype=np.float64)
            except (TypeError, ValueError):
                at = next(
                    k
                    for k, v in enumerate(column)
                    if not isinstance(v, int | float | decimal.Decimal)
                )
                raise self._mismatch(i, column[at], first_row + offsets[at]) from None
            if not np.isfinite(array).all():
                raise _NonFinite
            return array, array
        if kind == "int64":
            if not all(type(v) is int for v in column):
                for at, value in enumerate(column):
                    if _is_nonfinite(value):
                        raise _NonFinite
                    if not isinstance(value, int | np.integer):
                        raise self._mismatch(i, value, first_row + offsets[at])
            return column, np.asarray(column, dtype=np.float64)
        if not all(type(v) is str for v in column):
            for at, value in enumerate(column):
                if _is_nonfinite(value):
                    raise _NonFinite
                if not isinstance(value, str | bytes | bytearray | memoryview):
                    raise self._mismatch(i, value, first_row + offsets[at])
            column = [v if isinstance(v, str | bytes) else bytes(v) for v in column]
        return column, list(column)

    def _mismatch(self, i: int, value: Any, row: int) -> ConversionError:
        fix = (
            "cast it in the SELECT so every row has one type"
            if self._sql
            else "correct that value, or make the column text in every row"
        )
        return ConversionError(
            f"column {self.names[i]!r} was {self.kinds[i]} in earlier rows but holds "
            f"{type(value).__name__} {str(value)[:40]!r} in {self._where(row)}; {fix}"
        )


def _sample_kinds(
    names: Sequence[str], batches: Iterator[list[Sequence[Any]]]
) -> tuple[list[Kind | None], list[list[Sequence[Any]]]]:
    """Kinds from the first non-NULL value of each column, and the batches read to find them."""
    kinds: list[Kind | None] = [None] * len(names)
    buffered: list[list[Sequence[Any]]] = []
    for batch in batches:
        buffered.append(batch)
        for row in batch:
            for i, value in enumerate(row):
                if kinds[i] is None and value is not None:
                    kinds[i] = _kind_of(value, names[i])
            if all(k is not None for k in kinds):
                return kinds, buffered
        if len(buffered) >= _TYPE_SAMPLE_BATCHES:
            break
    return kinds, buffered


def check_database(db: str) -> None:
    """Refuse a SQLite URL whose file does not exist: connecting would create an empty one."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(db)
    except ArgumentError:
        return  # _connect says what is wrong with it
    if url.get_backend_name() != "sqlite" or url.query.get("uri") in ("true", "1"):
        return
    path = url.database or ""
    if path and path != ":memory:" and not Path(path).exists():
        raise ConversionError(
            f"--db {redact_url(db)}: no such SQLite database file {path!r} (a relative path "
            "is taken from the current directory; sqlite:////abs/path.db for an absolute one)"
        )


def _connect(db: str) -> Any:
    from sqlalchemy import create_engine
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        check_database(db)
        return create_engine(db)
    except ArgumentError as err:
        raise ConversionError(
            f"--db {redact_url(db)!r} is not a database URL (e.g. sqlite:///file.db, "
            f"postgresql+psycopg://user@host/db): {_scrub(str(err), db)}"
        ) from None
    except (NoSuchModuleError, ImportError) as err:
        raise ConversionError(
            f"--db {redact_url(db)!r}: no driver for it is installed ({_scrub(str(err), db)})"
        ) from None


def _stream(db: str, sql: str, batch_rows: int) -> tuple[list[str], Iterator[list[Any]], Any]:
    """The SELECT's column names, its rows in batches, and how to close; ConversionError (one
    line, password scrubbed) when the database refuses, also while the rows stream."""
    names, batches, close = _open_stream(db, sql, batch_rows)

    def checked() -> Iterator[list[Any]]:
        from sqlalchemy.exc import SQLAlchemyError

        try:
            yield from batches
        except (SQLAlchemyError, _PsycopgError) as err:
            orig = getattr(err, "orig", None) or err
            reason = _scrub(str(orig).strip().splitlines()[0], db)
            raise ConversionError(
                f"the query failed on {redact_url(db)} while its rows were read: {reason}"
            ) from None

    return names, checked(), close


def _open_stream(db: str, sql: str, batch_rows: int) -> tuple[list[str], Iterator[list[Any]], Any]:
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    engine = _connect(db)
    try:
        conn = engine.connect()
    except DBAPIError as err:
        engine.dispose()
        reason = _scrub(str(err.orig).strip().splitlines()[0] if err.orig else str(err), db)
        raise ConversionError(f"cannot connect to {redact_url(db)}: {reason}") from None
    try:
        _read_only(conn)
        if engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
            return _stream_psycopg(conn, engine, sql, batch_rows)
        result = conn.execution_options(stream_results=True, max_row_buffer=batch_rows)
        result = result.exec_driver_sql(sql)
        names = list(result.keys())
    except (SQLAlchemyError, _PsycopgError) as err:
        conn.close()
        engine.dispose()
        orig = getattr(err, "orig", None) or (err if isinstance(err, _PsycopgError) else None)
        reason = str(orig).strip() if orig is not None else str(err).splitlines()[0]
        raise ConversionError(
            f"the query failed on {redact_url(db)}: {_scrub(reason, db)}"
        ) from None

    def close() -> None:
        result.close()
        conn.close()
        engine.dispose()

    return names, _batches(result.fetchmany, batch_rows), close


try:
    from psycopg import Error as _PsycopgError
except ImportError:  # pragma: no cover - psycopg is a dependency; other drivers work without

    class _PsycopgError(Exception):  # type: ignore[no-redef]
        pass


def _stream_psycopg(
    conn: Any, engine: Any, sql: str, batch_rows: int
) -> tuple[list[str], Iterator[list[Any]], Any]:
    """PostgreSQL through psycopg's own server-side cursor, in binary format: the rows come
    as the same Python values as through SQLAlchemy (ints, floats, Decimals, str), at about a
    third of the cost per row (no text parsing, no SQLAlchemy `Result` rows), in the read-only
    transaction `conn` has begun."""
    raw = conn.connection.dbapi_connection
    cursor = raw.cursor(name=f"elasticdl_convert_{uuid.uuid4().hex[:12]}", binary=True)
    cursor.itersize = batch_rows
    cursor.execute(sql)
    names = [column.name for column in cursor.description or []]

    def close() -> None:
        try:
            cursor.close()
        except _PsycopgError:
            pass  # the transaction failed; closing the connection rolls it back
        conn.close()
        engine.dispose()

    return names, _batches(cursor.fetchmany, batch_rows), close


def _batches(fetchmany: Any, batch_rows: int) -> Iterator[list[Any]]:
    """`fetchmany(batch_rows)` until it comes back empty."""
    while True:
        rows = fetchmany(batch_rows)
        if not rows:
            return
        yield rows


def _read_only(conn: Any) -> None:
    """Run the user's SELECT in a read-only transaction where the database supports one."""
    dialect = conn.dialect.name
    if dialect == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION READ ONLY")
    elif dialect in ("mysql", "mariadb"):
        conn.exec_driver_sql("SET SESSION TRANSACTION READ ONLY")
    elif dialect == "sqlite":
        conn.exec_driver_sql("PRAGMA query_only = ON")


def convert(
    db: str,
    sql: str,
    output: str,
    *,
    records_per_file: int = 100_000,
    label: str | None = None,
    on_null: str = "error",
    label_last: bool = False,
    batch_rows: int = 4096,
    storage_options: dict[str, Any] | None = None,
    carry: Sequence[str] = (),
    drop: Sequence[str] = (),
    internal: bool = False,
) -> ConversionResult:
    """Convert the rows of `sql` on database `db` into RecordIO + schema.json at `output`.

    `label_last`: without `label`, the last selected column is the label. `carry`: selected
    columns kept beside the records rather than in them (no model input, no NULL policy):
    one JSON list per written record, in record order, in `_carried.jsonl` (`carried_line`).
    `drop`: selected columns left out altogether, when selected (a PREDICT's trained label).
    `internal`: `output` is a temporary folder of the caller's, not named in the log.
    """
    if records_per_file < 1:
        raise ConversionError(f"--records_per_file must be >= 1, got {records_per_file}")
    NullPolicy.parse(on_null)
    _check_select(sql)
    check_output(output, storage_options)
    names, batches, close = _stream(db, sql, batch_rows)
    return convert_rows(
        names,
        batches,
        close,
        output,
        {"sql": sql.strip(), "db_url": redact_url(db)},
        records_per_file=records_per_file,
        label=label,
        on_null=on_null,
        label_last=label_last,
        storage_options=storage_options,
        carry=carry,
        drop=drop,
        internal=internal,
    )


def convert_rows(
    names: list[str],
    batches: Iterator[list[Any]],
    close: Any,
    output: str,
    source: dict[str, Any],
    *,
    records_per_file: int = 100_000,
    label: str | None = None,
    on_null: str = "error",
    label_last: bool = False,
    storage_options: dict[str, Any] | None = None,
    carry: Sequence[str] = (),
    drop: Sequence[str] = (),
    internal: bool = False,
    where: Callable[[int], str] | None = None,
) -> ConversionResult:
    """Write rows (`names`, then `batches` of rows) as RecordIO + schema.json at `output`;
    `close()` ends the source (the keywords: see `convert`). `source` says where the rows came
    from, in schema.json (the SQL and the database, or the input files and their format).
    `output` is checked by the caller (`check_output`) before the source is opened.
    `where(i)`: where row i (0-based) came from, for messages ("data.csv line 7"; default
    "row i+1")."""
    nulls = NullPolicy.parse(on_null)
    origin, what = ("query", source["sql"]) if "sql" in source else ("input", source.get("input"))
    staging = Path(tempfile.mkdtemp(prefix="elasticdl-convert-"))
    started = time.monotonic()
    try:
        if len(set(names)) != len(names):
            duplicates = sorted({n for n in names if names.count(n) > 1})
            raise ConversionError(
                f"the SELECT returns duplicate column names {duplicates}; give them aliases"
            )
        if any(name in drop for name in names):
            kept = [i for i, n in enumerate(names) if n not in drop]
            batches = ([[row[i] for i in kept] for row in batch] for batch in batches)
            names = [names[i] for i in kept]
        missing = [c for c in carry if c not in names]
        if missing:
            raise ConversionError(f"carried columns {missing} are not selected: {names}")
        carried: collections.deque[list[Any]] = collections.deque()
        if carry:
            keep = [i for i, n in enumerate(names) if n not in carry]
            batches = _split_carried(batches, keep, [names.index(c) for c in carry], carried)
            names = [names[i] for i in keep]
        carried_out = open(staging / CARRIED_FILE, "w") if carry else None  # noqa: SIM115
        if label is None and label_last and names:
            label = names[-1]
            log.info("no label column given: the last selected column %r is the label", label)
        if label is not None and label not in names:
            raise ConversionError(f"--label {label!r} is not a selected column; columns: {names}")
        sampled, buffered = _sample_kinds(names, batches)
        kinds: list[Kind] = []
        for name, kind in zip(names, sampled, strict=True):
            if kind is None:
                if not buffered:
                    break
                if nulls.action != "fill":
                    fix = "cast it in the SELECT or pass" if origin == "query" else "pass"
                    raise ConversionError(
                        f"column {name!r} is NULL in every sampled row, so its type is unknown; "
                        f"{fix} --on_null fill:VALUE"
                    )
                kind = _kind_of(_number_or_text(nulls.fill), name)
            kinds.append(kind)
        if not buffered:
            raise ConversionError(f"the {origin} returned no rows: {str(what)[:200]}")
        if label is not None and kinds[names.index(label)] == "bytes":
            raise ConversionError(
                f"label column {label!r} holds text; the models need a number (map it to "
                "one in the SELECT, e.g. CASE ... END)"
            )
        columns = _Columns(names, kinds, nulls, where, from_sql=origin == "query")
        encoder = ExampleEncoder(list(zip(names, kinds, strict=True)))
        shards = _Shards(staging, records_per_file)
        progress = _Progress()
        seen = written = 0

        def all_batches() -> Iterator[list[Any]]:
            yield from buffered
            yield from batches

        for batch in all_batches():
            kept: list[int] | None = [] if carried_out else None
            for record in encoder.encode_columns(columns.clean(batch, seen, kept)):
                shards.write(record)
                written += 1
            if carried_out:
                side = carried.popleft()
                carried_out.writelines(carried_line(side[i]) + "\n" for i in kept or ())
            seen += len(batch)
            progress.update(written)
        shards.close()
        if carried_out:
            carried_out.close()
        progress.update(written, force=True)
        if not written:
            raise ConversionError(
                f"all {seen} row(s) had a NULL or a non-finite number and --on_null skip "
                "dropped them; nothing to write"
            )
        schema = {
            "version": SCHEMA_VERSION,
            "columns": [
                {
                    "name": name,
                    "dtype": kind,
                    "nulls": columns.null_counts[i],
                    "nonfinite": columns.nonfinite_counts[i],
                    "stats": columns.stats[i].to_dict(),
                }
                for i, (name, kind) in enumerate(zip(names, kinds, strict=True))
            ],
            "label": label,
            **({"carried": list(carry)} if carry else {}),
            "rows": written,
            "rows_skipped_for_null": columns.skipped_rows,
            "rows_skipped_for_nonfinite": columns.skipped_nonfinite,
            "files": shards.files,
            "records_per_file": records_per_file,
            **source,
            "created_time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        # Strict JSON: a NaN or Infinity written here would make the file unreadable to others.
        (staging / SCHEMA_FILE).write_text(json.dumps(schema, indent=1, allow_nan=False))
        _publish(staging, output, storage_options)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        close()
    seconds = time.monotonic() - started
    log.log(
        logging.INFO if seconds >= _SUMMARY_AFTER_S else logging.DEBUG,
        "converted %d row(s) into %d file(s)%s in %.1f s (%.0f rows/s)",
        written,
        len(shards.files),
        "" if internal else f" at {output}",
        seconds,
        written / max(seconds, 1e-9),
    )
    return ConversionResult(output, written, shards.files, schema)


def carried_line(values: Sequence[Any]) -> str:
    """One record's carried values as a line of `_carried.jsonl` (also how write-back matches)."""
    return json.dumps(list(values), default=str)


def _split_carried(
    batches: Iterator[list[Any]], keep: list[int], carry: list[int], queue: collections.deque
) -> Iterator[list[Any]]:
    """The batches without the carried columns; each batch's carried values go into `queue`."""
    for batch in batches:
        queue.append([[row[i] for i in carry] for row in batch])
        yield [[row[i] for i in keep] for row in batch]


def _number_or_text(text: str) -> Any:
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def _publish(staging: Path, output: str, storage_options: dict[str, Any] | None) -> None:
    fs, path = fsspec.core.url_to_fs(output, **(storage_options or {}))
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    if protocol in ("file", "local"):
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.rmdir()  # empty: check_output said so
        try:
            os.rename(staging, target)
        except OSError:  # another file system: copy beside, then rename
            sibling = target.parent / f".{target.name}.staging"
            shutil.copytree(staging, sibling)
            os.rename(sibling, target)
            shutil.rmtree(staging, ignore_errors=True)
        return
    from elasticdl.runtime.outputs import upload_staged

    try:
        upload_staged(staging, fs, path, commit_marker=SCHEMA_FILE)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
