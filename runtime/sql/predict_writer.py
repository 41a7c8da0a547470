"""A PREDICT's rows into a table: planned before anything is computed, written after.

`plan_prediction` runs first (in the SQL conversion step), against the database as it is:
where the predictions may go (`predict_plan.plan_write`: a new table, one an earlier PREDICT
created, or a new column of the table the SELECT reads), which of the table's columns the
conversion must carry to match rows back, and which selected columns are left out — SQLFlow's
semantics: the result table holds the selected columns less the label the model was trained on,
with the prediction in the named column (a selected column of that name is replaced). Anything
refused is refused there, before a prediction is made. The plan is kept beside the converted
rows (`write_back.json`).

`write` runs last (the write-back step): it checks the plan against the table again, then
writes the prediction parts. When the database refuses that write (locked, a trigger, a lost
connection), `elasticdl sql` keeps the run's directory (`keep`) and `elasticdl sql
--write_back DIR` writes it later without computing anything again.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from elasticdl.runtime.sql import writeback
from elasticdl.runtime.sql.convert import CARRIED_FILE, ConversionError, redact_url
from elasticdl.runtime.sql.lexer import StatementError, split_identifier
from elasticdl.runtime.sql.predict_plan import plan_write

PLAN_FILE = "write_back.json"


@dataclass(frozen=True)
class PredictionPlan:
    """What the conversion does for a PREDICT into a table, and what the write needs."""

    select: str
    """The SELECT to convert: the user's, with the carried columns added when needed."""
    carry: tuple[str, ...]
    drop: tuple[str, ...]
    info: dict[str, Any]
    """The plan as kept in write_back.json."""


def selected_columns(db: str, select: str) -> list[str]:
    """The SELECT's output column names, asked of the database (no rows read);
    ConversionError (one line, no password) when the database refuses the SELECT."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with writeback.engine_for(db) as engine, engine.connect() as conn:
            probe = f"SELECT * FROM ({select}) AS elasticdl_columns WHERE 1 = 0"
            return list(conn.execute(text(probe)).keys())
    except SQLAlchemyError as err:
        reason = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
        raise ConversionError(f"the query failed on {redact_url(db)}: {reason}") from None


def _reads(select: str, dialect: str, table: str) -> tuple[bool, str | None]:
    """(the SELECT reads `table`, the one table it reads when it reads exactly one)."""
    import sqlglot

    from elasticdl.runtime.sql.select_part import plain_tables, sqlglot_dialect

    tables = plain_tables(sqlglot.parse_one(select, read=sqlglot_dialect(dialect) or None)) or ()
    target = split_identifier(table)
    reads = any(split_identifier(t) == target for t in tables)
    return reads, tables[0] if len(tables) == 1 else None


def plan_prediction(
    db: str, select: str, table: str, column: str, key: str | None, trained_label: str | None
) -> PredictionPlan:
    """Plan a PREDICT of `select` into `table`.`column` (module docstring); StatementError
    (one line) for a write that would destroy what PREDICT did not create."""
    reads, source = _reads(select, db, table)
    selected = selected_columns(db, select)
    drop = tuple(c for c in (trained_label,) if c and c in selected and c != key)
    facts = writeback.describe(db, table)
    if not reads:
        drop += tuple(c for c in (column,) if c in selected and c not in drop)
    kept = [c for c in selected if c not in drop]
    plan = plan_write(table, column, reads, facts, kept, key, source)
    carry: tuple[str, ...] = ()
    if plan.carry:
        if source is None or split_identifier(source) != split_identifier(table):
            need = f"select its key column {plan.key!r}" if plan.key else "give it a key"
            raise StatementError(
                f"to add a column to {table}, the SELECT must read {table} alone; {need} "
                "(or pass --key COLUMN)"
            )
        from elasticdl.runtime.sql.select_part import select_with_columns

        carry = tuple(f"{writeback.CARRY_PREFIX}{i}" for i in range(len(plan.carry)))
        select = select_with_columns(select, writeback.carry_items(db, plan), db)
    elif column in kept:
        raise StatementError(
            f"the SELECT already returns a column {column!r}; name the prediction column "
            "differently"
        )
    info = {
        "db": redact_url(db),
        **asdict(plan),
        "table": table,
        "column": column,
        "reads_table": reads,
        "selected": kept,
        "given_key": key,
        "drop": list(drop),
    }
    return PredictionPlan(select, carry, drop, info)


def save_plan(data: str, plan: PredictionPlan) -> None:
    """Keep the plan beside the converted rows (`data`, a directory URL)."""
    import fsspec

    with fsspec.open(f"{data.rstrip('/')}/{PLAN_FILE}", "w") as out:
        out.write(json.dumps(plan.info))


def load_plan(data: str, db: str) -> dict[str, Any]:
    """The plan kept beside the converted rows, checked against the table as it is now."""
    import fsspec

    try:
        with fsspec.open(f"{data.rstrip('/')}/{PLAN_FILE}") as found:
            info = json.loads(found.read())
    except (OSError, ValueError):
        raise ValueError(
            f"{data}: no {PLAN_FILE} (the plan of the write, made by the SQL conversion step "
            "with --write_table)"
        ) from None
    if info["db"] != redact_url(db):
        raise ValueError(f"{data}: these predictions are for {info['db']}, not {redact_url(db)}")
    now = plan_write(
        info["table"],
        info["column"],
        info["reads_table"],
        writeback.describe(db, info["table"]),
        info["selected"],
        info["given_key"],
    )
    if (now.mode, now.key, list(now.carry)) != (info["mode"], info["key"], info["carry"]):
        raise ConversionError(
            f"table {info['table']} changed since the predictions were made ({info['mode']} "
            f"then, {now.mode} now); run the PREDICT statement again"
        )
    return info


def prediction_values(rows: list[dict[str, Any]]) -> tuple[list[Any], str]:
    """One value per row: the prediction, or the class (argmax) of a vector of scores."""
    widths = {len(row["prediction"]) for row in rows}
    if widths <= {1}:
        values = [row["prediction"][0] for row in rows]
        integral = values and all(isinstance(v, int) for v in values)
        return values, "int64" if integral else "float"
    return [max(range(len(r["prediction"])), key=r["prediction"].__getitem__) for r in rows], (
        "int64"
    )


def prediction_rows(predictions: str) -> list[dict[str, Any]]:
    """The rows of every RecordIO prediction part under `predictions`, in part order."""
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


def write(data: str, predictions: str, db: str, info: dict[str, Any]) -> int:
    """Write the predictions as `info` (the plan) says; the rows written."""
    import fsspec

    from elasticdl.runtime.data.metadata import schema_in

    rows = prediction_rows(predictions)
    values, kind = prediction_values(rows)
    table, column, mode = info["table"], info["column"], info["mode"]
    carried: list[str] = []
    if info["carry"]:
        with fsspec.open(f"{data.rstrip('/')}/{CARRIED_FILE}") as found:
            carried = found.read().decode().splitlines()
        if len(carried) != len(values):
            raise ConversionError(f"{data}: {len(carried)} carried rows for {len(values)}")
    if mode == "fill":
        key = info["key"]
        keys = [json.loads(line)[0] for line in carried] or [row[key][0] for row in rows]
        return writeback.fill_column(db, table, column, key, zip(keys, values, strict=True))
    if mode == "rewrite":
        writeback.rewrite_with_column(
            db, table, column, kind, dict(zip(carried, values, strict=True))
        )
        return len(values)
    schema = schema_in(data.rstrip("/")) or {}
    columns = [(c["name"], c["dtype"]) for c in schema.get("columns", []) if c["name"] != column]
    out_rows = (
        tuple(_cell(row.get(name), kind) for name, kind in columns) + (value,)
        for row, value in zip(rows, values, strict=True)
    )
    return writeback.replace_table(db, table, [*columns, (column, kind)], out_rows)


def _cell(values: list[Any] | None, kind: str) -> Any:
    """A copied column's value: the records hold numbers as float32, written back as the
    shortest decimal that float32 value is (6.4, not 6.400000095367432)."""
    if not values:
        return None
    if kind == "float":
        import numpy as np

        return float(str(np.float32(values[0])))
    return values[0]


def keep(run_dir: Path, data: Path) -> None:
    """Keep what a later `--write_back` needs in `run_dir`: drop the converted records."""
    for record_file in data.glob("*.recordio"):
        record_file.unlink()
    for other in run_dir.iterdir():
        if other.is_dir() and other not in (data, run_dir / "predictions"):
            shutil.rmtree(other, ignore_errors=True)
