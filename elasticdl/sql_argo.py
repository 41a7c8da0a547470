"""`elasticdl sql "STATEMENT" --engine argo`: the statement as the train or predict pipeline.

A TRAIN statement becomes the flags of `elasticdl train --engine argo` (the SELECT as `--sql`,
WITH keys as model params and job options, INTO as `--output`); a PREDICT statement those of
`elasticdl predict --engine argo` (USING as `--trained_model`, the result table and column as
`--output_table` / `--result_column`). Argo flags given after the statement (`--argo_server`,
`--image`, `--work_dir`, ...) are passed through. The flags are parsed by the same argparse
definitions the commands use, so a statement cannot say anything those flags cannot.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from elasticdl.runtime.sql.runner import model_location, params_text
from elasticdl.runtime.sql.statements import (
    StatementError,
    TrainStatement,
    parse_statement,
    split_identifier,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(f"elasticdl sql --engine argo: {message}")


def statement_argv(
    statement_text: str, db: str, model_root: str, key: str | None
) -> tuple[str, list[str]]:
    """("train" | "predict", the equivalent command-line flags) for a statement."""
    statement = parse_statement(statement_text)
    if isinstance(statement, TrainStatement):
        params, train, job = statement.split_with()
        if "validation_select" in train:
            raise StatementError(
                "train.validation.select is not supported with --engine argo yet; convert the "
                "validation rows with `elasticdl data convert` and pass --validation_data"
            )
        if "on_null" in train:
            raise StatementError(
                "train.on_null is not supported with --engine argo yet; filter or fill the "
                "NULLs in the SELECT (WHERE col IS NOT NULL, COALESCE(col, 0))"
            )
        job.pop("engine", None)  # WITH engine.engine: this is --engine argo
        if statement.label is not None:
            label = split_identifier(statement.label)[-1]
        else:
            last = statement.columns[-1].name if statement.columns else None
            if last is None:
                raise StatementError("no LABEL clause and the last selected item has no name")
            label = split_identifier(last)[-1]
        argv = [
            "--model_def",
            statement.model_def,
            "--sql",
            statement.select,
            "--db",
            db,
            "--label",
            label,
            "--output",
            model_location(statement.into, model_root),
        ]
        if params:
            argv += ["--params", params_text(params)]
        for name, value in {**train, **job}.items():
            argv += [f"--{name}", str(value).lower() if isinstance(value, bool) else str(value)]
        return "train", argv
    target = split_identifier(statement.result_table)
    if not key and any(split_identifier(t) == target for t in statement.tables or ()):
        raise StatementError(
            "with --engine argo, PREDICT into the table the SELECT reads needs --key COLUMN "
            "(a selected column that identifies each row); or run it with --engine local"
        )
    argv = [
        "--trained_model",
        model_location(statement.using, model_root),
        "--sql",
        statement.select,
        "--db",
        db,
        "--output_table",
        statement.result_table,
        "--result_column",
        split_identifier(statement.result_column)[-1],
    ]
    if key:
        argv += ["--key", key]
    return "predict", argv


def submit_statement(
    statement_text: str, db: str, model_root: str, key: str | None, extra: Sequence[str]
) -> int:
    """Submit the statement's pipeline to Argo; the exit status of `--engine argo`."""
    from elasticdl.argo_engine import add_argo_arguments, submit_predict, submit_train

    job, argv = statement_argv(statement_text, db, model_root, key)
    parser = _Parser(prog=f"elasticdl sql ({job})")
    if job == "train":
        from elasticdl.train_command import add_train_arguments

        add_train_arguments(parser)
    else:
        from elasticdl.predict_command import add_inference_arguments

        add_inference_arguments(parser, "predict")
    add_argo_arguments(parser, job)
    args = parser.parse_args([*argv, *extra])
    args.engine = "argo"
    return submit_train(args) if job == "train" else submit_predict(args)
