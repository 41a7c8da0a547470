"""Where PREDICT may write: the decision table of `predict_plan.plan_write`, directly."""

from __future__ import annotations

import pytest

from elasticdl.runtime.sql.predict_plan import TargetFacts, WritePlan, plan_write
from elasticdl.runtime.sql.statements import StatementError

COLS = ("id", "name", "role")
KEYED = TargetFacts(True, columns=COLS, primary_key=("id",))
KEYLESS = TargetFacts(True, columns=COLS)


@pytest.mark.parametrize(
    ("reads", "facts", "selected", "key", "expected"),
    [
        (False, TargetFacts(False), ["name"], None, WritePlan("create")),
        (False, TargetFacts(True, owned=True, columns=COLS), ["name"], None, WritePlan("replace")),
        (True, KEYED, ["name", "role"], None, WritePlan("fill", "id", ("id",))),
        (True, KEYED, ["id", "name"], None, WritePlan("fill", "id")),
        (True, KEYLESS, ["name"], "name", WritePlan("fill", "name")),
        (True, KEYLESS, ["role"], "name", WritePlan("fill", "name", ("name",))),
        (True, KEYLESS, ["name"], None, WritePlan("rewrite", carry=COLS)),
        (
            True,
            TargetFacts(True, columns=(*COLS, "p"), owned_columns=("p",)),
            ["name"],
            None,
            WritePlan("rewrite", carry=COLS),
        ),
        (
            True,
            TargetFacts(True, columns=(*COLS, "p"), primary_key=("id",), owned_columns=("p",)),
            ["name"],
            None,
            WritePlan("fill", "id", ("id",)),
        ),
    ],
    ids=[
        "new-table",
        "own-table",
        "key-carried",
        "key-selected",
        "given-key-selected",
        "given-key-carried",
        "no-key-rewrite",
        "no-key-own-column",
        "own-column-again",
    ],
)
def test_plans(reads, facts, selected, key, expected):
    assert plan_write("t", "p", reads, facts, selected, key) == expected


@pytest.mark.parametrize(
    ("reads", "facts", "key", "fragment"),
    [
        (False, TargetFacts(True, columns=COLS), None, "was not created by PREDICT"),
        (False, TargetFacts(False), "id", "--key is for PREDICT into the table the SELECT reads"),
        (True, TargetFacts(False), None, "does not exist"),
        (True, TargetFacts(True, columns=(*COLS, "p")), None, "already has a column 'p'"),
        (True, TargetFacts(True, columns=COLS, primary_key=("id", "name")), None, "composite"),
        (True, KEYED, "nope", "--key 'nope' is not a column"),
    ],
    ids=[
        "foreign-table",
        "key-without-source",
        "missing",
        "foreign-column",
        "composite",
        "bad-key",
    ],
)
def test_refusals_say_how_to_proceed(reads, facts, key, fragment):
    with pytest.raises(StatementError, match=fragment) as refused:
        plan_write("t", "p", reads, facts, ["name"], key, source="src")
    if "not created" in fragment:
        assert "PREDICT src.p" in str(refused.value) and "PREDICT <new table>.p" in str(
            refused.value
        )
