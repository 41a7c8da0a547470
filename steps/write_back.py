"""Pipeline step `write-back`: predictions of SQL rows back into a database table.

    python -m elasticdl.steps.write_back --db URL --table T --column C \\
        --predictions DIR --data DIR [--key K]

`--data` is the SQL conversion's output (its `schema.json` lists the selected columns and their
kinds); `--predictions` the prediction job's output over it, made with `--keep_columns '*'`.
Without `--key`, table T is created atomically with the selected columns plus C (a staging
table renamed in one step), or replaced if an earlier PREDICT created it; any other existing
table is refused. With `--key K`, C is added to the existing table T (if missing; a column
PREDICT did not add is refused) and filled by matching rows on column K, in one transaction:
the source rows are never dropped. A
classifier's prediction is its class id, as with `elasticdl sql ... PREDICT`.

Exit status 2 with one line on stderr for bad input (the URL's password never appears).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("elasticdl.steps.write_back")


@dataclass
class WriteBackResult:
    table: str
    column: str
    rows: int
    mode: str
    """replace (the table was created or replaced) | fill (a column of it was filled)"""
    succeeded: bool = True


def _schema_columns(data: str) -> list[tuple[str, str]]:
    from elasticdl.runtime.data.metadata import SCHEMA_FILE, schema_in

    schema = schema_in(data.rstrip("/"))
    if schema is None:
        raise ValueError(
            f"--data {data!r} has no {SCHEMA_FILE}: it must be the SQL conversion step's output"
        )
    return [(c["name"], c["dtype"]) for c in schema.get("columns", [])]


def _prediction_rows(predictions: str) -> list[dict[str, Any]]:
    import fsspec

    from elasticdl.runtime.prediction_output import read_rows

    fs, root = fsspec.core.url_to_fs(predictions)
    parts = sorted(fs.glob(f"{root.rstrip('/')}/part-*"))
    if not parts:
        raise ValueError(
            f"--predictions {predictions!r} holds no prediction parts (part-*); run the "
            "prediction step with --output_format recordio first"
        )
    rows: list[dict[str, Any]] = []
    for part in parts:
        if part.endswith(".csv"):
            raise ValueError(f"{part}: write-back reads RecordIO parts (--output_format recordio)")
        rows += read_rows(fs.unstrip_protocol(part), "recordio")
    return rows


def run(
    db: str, table: str, column: str, predictions: str, data: str, key: str = ""
) -> WriteBackResult:
    """Write the predictions; ValueError (one line) on bad input, with nothing written."""
    from elasticdl.runtime.sql import writeback
    from elasticdl.runtime.sql.runner import prediction_values
    from elasticdl.runtime.sql.statements import split_identifier

    if not db:
        raise ValueError("--db is required: the SQLAlchemy URL of the database")
    from elasticdl.runtime.sql.convert import check_database

    check_database(db)
    if not table:
        raise ValueError("--table is required: the table the predictions go into")
    split_identifier(table)
    if len(split_identifier(column)) != 1:
        raise ValueError(f"--column {column!r}: expected one column name")
    columns = _schema_columns(data)
    names = [name for name, _ in columns]
    if column in names:
        raise ValueError(
            f"the selected rows already have a column {column!r}; name the prediction column "
            "differently"
        )
    if key and key not in names:
        raise ValueError(f"--key {key!r} must be one of the selected columns {names}")
    rows = _prediction_rows(predictions)
    values, kind = prediction_values(rows)
    if key:
        pairs = [(row[key][0], value) for row, value in zip(rows, values, strict=True)]
        count = writeback.fill_column(db, table, column, key, pairs)
        mode = "fill"
    else:
        out_rows = (
            tuple(row[name][0] if row.get(name) else None for name in names) + (value,)
            for row, value in zip(rows, values, strict=True)
        )
        count = writeback.replace_table(db, table, [*columns, (column, kind)], out_rows)
        mode = "replace"
    log.info("wrote %d prediction(s) into %s.%s", count, table, column)
    return WriteBackResult(table, column, count, mode)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, help="SQLAlchemy URL, e.g. sqlite:///hr.db")
    parser.add_argument(
        "--db_secret",
        default="",
        help="NAME:KEY of the Secret whose key the step gets as $ELASTICDL_DB_PASSWORD",
    )
    parser.add_argument("--table", required=True, help="the table the rows go into")
    parser.add_argument("--column", default="prediction", help="the prediction column")
    parser.add_argument("--predictions", required=True, help="the prediction job's --output")
    parser.add_argument("--data", required=True, help="the SQL conversion's --output")
    parser.add_argument("--key", default="", help="fill the column of the table in place by key")


def run_from_args(args: argparse.Namespace) -> WriteBackResult:
    from elasticdl.runtime.sql.credentials import database_url

    db = database_url(args.db, args.db_secret, os.environ)
    return run(db, args.table, args.column, args.predictions, args.data, args.key)


def _finish(args: argparse.Namespace, result: Any) -> int:
    print(f"{result.rows} prediction(s) written to {result.table}.{result.column}")
    return 0


def _what(args: argparse.Namespace, err: BaseException) -> str:
    """The error with the database password redacted."""
    from elasticdl.runtime.sql.convert import redact_url
    from elasticdl.runtime.sql.credentials import PASSWORD_ENV

    secret = os.environ.get(PASSWORD_ENV) if args.db_secret else None
    if isinstance(err, ValueError):
        message = str(err).replace(args.db, redact_url(args.db)) if args.db else str(err)
    else:
        reason = str(getattr(err, "orig", None) or err).splitlines()[0]
        message = f"database error on {redact_url(args.db)}: {reason}"
    message = message.replace(secret, "***") if secret else message
    return message if message.startswith("database error") else f"error: {message}"


def main(argv: Sequence[str] | None = None) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from elasticdl.steps.step_main import BAD_INPUT, run_step

    return run_step(
        "elasticdl.steps.write_back",
        "write-back",
        add_arguments,
        run_from_args,
        _finish,
        argv,
        failures={ValueError: BAD_INPUT, SQLAlchemyError: 1},
        what=_what,
    )


if __name__ == "__main__":
    sys.exit(main())
