"""Running a TRAIN or PREDICT statement on the local engine: convert, run the job, write back.

    SELECT name, role, salary FROM employee TRAIN regressor.DNN
        WITH hidden_units=[10, 100, 20, 5], learning_rate=0.01 INTO my_trained_model

1. the SELECT runs on `--db` and its rows are converted to RecordIO + schema.json in a work
   directory (the label: LABEL, else the last selected column, and the result says so);
2. `train.*` / `engine.*` WITH keys become job options, the others model params;
   `train.validation.select` is converted too and evaluated during and after training;
3. the training job writes the model at `<model_root>/<model>` (or the model's URL);

and for `SELECT ... PREDICT table.column USING model`: where the predictions may go is decided
first (`predict_plan`: a new table, one an earlier PREDICT created, or a new column of the
table the SELECT reads, matched on its key, carried through the conversion when not
selected); then the SELECT's rows are converted, a prediction job writes one part per task,
and `predict_writer` writes them. When the database refuses that write, the predictions are
kept for `write_back_kept` (`elasticdl sql --write_back DIR`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticdl.runtime.sql.convert import ConversionError, check_database, convert, redact_url
from elasticdl.runtime.sql.predict_plan import plan_write
from elasticdl.runtime.sql.statements import (
    ModelRef,
    PredictStatement,
    StatementError,
    TrainStatement,
    parse_statement,
    select_with_columns,
    split_identifier,
)

log = logging.getLogger("elasticdl.sql")


@dataclass
class StatementResult:
    """What a statement did: `kind` train/predict, where the model or rows went, and notes."""

    kind: str
    status: str
    model: str
    rows: int = 0
    table: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    kept: str = ""  # where predictions that could not be written are kept

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


def model_location(ref: ModelRef, model_root: str) -> str:
    """A model name without a URL scheme lives under `model_root`."""
    if ref.has_scheme:
        return ref.name
    parts = split_identifier(ref.name) if not ref.name.startswith(("'", '"')) else (ref.name,)
    return f"{model_root.rstrip('/')}/{'/'.join(parts)}"


def params_text(params: dict[str, Any]) -> str:
    """Model params as the `--params` string (Python literals, parsed with literal_eval)."""
    return ", ".join(f"{name}={value!r}" for name, value in params.items())


def _bare(name: str) -> str:
    return split_identifier(name)[-1]


def run_statement(
    text: str,
    db: str,
    model_root: str = "./models",
    *,
    model_zoo: str | None = None,
    key: str | None = None,
    work_dir: str | None = None,
    job_options: dict[str, Any] | None = None,
    on_null: str | None = None,
) -> StatementResult:
    """Run one statement; bad input raises ValueError (StatementError, ConversionError, ...).

    `on_null` (error, skip, fill:VALUE) overrides a TRAIN statement's `train.on_null`."""
    statement = parse_statement(text)
    check_database(db)
    work = Path(tempfile.mkdtemp(prefix="elasticdl-sql-", dir=work_dir))
    result = None
    try:
        if isinstance(statement, TrainStatement):
            result = _train(statement, db, model_root, model_zoo, work, job_options or {}, on_null)
        else:
            result = _predict(statement, db, model_root, key, work, job_options or {}, on_null)
        return result
    finally:
        if result is None or not result.kept:
            shutil.rmtree(work, ignore_errors=True)


def write_back_kept(directory: str, db: str) -> StatementResult:
    """Write predictions a PREDICT kept when the database refused them (see predict_writer)."""
    from elasticdl.runtime.sql import predict_writer

    check_database(db)
    work = Path(directory)
    info = predict_writer.load_plan(work, db)
    result = _write(work, db, info, "")
    if not result.kept:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _write(work: Path, db: str, info: dict[str, Any], model: str) -> StatementResult:
    from sqlalchemy.exc import SQLAlchemyError

    from elasticdl.runtime.sql import predict_writer

    table = info["table"]
    try:
        count = predict_writer.write(work, db, info)
    except SQLAlchemyError as err:
        predict_writer.keep(work)
        reason = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
        error = (
            f"writing the predictions into {table} failed on {redact_url(db)}: {reason}; they "
            f"are kept in {work}: once the database is ready, write them with `elasticdl sql "
            f"--write_back {work} --db {redact_url(db)}`"
        )
        return StatementResult("predict", "failed", model, table=table, error=error, kept=str(work))
    log.info("wrote %d prediction(s) into %s.%s", count, table, info["column"])
    return StatementResult("predict", "succeeded", model, rows=count, table=table)


def _train(
    statement: TrainStatement,
    db: str,
    model_root: str,
    model_zoo: str | None,
    work: Path,
    job_options: dict[str, Any],
    on_null: str | None,
) -> StatementResult:
    from elasticdl.runtime.master.options import options_from_kwargs
    from elasticdl.runtime.master.training_job import TrainingJob
    from elasticdl.runtime.sql.key_columns import key_notes, primary_keys

    params, train, engine = statement.split_with()
    notes = []
    if statement.label is not None:
        label = _bare(statement.label)
    else:
        last = statement.columns[-1].name if statement.columns else None
        if last is None:
            raise StatementError(
                "no LABEL clause and the last selected item has no name; add LABEL <column> "
                "or an alias (... AS salary)"
            )
        label = _bare(last)
        notes.append(f"no LABEL clause: the last selected column {label!r} is the label")
    output = model_location(statement.into, model_root)
    on_null = on_null or train.pop("on_null", "error")
    train.pop("on_null", None)
    data = convert(
        db, statement.select, str(work / "train"), label=label, on_null=on_null, internal=True
    )
    selected = [c["name"] for c in data.schema["columns"]]
    if label not in selected:
        raise ConversionError(f"label column {label!r} is not among the selected columns")
    features = [name for name in selected if name != label]
    notes += key_notes(features, primary_keys(db, statement.tables))
    validation = train.pop("validation_select", None)
    if validation:
        convert(
            db, validation, str(work / "validation"), label=label, on_null=on_null, internal=True
        )
        train["validation_data"] = str(work / "validation")
    options = options_from_kwargs(
        model_def=statement.model_def,
        model_zoo=model_zoo,
        data=str(work / "train"),
        output=output,
        params=params_text(params),
        **{**train, **engine, **job_options},
    )
    result = TrainingJob(options).run()
    return StatementResult(
        "train",
        result.status,
        output,
        rows=data.rows,
        error=result.error,
        notes=notes,
        report=result.report,
    )


def _predict(
    statement: PredictStatement,
    db: str,
    model_root: str,
    key: str | None,
    work: Path,
    job_options: dict[str, Any],
    on_null: str | None,
) -> StatementResult:
    from elasticdl.runtime.master.inference_job import InferenceJob, InferenceOptions
    from elasticdl.runtime.sql import predict_writer, writeback
    from elasticdl.runtime.trained_model import read_trained_model

    model = model_location(statement.using, model_root)
    read_trained_model(model)
    table, column = statement.result_table, _bare(statement.result_column)
    reads = _reads_table(statement)
    selected = [_bare(c.name) for c in statement.columns if c.name]
    source = statement.tables[0] if statement.tables and len(statement.tables) == 1 else None
    facts = writeback.describe(db, table)
    plan = plan_write(table, column, reads, facts, selected, key, source)
    select = statement.select
    if plan.carry:
        if source is None or split_identifier(source) != split_identifier(table):
            need = f"select its key column {plan.key!r}" if plan.key else "give it a key"
            raise StatementError(
                f"to add a column to {table}, the SELECT must read {table} alone; {need} "
                "(or pass --key COLUMN)"
            )
        select = select_with_columns(select, writeback.carry_items(db, plan))
    carry = [f"{writeback.CARRY_PREFIX}{i}" for i in range(len(plan.carry))]
    data = convert(
        db, select, str(work / "predict"), on_null=on_null or "error", carry=carry, internal=True
    )
    columns = [(c["name"], c["dtype"]) for c in data.schema["columns"]]
    names = [name for name, _ in columns]
    if column in names:
        raise StatementError(
            f"the SELECT already returns a column {column!r}; name the prediction column "
            "differently"
        )
    facts_kept = {"table": table, "column": column, "reads_table": reads, "selected": selected}
    predict_writer.save_plan(work, db, plan, given_key=key, columns=columns, **facts_kept)
    predicted = InferenceJob(
        InferenceOptions(
            data=str(work / "predict"),
            trained_model=model,
            output=str(work / "predictions"),
            keep_columns=",".join(names),
            **job_options,
        )
    ).run()
    if not predicted.succeeded:
        return StatementResult(
            "predict", "failed", model, error=predicted.error, report=predicted.report
        )
    info = predict_writer.load_plan(work, db)
    return _write(work, db, info, model)


def prediction_values(rows: list[dict[str, Any]]) -> tuple[list[Any], str]:
    """One value per row: the prediction, or the class (argmax) of a vector of scores."""
    widths = {len(row["prediction"]) for row in rows}
    if widths == {1}:
        return [row["prediction"][0] for row in rows], "float"
    return [max(range(len(r["prediction"])), key=r["prediction"].__getitem__) for r in rows], (
        "int64"
    )


def _reads_table(statement: PredictStatement) -> bool:
    target = split_identifier(statement.result_table)
    return any(split_identifier(t) == target for t in statement.tables or ())
