"""Checks on a finished job's `job_report.json`, shared by the end-to-end job tests."""

from __future__ import annotations

import json
from pathlib import Path


def report_of(directory: Path) -> dict:
    """The job report in an output (or log) directory, checked against its JSON Schema."""
    report = json.loads((directory / "job_report.json").read_text())
    assert_report_valid(report)
    return report


def assert_report_valid(report: dict) -> None:
    """The report follows job_report.schema.json (the schema the package ships)."""
    import jsonschema

    from elasticdl.runtime.master.report import schema

    jsonschema.validate(report, schema(), cls=jsonschema.Draft202012Validator)


def context_of(report: dict, *keys: str) -> str:
    """Parts of a report for an assertion message (bounded)."""
    keys = keys or ("records", "epochs", "failures", "events")
    return json.dumps({k: report.get(k) for k in keys})[:4000]


def assert_records_accounted(report: dict, max_redone: int = 0) -> None:
    """Every planned record trained, per epoch; what was trained twice is exactly `redone`."""
    context = context_of(report, "records", "epochs", "events")
    for epoch in report["epochs"]:
        assert epoch["trained"] >= epoch["planned"], context
        assert epoch["trained"] - epoch["planned"] == epoch["redone"], context
    assert report["records"]["redone"] <= max_redone, context
    records = report["records"]
    assert records["trained"] == records["planned"] + records["redone"], context
    assert records["redone"] == sum(e["redone"] for e in report["epochs"]), context
