"""A SQL statement as a pipeline and its parameter values: one definition for every engine.

`compile_statement` is pure: the statement (runtime/sql/statements.py) becomes the name of a
pipeline of `definitions.py` and the values of its parameters, the same values `elasticdl
train --sql ...` / `elasticdl predict --sql ...` would give it. `elasticdl sql` then runs that
pipeline on the local engine or submits it to Argo, so a statement means the same thing on
both, and nothing maps statements a second time.

* `SELECT ... TO TRAIN m WITH ... [COLUMN ...] LABEL y INTO name` -> train: the SELECT, label,
  model params, feature columns, validation SELECT and metrics, job options; the model under
  `<model_root>/<name>`, versioned: each TRAIN a new run, `LATEST` naming the newest
  (retraining replaces the model atomically and keeps the runs before it);
* `SELECT ... TO PREDICT t.c USING name` -> predict: the SELECT, the trained model, the table
  and column written (the conversion leaves the trained label out, as SQLFlow does);
* `SELECT ... TO EVALUATE name WITH validation.metrics=... LABEL y INTO t` -> evaluate: the
  SELECT, label, metrics, the result table.

Notes say what the statement left implicit (the label taken from the last selected column,
WITH keys accepted as SQLFlow has them that change nothing here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elasticdl.runtime.column_spec import to_text
from elasticdl.runtime.sql.lexer import StatementError, split_identifier
from elasticdl.runtime.sql.statements import (
    EvaluateStatement,
    ModelRef,
    PredictStatement,
    Statement,
    TrainStatement,
    parse_statement,
)

ENGINE_OPTION = "engine"


@dataclass(frozen=True)
class CompiledStatement:
    """What a statement runs: `pipeline` with parameter `values` (text, as flags give them)."""

    pipeline: str
    values: dict[str, str]
    engine: str | None = None
    """`WITH engine.engine=...`: the engine the statement asks for (None: the caller's)."""
    notes: tuple[str, ...] = ()
    model: str = ""
    statement: Any = field(default=None, compare=False)


def model_location(ref: ModelRef, model_root: str) -> str:
    """A model name without a URL scheme lives under `model_root` (its dotted parts as
    directories: `sqlflow_models.my_dnn_model` -> `<root>/sqlflow_models/my_dnn_model`)."""
    if ref.has_scheme or ref.name.startswith(("/", ".")):
        return ref.name
    return f"{model_root.rstrip('/')}/{'/'.join(split_identifier(ref.name))}"


def params_text(params: Mapping[str, Any]) -> str:
    """Model params as the `--params` string (Python literals, parsed with literal_eval)."""
    return ", ".join(f"{name}={value!r}" for name, value in params.items())


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _bare(name: str) -> str:
    return split_identifier(name)[-1]


def _label(statement: TrainStatement | EvaluateStatement, notes: list[str]) -> str:
    if statement.label is not None:
        return _bare(statement.label)
    last = statement.columns[-1].name if statement.columns else None
    if last is None or statement.star:
        raise StatementError(
            "no LABEL clause, and the SELECT's last column has no name to take as the label; "
            "add LABEL <column>"
        )
    notes.append(f"no LABEL clause: the last selected column {last!r} is the label")
    return last


def compile_statement(
    text: str,
    db: str,
    model_root: str = "./models",
    *,
    model_zoo: str | None = None,
    key: str | None = None,
    on_null: str | None = None,
) -> CompiledStatement:
    """The pipeline and values of one statement (module docstring); StatementError (a
    ValueError, with a caret) for a bad statement. `on_null` overrides WITH train.on_null."""
    statement: Statement = parse_statement(text, db)
    keys = statement.split_with()
    notes = [f"WITH {k}: accepted as SQLFlow has it, no effect here" for k in keys.ignored]
    options = dict(keys.job_options)
    engine = options.pop(ENGINE_OPTION, None)
    null_policy = on_null or options.pop("on_null", None)
    options.pop("on_null", None)
    values: dict[str, str] = {"sql": statement.select, "db": db}
    values.update({name: _text(value) for name, value in options.items()})
    if null_policy:
        values["on_null"] = null_policy
    if isinstance(statement, TrainStatement):
        return _train(statement, keys, values, notes, model_root, model_zoo, key, engine)
    if keys.model:
        raise StatementError(
            f"WITH {', '.join(keys.model)}: a model's arguments are set when it is trained (TO "
            "TRAIN), not here"
        )
    if isinstance(statement, PredictStatement):
        return _predict(statement, keys, values, notes, model_root, key, engine)
    return _evaluate(statement, keys, values, notes, model_root, key, engine)


def _train(
    statement: TrainStatement,
    keys: Any,
    values: dict[str, str],
    notes: list[str],
    model_root: str,
    model_zoo: str | None,
    key: str | None,
    engine: str | None,
) -> CompiledStatement:
    if key:
        raise StatementError("--key is for PREDICT into the table the SELECT reads, not TRAIN")
    if statement.using is not None:
        raise StatementError(
            f"TO TRAIN ... USING {statement.using}: training on from another model is not "
            "supported; train INTO a model (training INTO an existing one replaces it, keeping "
            "the previous version)"
        )
    output = model_location(statement.into, model_root)
    values.update(
        model_def=statement.model_def,
        label=_label(statement, notes),
        output=output,
        versioned="true",
    )
    if model_zoo:
        values["model_zoo"] = model_zoo
    if keys.model:
        values["params"] = params_text(keys.model)
    if statement.feature_columns:
        values["feature_columns"] = to_text(statement.feature_columns)
    if "eval_metrics" in keys.validation:
        values["eval_metrics"] = keys.validation["eval_metrics"]
    if "validation_select" in keys.validation:
        values["validation_sql"] = keys.validation["validation_select"]
    return CompiledStatement("train", values, engine, tuple(notes), output, statement)


def _predict(
    statement: PredictStatement,
    keys: Any,
    values: dict[str, str],
    notes: list[str],
    model_root: str,
    key: str | None,
    engine: str | None,
) -> CompiledStatement:
    if keys.validation:
        raise StatementError("validation.* keys are for TO TRAIN and TO EVALUATE, not PREDICT")
    model = model_location(statement.using, model_root)
    values.update(
        trained_model=model,
        output_table=statement.result_table,
        result_column=_bare(statement.result_column),
    )
    if key:
        values["key"] = key
    return CompiledStatement("predict", values, engine, tuple(notes), model, statement)


def _evaluate(
    statement: EvaluateStatement,
    keys: Any,
    values: dict[str, str],
    notes: list[str],
    model_root: str,
    key: str | None,
    engine: str | None,
) -> CompiledStatement:
    if key:
        raise StatementError("--key is for PREDICT into the table the SELECT reads")
    if "validation_select" in keys.validation:
        raise StatementError("validation.select is for TO TRAIN: TO EVALUATE evaluates its SELECT")
    model = model_location(statement.model, model_root)
    values.update(
        trained_model=model,
        label=_label(statement, notes),
        output_table=statement.into,
    )
    if "eval_metrics" in keys.validation:
        values["eval_metrics"] = keys.validation["eval_metrics"]
    return CompiledStatement("evaluate", values, engine, tuple(notes), model, statement)
