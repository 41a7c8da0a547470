"""Pipeline step `write-back`: predictions of SQL rows back into a database table.

    python -m elasticdl.steps.write_back --db URL --data DIR --predictions DIR

`--data` is the SQL conversion's output made with `--write_table` (its `write_back.json` holds
the plan of the write: runtime/sql/predict_writer.py), `--predictions` the prediction job's
output over it, made with `--keep_columns '*'`. The plan is checked against the table again,
then: a new table created atomically with the selected columns (less the trained label) plus
the prediction column (a staging table renamed in one step), or one an earlier PREDICT created
replaced; or the prediction column added to the table the SELECT read and filled by matching
rows on its key, in one transaction: the source rows are never dropped. A column PREDICT did
not add is never overwritten. A classifier's prediction is its class id.

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
    """create | replace (the table was created or replaced) | fill | rewrite (a column added)"""
    succeeded: bool = True


def run(db: str, data: str, predictions: str) -> WriteBackResult:
    """Write the predictions; ValueError (one line) on bad input, with nothing written."""
    from elasticdl.runtime.sql.convert import check_database
    from elasticdl.runtime.sql.predict_writer import load_plan, write

    if not db:
        raise ValueError("--db is required: the SQLAlchemy URL of the database")
    check_database(db)
    info = load_plan(data, db)
    count = write(data, predictions, db, info)
    log.info("wrote %d prediction(s) into %s.%s", count, info["table"], info["column"])
    return WriteBackResult(info["table"], info["column"], count, info["mode"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, help="SQLAlchemy URL, e.g. sqlite:///hr.db")
    parser.add_argument(
        "--db_secret",
        default="",
        help="NAME:KEY of the Secret whose key the step gets as $ELASTICDL_DB_PASSWORD",
    )
    parser.add_argument("--predictions", required=True, help="the prediction job's --output")
    parser.add_argument(
        "--data", required=True, help="the SQL conversion's --output (with its write plan)"
    )


def run_from_args(args: argparse.Namespace) -> WriteBackResult:
    from elasticdl.runtime.sql.credentials import database_url

    db = database_url(args.db, args.db_secret, os.environ)
    return run(db, args.data, args.predictions)


def _finish(args: argparse.Namespace, result: Any) -> int:
    print(f"{result.rows} prediction(s) written to {result.table}.{result.column}")
    return 0


def describe_error(args: argparse.Namespace, err: BaseException) -> str:
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
        what=describe_error,
    )


if __name__ == "__main__":
    sys.exit(main())
