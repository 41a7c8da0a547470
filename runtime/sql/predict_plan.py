"""Where `SELECT ... PREDICT table.column` may write, decided before anything is computed.

Pure logic (the facts about the database are gathered by the caller). The rule: PREDICT never
replaces, drops or overwrites what it did not create.

| SELECT reads the table | table exists | PREDICT created it | key   | column        | plan     |
|------------------------|--------------|--------------------|-------|---------------|----------|
| no                     | no           |                    |       |               | create   |
| no                     | yes          | yes                |       |               | replace  |
| no                     | yes          | no                 |       |               | refused  |
| yes                    | yes          |                    | one   | new / its own | fill     |
| yes                    | yes          |                    | none  | new / its own | rewrite  |
| yes                    | yes          |                    | 2+    |               | refused  |
| yes                    | yes          |                    |       | not its own   | refused  |

`fill` matches predictions to rows on the key (the table's single-column primary key, or
`--key`), carried through the conversion when the SELECT does not return it; `rewrite` copies
the table with one more column, matching rows on the text of all their other columns (equal
rows get equal predictions, as a deterministic SELECT gives them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elasticdl.runtime.sql.statements import StatementError


@dataclass(frozen=True)
class TargetFacts:
    """What the database says about the target table (read by the caller)."""

    exists: bool
    owned: bool = False  # an earlier PREDICT created the whole table
    columns: tuple[str, ...] = ()
    primary_key: tuple[str, ...] = ()
    owned_columns: tuple[str, ...] = ()  # columns an earlier PREDICT added to it


@dataclass(frozen=True)
class WritePlan:
    mode: str  # create | replace | fill | rewrite
    key: str | None = None  # fill: the column rows are matched on
    carry: tuple[str, ...] = ()  # table columns the conversion carries (not model inputs)


def plan_write(
    table: str,
    column: str,
    reads_table: bool,
    facts: TargetFacts,
    selected: Sequence[str],
    key: str | None = None,
    source: str | None = None,
) -> WritePlan:
    """The plan for writing `column` of `table`; StatementError saying how to proceed when the
    write would destroy something PREDICT did not create. `selected`: the SELECT's columns;
    `source`: the table it reads, for the advice."""
    if not reads_table:
        if key:
            raise StatementError(
                f"--key is for PREDICT into the table the SELECT reads; {table} is not read"
            )
        if not facts.exists:
            return WritePlan("create")
        if facts.owned:
            return WritePlan("replace")
        instead = f"PREDICT {source}.{column} to add a column to {source}, or " if source else ""
        raise StatementError(
            f"table {table} exists and was not created by PREDICT, so it is never replaced; "
            f"write {instead}PREDICT <new table>.{column}, or drop {table} yourself first"
        )
    if not facts.exists:
        raise StatementError(f"table {table} does not exist")
    if column in facts.columns and column not in facts.owned_columns:
        raise StatementError(
            f"table {table} already has a column {column!r} that PREDICT did not add; it is "
            "never overwritten: name the prediction column differently"
        )
    if key is None and len(facts.primary_key) > 1:
        raise StatementError(
            f"table {table} has a composite primary key {list(facts.primary_key)}; pass --key "
            "COLUMN, a column that identifies each row"
        )
    if key is None and facts.primary_key:
        key = facts.primary_key[0]
    if key is not None:
        if key not in facts.columns:
            raise StatementError(f"--key {key!r} is not a column of {table}")
        return WritePlan("fill", key=key, carry=() if key in selected else (key,))
    carry = tuple(c for c in facts.columns if c != column)
    return WritePlan("rewrite", carry=carry)
