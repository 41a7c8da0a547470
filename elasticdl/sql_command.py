"""`elasticdl sql "STATEMENT" --db URL`: a statement's pipeline, run here or on Argo.

    elasticdl sql "SELECT * FROM iris.train TO TRAIN DNNClassifier WITH model.n_classes=3
                   COLUMN sepal_length, sepal_width, petal_length, petal_width LABEL class
                   INTO sqlflow_models.my_dnn_model" --db mysql+pymysql://root@127.0.0.1/
    elasticdl sql "SELECT * FROM iris.test TO PREDICT iris.predict.class
                   USING sqlflow_models.my_dnn_model" --db ...
    elasticdl sql "..." --engine argo --argo_server URL --work_dir gs://b/work [--image ...]

The statement becomes a pipeline and its values in one place (workflows/statements.py): the
local engine runs that pipeline step by step (the same steps `elasticdl train --sql` runs), or
it is submitted to Argo with the Argo flags that follow the statement. Models named without a
URL live under `--model_root`; a TRAIN writes a new run of the model and points its LATEST at
it once published, so retraining replaces a model atomically and keeps the runs before it
(`elasticdl sql --restore NAME RUN` points LATEST back).

When the database refuses a PREDICT's final write (locked, a trigger, a lost connection), the
predictions are kept: `elasticdl sql --write_back DIR --db URL` writes them later.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticdl.runtime.job_options import RaisingParser


def add_sql_command(commands: argparse._SubParsersAction) -> None:
    sql = commands.add_parser(
        "sql",
        help="run a SELECT ... TO TRAIN / TO PREDICT / TO EVALUATE statement",
        description="Run a SQLFlow statement: SELECT ... TO TRAIN model [WITH k=v, ...] "
        "[COLUMN ...] [LABEL col] INTO name; SELECT ... TO PREDICT table.column USING name; "
        "SELECT ... TO EVALUATE name [WITH validation.metrics=...] LABEL col INTO table. The "
        "older SELECT ... TRAIN / PREDICT form works too.",
    )
    sql.add_argument(
        "statement", nargs="?", default="", help="the statement (quote it for the shell)"
    )
    sql.add_argument("--db", required=True, help="SQLAlchemy URL, e.g. sqlite:///hr.db")
    sql.add_argument(
        "--model_root", default="./models", help="where models named without a URL live"
    )
    sql.add_argument("--model_zoo", default=None, help="for TRAIN: directory or git URL")
    sql.add_argument("--key", default=None, help="for PREDICT into a source table: key column")
    sql.add_argument(
        "--on_null",
        default=None,
        help="NULLs in the selected rows: error (default), skip (drop the row) or fill:VALUE; "
        "overrides WITH train.on_null",
    )
    sql.add_argument(
        "--write_back",
        default="",
        metavar="DIR",
        help="instead of a statement: write the predictions a failed PREDICT kept in DIR",
    )
    sql.add_argument(
        "--restore",
        nargs=2,
        default=None,
        metavar=("MODEL", "RUN"),
        help="instead of a statement: make run RUN (a name under MODEL/runs) the model MODEL "
        "means again",
    )
    sql.add_argument(
        "--engine",
        default="local",
        choices=["local", "argo"],
        help="argo: submit the statement's pipeline; Argo flags (--argo_server, --image, "
        "--work_dir, ...) may follow",
    )


def run_sql(args: argparse.Namespace, extra: Sequence[str] = ()) -> int:
    """The `elasticdl sql` command; the exit status. Bad input raises ValueError."""
    chosen = [bool(args.statement), bool(args.write_back), args.restore is not None]
    if sum(chosen) != 1:
        raise ValueError("give a statement, --write_back DIR or --restore MODEL RUN")
    if args.on_null is not None:
        from elasticdl.runtime.sql.attributes import null_policy_problem

        problem = null_policy_problem(args.on_null)
        if problem:
            raise ValueError(f"--on_null: {problem}")
    if args.write_back:
        return _write_kept(Path(args.write_back), args.db)
    if args.restore is not None:
        return _restore(args.model_root, *args.restore)
    from elasticdl.workflows.statements import compile_statement

    compiled = compile_statement(
        args.statement,
        args.db,
        args.model_root,
        model_zoo=args.model_zoo,
        key=args.key,
        on_null=args.on_null,
    )
    engine = compiled.engine or args.engine
    if engine == "argo":
        for note in compiled.notes:
            print(f"note: {note}")
        return _submit(compiled, args, extra)
    if extra:
        raise ValueError(
            f"unrecognized arguments: {' '.join(extra)} (Argo flags need --engine argo)"
        )
    return print_result(_run_here(compiled))


@dataclass
class StatementResult:
    """What a statement did: `kind` train/predict/evaluate, where the model, rows or metrics
    went, and notes. `kept`: where predictions the database refused are kept."""

    kind: str
    status: str
    model: str
    rows: int = 0
    table: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    run: str = ""
    """train: the model's new run (under MODEL/runs)."""
    kept: str = ""

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


def run_statement(
    text: str,
    db: str,
    model_root: str = "./models",
    *,
    model_zoo: str | None = None,
    key: str | None = None,
    on_null: str | None = None,
    job_options: dict[str, Any] | None = None,
    work_dir: str | None = None,
) -> StatementResult:
    """Run one statement's pipeline on this machine (the local engine). Bad input raises
    ValueError before anything runs; `job_options` add pipeline values (`num_workers=1`);
    `work_dir` is where the run's intermediate data (and kept predictions) go."""
    from elasticdl.runtime.sql.convert import check_database
    from elasticdl.workflows.statements import compile_statement

    compiled = compile_statement(
        text, db, model_root, model_zoo=model_zoo, key=key, on_null=on_null
    )
    check_database(db)
    for name, value in (job_options or {}).items():
        compiled.values[name] = (
            "true" if value is True else "false" if value is False else str(value)
        )
    return _run_here(compiled, work_dir)


def _run_here(compiled: Any, work_dir: str | None = None) -> StatementResult:
    """Run the statement's pipeline on this machine."""
    from sqlalchemy.exc import SQLAlchemyError

    from elasticdl.workflows.definitions import pipeline
    from elasticdl.workflows.local import new_run_id, run_local

    root = Path(tempfile.mkdtemp(prefix="elasticdl-sql-", dir=work_dir))
    run_id = new_run_id(compiled.pipeline)
    kept = False
    try:
        try:
            run = run_local(
                pipeline(compiled.pipeline),
                compiled.values,
                run_id=run_id,
                work_dir=str(root),
                raise_errors=True,
            )
        except SQLAlchemyError as err:
            run_dir = root / "work" / run_id
            if compiled.pipeline != "predict" or not (run_dir / "predictions").is_dir():
                from elasticdl.runtime.sql.convert import redact_url

                reason = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
                db = redact_url(compiled.values["db"])
                raise ValueError(f"database error on {db}: {reason}") from None
            kept = True
            return _kept(run_dir, compiled, err)
        return _result(run, compiled)
    finally:
        if not kept:
            shutil.rmtree(root, ignore_errors=True)


def _kept(run_dir: Path, compiled: Any, err: Exception) -> StatementResult:
    from elasticdl.runtime.sql.convert import redact_url
    from elasticdl.runtime.sql.predict_writer import keep

    keep(run_dir, run_dir / "predict-data")
    reason = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
    db = redact_url(compiled.values["db"])
    table = compiled.values["output_table"]
    error = (
        f"writing the predictions into {table} failed on {db}: {reason}; they are kept in "
        f"{run_dir}: once the database is ready, write them with `elasticdl sql --write_back "
        f"{run_dir} --db {db}`"
    )
    notes = list(compiled.notes)
    return StatementResult(
        "predict",
        "failed",
        compiled.model,
        table=table,
        error=error,
        notes=notes,
        kept=str(run_dir),
    )


def _key_notes(compiled: Any, schema: dict[str, Any]) -> list[str]:
    """Key columns among the features the SELECT gave (runtime/sql/key_columns.py); none to say
    when a COLUMN clause names the features."""
    from elasticdl.runtime.sql.key_columns import key_notes, primary_keys

    statement = compiled.statement
    if statement is None or statement.feature_columns or not schema:
        return []
    label = schema.get("label")
    features = [c["name"] for c in schema.get("columns", ()) if c["name"] != label]
    return key_notes(features, primary_keys(compiled.values["db"], statement.tables))


def _result(run: Any, compiled: Any) -> StatementResult:
    kind, notes = compiled.pipeline, list(compiled.notes)
    job = run.step(kind).result
    converted = run.step("sql-to-recordio").result
    rows = getattr(converted, "rows", 0)
    report = getattr(job, "report", {}) or {}
    if not run.succeeded:
        error = getattr(job, "error", "") or run.error
        return StatementResult(
            kind, "failed", compiled.model, rows, error=error, notes=notes, report=report
        )
    if kind == "train":
        notes += _key_notes(compiled, getattr(converted, "schema", None) or {})
        return StatementResult(
            kind, "succeeded", compiled.model, rows, notes=notes, report=report, run=job.output
        )
    if kind == "predict":
        written = run.step("write-back").result
        return StatementResult(
            kind,
            "succeeded",
            compiled.model,
            written.rows,
            table=written.table,
            notes=notes,
            report=report,
        )
    return StatementResult(
        kind,
        "succeeded",
        compiled.model,
        rows,
        table=compiled.values.get("output_table", ""),
        notes=notes,
        report=report,
        metrics=dict(job.metrics),
    )


def print_result(result: StatementResult) -> int:
    """The command's output for a statement's result; the exit status."""
    for note in result.notes:
        print(f"note: {note}")
    if not result.succeeded:
        print(f"elasticdl: {result.kind} failed: {result.error}", file=sys.stderr)
        return 1
    if result.kind == "train":
        from elasticdl.job_summary import ended_lines

        print(
            f"trained on {result.rows} row(s); model {result.model} is now run "
            f"{Path(result.run).name} ({result.run})"
        )
        for line in ended_lines(result.report, result.run):
            print(line)
    elif result.kind == "predict":
        print(f"{result.rows} prediction(s) written to {result.table}")
    else:
        print(json.dumps(result.metrics, sort_keys=True))
        print(f"metrics of {result.rows} row(s) written to {result.table}")
    return 0


def _write_kept(run_dir: Path, db: str) -> int:
    from elasticdl.steps.write_back import run as write_back

    result = write_back(db, str(run_dir / "predict-data"), str(run_dir / "predictions"))
    shutil.rmtree(run_dir, ignore_errors=True)
    print(f"{result.rows} prediction(s) written to {result.table}.{result.column}")
    return 0


def _restore(model_root: str, model: str, run: str) -> int:
    from elasticdl.runtime.sql.statements import ModelRef
    from elasticdl.steps.publish import update_latest
    from elasticdl.workflows.statements import model_location

    location = model_location(ModelRef(model, "://" in model), model_root)
    if "/" in run or run in ("", ".", ".."):
        raise ValueError(f"--restore: {run!r} is not a run name (a directory under runs/)")
    result = update_latest(location, f"{location.rstrip('/')}/runs/{run}")
    print(f"{model} is run {run} again ({result.model})")
    return 0


def _submit(compiled: Any, args: argparse.Namespace, extra: Sequence[str]) -> int:
    """Submit the statement's pipeline: its values plus the Argo flags after the statement."""
    from elasticdl.argo_engine import add_argo_arguments, submit_job
    from elasticdl.workflows.definitions import pipeline
    from elasticdl.workflows.steps import Engine

    if args.write_back or args.on_null is not None:
        raise ValueError("--on_null and --write_back work with --engine local only")
    job = compiled.pipeline
    parser = RaisingParser(prog=f"elasticdl sql --engine argo ({job})")
    parser.add_argument("--job_name", default="")
    add_argo_arguments(parser, job)
    flags = parser.parse_args(list(extra))
    on_argo = {p.name for p in pipeline(job).params_on(Engine.ARGO)}
    local_only = sorted(set(compiled.values) - on_argo)
    if local_only:
        raise ValueError(
            f"{', '.join(local_only)}: set by the statement but not available with --engine "
            "argo (options of the local engine)"
        )
    values = dict(compiled.values)
    for name in on_argo:
        given = getattr(flags, name, None)
        if given is None:
            continue
        if name in values and values[name] != given:
            raise ValueError(f"--{name}: the statement sets it already ({values[name]!r})")
        values[name] = given
    return submit_job(flags, job, values)
