"""Pipeline step `write-metrics`: an evaluation's metrics as one row of a database table.

    python -m elasticdl.steps.write_metrics --db URL --table T --metrics '{"Accuracy": 0.97}'

SQLFlow's `TO EVALUATE model ... INTO T`: table T gets one column per metric (in the order of
`--metrics`, a JSON object as the evaluate step writes it) and one row of values. T is created
atomically, or replaced when an earlier EVALUATE or PREDICT created it; any other existing
table is refused (runtime/sql/writeback.py, ownership.py). Exit status 2 with one line on
stderr for bad input (the URL's password never appears).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class MetricsWritten:
    table: str
    metrics: dict[str, float]
    succeeded: bool = True


def run(db: str, table: str, metrics: str) -> MetricsWritten:
    """Write the metrics (JSON text) into `table`; ValueError (one line) on bad input."""
    from elasticdl.runtime.sql import writeback
    from elasticdl.runtime.sql.convert import check_database
    from elasticdl.runtime.sql.lexer import split_identifier

    check_database(db)
    split_identifier(table)
    try:
        values = json.loads(metrics)
    except ValueError:
        raise ValueError(f"--metrics {metrics[:80]!r} is not a JSON object of metrics") from None
    if not isinstance(values, dict) or not values:
        raise ValueError("--metrics holds no metrics: the evaluation computed none")
    row = {str(name): float(value) for name, value in values.items()}
    writeback.replace_table(db, table, [(name, "float") for name in row], [tuple(row.values())])
    return MetricsWritten(table, row)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, help="SQLAlchemy URL, e.g. sqlite:///hr.db")
    parser.add_argument(
        "--db_secret",
        default="",
        help="NAME:KEY of the Secret whose key the step gets as $ELASTICDL_DB_PASSWORD",
    )
    parser.add_argument("--table", required=True, help="the table the metrics go into")
    parser.add_argument("--metrics", required=True, help="the metrics, a JSON object")


def run_from_args(args: argparse.Namespace) -> MetricsWritten:
    from elasticdl.runtime.sql.credentials import database_url

    return run(database_url(args.db, args.db_secret, os.environ), args.table, args.metrics)


def _finish(args: argparse.Namespace, result: Any) -> int:
    print(f"{len(result.metrics)} metric(s) written to {result.table}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from elasticdl.steps.step_main import BAD_INPUT, run_step
    from elasticdl.steps.write_back import describe_error

    return run_step(
        "elasticdl.steps.write_metrics",
        "write-metrics",
        add_arguments,
        run_from_args,
        _finish,
        argv,
        failures={ValueError: BAD_INPUT, SQLAlchemyError: 1},
        what=describe_error,
    )


if __name__ == "__main__":
    sys.exit(main())
