"""Running a TRAIN or PREDICT statement on the local engine: convert, run the job, write back.

    SELECT name, role, salary FROM employee TRAIN regressor.DNN
        WITH hidden_units=[10, 100, 20, 5], learning_rate=0.01 INTO my_trained_model

1. the SELECT runs on `--db` and its rows are converted to RecordIO + schema.json in a work
   directory (the label: LABEL, else the last selected column, and the result says so);
2. `train.*` / `engine.*` WITH keys become job options, the others model params;
   `train.validation.select` is converted too and evaluated during and after training;
3. the training job writes the model at `<model_root>/<model>` (or the model's URL);

and for `SELECT ... PREDICT table.column USING model`: the SELECT's rows are converted, a
prediction job writes one part per task, and the rows (every selected column plus the
prediction) go into `table`, created or replaced atomically, or, when the SELECT reads
`table` itself, into a new column of it matched on its primary key (or `key`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticdl.runtime.sql.convert import ConversionError, convert
from elasticdl.runtime.sql.statements import (
    ModelRef,
    PredictStatement,
    StatementError,
    TrainStatement,
    parse_statement,
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
) -> StatementResult:
    """Run one statement; bad input raises ValueError (StatementError, ConversionError, ...)."""
    statement = parse_statement(text)
    work = Path(tempfile.mkdtemp(prefix="elasticdl-sql-", dir=work_dir))
    try:
        if isinstance(statement, TrainStatement):
            return _train(statement, db, model_root, model_zoo, work, job_options or {})
        return _predict(statement, db, model_root, key, work, job_options or {})
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _train(
    statement: TrainStatement,
    db: str,
    model_root: str,
    model_zoo: str | None,
    work: Path,
    job_options: dict[str, Any],
) -> StatementResult:
    from elasticdl.runtime.master.training_job import TrainingJob
    from elasticdl.train_command import options_from_kwargs

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
    data = convert(db, statement.select, str(work / "train"), label=label)
    if label not in [c["name"] for c in data.schema["columns"]]:
        raise ConversionError(f"label column {label!r} is not among the selected columns")
    validation = train.pop("validation_select", None)
    if validation:
        convert(db, validation, str(work / "validation"), label=label)
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
) -> StatementResult:
    from elasticdl.runtime.master.inference_job import InferenceJob, InferenceOptions
    from elasticdl.runtime.prediction_output import read_rows
    from elasticdl.runtime.sql import writeback
    from elasticdl.runtime.trained_model import read_trained_model

    model = model_location(statement.using, model_root)
    read_trained_model(model)
    data = convert(db, statement.select, str(work / "predict"))
    columns = [(c["name"], c["dtype"]) for c in data.schema["columns"]]
    names = [name for name, _ in columns]
    result_column = _bare(statement.result_column)
    if result_column in names:
        raise StatementError(
            f"the SELECT already returns a column {result_column!r}; name the prediction "
            "column differently"
        )
    table = statement.result_table
    key_column = _target_key(db, table, key, names) if _reads_table(statement) else None
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
    rows = [
        row
        for part in sorted((work / "predictions").glob("part-*"))
        for row in read_rows(str(part), "recordio")
    ]
    values, kind = prediction_values(rows)
    if key_column is not None:
        pairs = [(row[key_column][0], value) for row, value in zip(rows, values, strict=True)]
        count = writeback.fill_column(db, table, result_column, key_column, pairs)
    else:
        out_rows = (
            tuple(row[name][0] if row.get(name) else None for name in names) + (value,)
            for row, value in zip(rows, values, strict=True)
        )
        count = writeback.replace_table(db, table, [*columns, (result_column, kind)], out_rows)
    log.info("wrote %d prediction(s) into %s.%s", count, table, result_column)
    return StatementResult("predict", "succeeded", model, rows=count, table=table)


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


def _target_key(db: str, table: str, key: str | None, names: list[str]) -> str:
    """The column that matches predictions to rows of `table` (its primary key by default)."""
    if key is None:
        from sqlalchemy import create_engine, inspect

        schema, name = (None, *split_identifier(table))[-2:]
        engine = create_engine(db)
        try:
            primary = inspect(engine).get_pk_constraint(name, schema=schema)
        finally:
            engine.dispose()
        found = primary.get("constrained_columns") or []
        if len(found) != 1:
            raise StatementError(
                f"the SELECT reads {table} itself, so predictions are added as a column matched "
                "on its primary key, but it has none (or a composite one); pass --key COLUMN"
            )
        key = found[0]
    if key not in names:
        raise StatementError(
            f"to add the prediction to {table}, the SELECT must return its key column {key!r} "
            f"(it returns {names})"
        )
    return key
