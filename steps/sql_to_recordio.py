"""Pipeline step `sql-to-recordio`: the rows of a SELECT as RecordIO files plus schema.json.

    python -m elasticdl.steps.sql_to_recordio --db URL --sql "SELECT ..." --output URL \\
        [--records_per_file N] [--label COL] [--label_last true] [--on_null error|skip|fill:VALUE]
        [--write_table T --write_column C [--write_key K] [--trained_model M]]

The same flags as `elasticdl data convert`; `run(...)` is what the local engine calls. With
`--write_table` (a PREDICT into a table) the write is planned first, against the database as it
is, and refused before anything is converted when it would replace what PREDICT did not create
(runtime/sql/predict_writer.py); the label the model `--trained_model` was trained on is left
out of the rows, and the plan is kept beside them for the write-back step. Exit status 2 with
one line on stderr for bad input (the URL's password never appears).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from elasticdl.runtime.sql.convert import ConversionResult, convert
from elasticdl.runtime.sql.credentials import database_url


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, help="SQLAlchemy URL, e.g. sqlite:///hr.db")
    parser.add_argument(
        "--db_secret",
        default="",
        help="NAME:KEY of the Secret whose key the step gets as $ELASTICDL_DB_PASSWORD",
    )
    parser.add_argument("--sql", required=True, help='the query, e.g. "SELECT a, b FROM t"')
    parser.add_argument("--output", required=True, help="new directory (URL) for the files")
    parser.add_argument(
        "--records_per_file", type=int, default=100_000, help="rows per RecordIO file"
    )
    parser.add_argument(
        "--label",
        default=None,
        type=lambda text: text or None,
        help="the label column (recorded in schema)",
    )
    parser.add_argument(
        "--label_last",
        default="false",
        choices=["false", "true"],
        help="true: without --label, the last selected column is the label",
    )
    parser.add_argument(
        "--on_null",
        default="error",
        type=lambda text: text or "error",
        help="error (default), skip, or fill:VALUE (e.g. fill:0)",
    )
    parser.add_argument("--write_table", default="", help="PREDICT: the table written later")
    parser.add_argument("--write_column", default="", help="PREDICT: its prediction column")
    parser.add_argument("--write_key", default="", help="PREDICT: fill that table by this key")
    parser.add_argument(
        "--trained_model", default="", help="PREDICT: the model (its label is left out)"
    )


def run(
    db: str,
    sql: str,
    output: str,
    records_per_file: int = 100_000,
    label: str | None = None,
    on_null: str = "error",
    label_last: bool = False,
    write_to: tuple[str, str, str] | None = None,
    trained_model: str = "",
) -> ConversionResult:
    """Convert; raise ConversionError (a ValueError) with one clear message on bad input.
    `write_to`: (table, column, key) of a PREDICT into a table (module docstring)."""
    from elasticdl.runtime.sql.convert import check_database

    check_database(db)
    if write_to is None:
        return convert(
            db,
            sql,
            output,
            records_per_file=records_per_file,
            label=label,
            on_null=on_null,
            label_last=label_last,
        )
    from elasticdl.runtime.sql.predict_writer import plan_prediction, save_plan

    table, column, key = write_to
    plan = plan_prediction(db, sql, table, column, key or None, _trained_label(trained_model))
    result = convert(
        db,
        plan.select,
        output,
        records_per_file=records_per_file,
        on_null=on_null,
        carry=plan.carry,
        drop=plan.drop,
    )
    save_plan(output, plan)
    return result


def _trained_label(trained_model: str) -> str | None:
    """The label column the model was trained on, when it records one."""
    if not trained_model:
        return None
    from elasticdl.runtime.trained_model import read_trained_message

    return read_trained_message(trained_model).label_column or None


def run_from_args(args: argparse.Namespace) -> ConversionResult:
    write_to = None
    if args.write_table:
        write_to = (args.write_table, args.write_column or "prediction", args.write_key)
    return run(
        database_url(args.db, args.db_secret, os.environ),
        args.sql,
        args.output,
        args.records_per_file,
        args.label,
        args.on_null,
        label_last=args.label_last == "true",
        write_to=write_to,
        trained_model=args.trained_model,
    )


def _finish(args: argparse.Namespace, result: ConversionResult) -> int:
    print(f"{result.rows} row(s) in {len(result.files)} file(s) at {result.output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from elasticdl.steps.step_main import BAD_INPUT, run_step

    return run_step(
        "elasticdl.steps.sql_to_recordio",
        "sql-to-recordio",
        add_arguments,
        run_from_args,
        _finish,
        argv,
        failures={ValueError: BAD_INPUT},
    )


if __name__ == "__main__":
    sys.exit(main())
