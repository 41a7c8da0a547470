"""Which tables and columns PREDICT created: the registry table `elasticdl_predict_owned`.

A registry table, not a table comment: SQLite has no comments, and the registry also records
the columns PREDICT added to a user's table, on all three databases alike. It lives in the
connection's default schema and is created on the first write; it is written in the same
transaction as the predictions (on MariaDB, whose DDL commits by itself, right after them),
so a failed PREDICT records nothing.

A whole-table entry also records the table's columns when PREDICT wrote it: a table the user
dropped and re-created under the same name no longer matches, and is theirs again.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

REGISTRY = "elasticdl_predict_owned"
_WHOLE = ""  # column_name of an entry for the whole table


def _registry() -> Any:
    from sqlalchemy import Column, MetaData, String, Table, Text

    return Table(
        REGISTRY,
        MetaData(),
        Column("table_schema", String(255), nullable=False),
        Column("table_name", String(255), nullable=False),
        Column("column_name", String(255), nullable=False),
        Column("table_columns", Text),
        Column("created_at", String(32)),
    )


def owned(
    conn: Any, schema: str | None, name: str, columns: Sequence[str]
) -> tuple[bool, tuple[str, ...]]:
    """(PREDICT created the whole table with these `columns`, the columns it added to it)."""
    from sqlalchemy import inspect, select

    if not inspect(conn).has_table(REGISTRY):
        return False, ()
    registry = _registry()
    rows = conn.execute(
        select(registry.c.column_name, registry.c.table_columns).where(
            registry.c.table_schema == (schema or ""), registry.c.table_name == name
        )
    ).all()
    whole = any(c == _WHOLE and json.loads(cols or "[]") == list(columns) for c, cols in rows)
    return whole, tuple(c for c, _ in rows if c != _WHOLE)


def record(
    conn: Any, schema: str | None, name: str, *, column: str = "", columns: Sequence[str] = ()
) -> None:
    """Record that PREDICT created table `name` (with `columns`) or added `column` to it."""
    from sqlalchemy import delete

    registry = _registry()
    registry.create(conn, checkfirst=True)
    where = [registry.c.table_schema == (schema or ""), registry.c.table_name == name]
    if column:
        where.append(registry.c.column_name == column)
    conn.execute(delete(registry).where(*where))
    conn.execute(
        registry.insert().values(
            table_schema=schema or "",
            table_name=name,
            column_name=column,
            table_columns=json.dumps(list(columns)) if not column else None,
            created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        )
    )
