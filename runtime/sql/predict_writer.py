"""Writing a PREDICT statement's predictions into its table, and keeping them when that fails.

The work directory of a PREDICT holds what writing needs: `write_back.json` (the plan: table,
column, mode, key, the selected columns), the prediction parts under `predictions/` and the
carried key or row texts in `predict/_carried.jsonl`. When the database refuses the write
(locked, a trigger, a lost connection), the directory is kept, less the converted records, and
`elasticdl sql --write_back DIR --db URL` writes it later without recomputing; the plan is
checked again against the table first.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from elasticdl.runtime.sql import writeback
from elasticdl.runtime.sql.convert import CARRIED_FILE, ConversionError, redact_url
from elasticdl.runtime.sql.predict_plan import WritePlan, plan_write

PLAN_FILE = "write_back.json"


def save_plan(work: Path, db: str, plan: WritePlan, **facts: Any) -> None:
    """Record the plan (and what it was decided from) beside the predictions."""
    (work / PLAN_FILE).write_text(json.dumps({"db": redact_url(db), **asdict(plan), **facts}))


def load_plan(directory: Path, db: str) -> dict[str, Any]:
    """The plan kept in `directory`, checked against the table as it is now."""
    try:
        info = json.loads((directory / PLAN_FILE).read_text())
    except (OSError, ValueError):
        raise ValueError(
            f"--write_back {directory}: no kept predictions there ({PLAN_FILE} is missing)"
        ) from None
    if info["db"] != redact_url(db):
        raise ValueError(
            f"--write_back {directory}: these predictions are for {info['db']}, not "
            f"{redact_url(db)}"
        )
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


def write(work: Path, db: str, info: dict[str, Any]) -> int:
    """Write the predictions in `work` as `info` (the plan) says; the rows written."""
    from elasticdl.runtime.prediction_output import read_rows
    from elasticdl.runtime.sql.runner import prediction_values

    rows = [
        row
        for part in sorted((work / "predictions").glob("part-*"))
        for row in read_rows(str(part), "recordio")
    ]
    values, kind = prediction_values(rows)
    table, column, mode = info["table"], info["column"], info["mode"]
    carried: list[str] = []
    if info["carry"]:
        carried = (work / "predict" / CARRIED_FILE).read_text().splitlines()
        if len(carried) != len(values):
            raise ConversionError(f"{work}: {len(carried)} carried rows for {len(values)}")
    if mode == "fill":
        key = info["key"]
        keys = [json.loads(line)[0] for line in carried] or [row[key][0] for row in rows]
        return writeback.fill_column(db, table, column, key, zip(keys, values, strict=True))
    if mode == "rewrite":
        predictions = dict(zip(carried, values, strict=True))
        writeback.rewrite_with_column(db, table, column, kind, predictions)
        return len(values)
    columns = [tuple(c) for c in info["columns"]]
    out_rows = (
        tuple(row[name][0] if row.get(name) else None for name, _ in columns) + (value,)
        for row, value in zip(rows, values, strict=True)
    )
    return writeback.replace_table(db, table, [*columns, (column, kind)], out_rows)


def keep(work: Path) -> None:
    """Keep what a later `--write_back` needs; drop the converted records."""
    for record_file in (work / "predict").glob("*.recordio"):
        record_file.unlink()
    for other in work.iterdir():
        if other.name not in ("predict", "predictions", PLAN_FILE):
            shutil.rmtree(other, ignore_errors=True)
