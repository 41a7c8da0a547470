"""Writing predictions back into a database table, atomically, destroying nothing.

Three ways, as `predict_plan.plan_write` decides them for `SELECT ... PREDICT <table>.<column>`:

* **create / replace** (the SELECT does not read the table): the rows go into a staging table,
  which then takes the target's name in one step: in one transaction on PostgreSQL and SQLite
  (transactional DDL), with MySQL's atomic multi-table `RENAME TABLE` on MySQL/MariaDB. Only a
  table an earlier PREDICT created is replaced (`ownership`); any other is refused.
* **fill** (the SELECT reads the table, which has a key): the column is added if missing and
  filled by matching on the key through a temporary table and one `UPDATE ... FROM` / `JOIN`,
  in one transaction; on MariaDB, whose `ALTER TABLE` commits by itself, an added column is
  dropped again when the update fails.
* **rewrite** (the SELECT reads a table with no key): a copy of the table with one more column
  takes its place as above; rows are matched on the text of their columns, which the
  conversion carried (`carry_items`). Columns keep their types and nullability; indexes and
  constraints of the old table are not copied.

A column PREDICT did not add is never overwritten. Identifiers come from the statement parser
or the database's own catalog and are quoted by SQLAlchemy for the dialect; values are bound.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from elasticdl.runtime.sql import ownership
from elasticdl.runtime.sql.convert import ConversionError, carried_line, redact_url
from elasticdl.runtime.sql.predict_plan import TargetFacts, WritePlan

_BATCH = 2000
CARRY_PREFIX = "__elasticdl_carry_"
_MYSQL = ("mysql", "mariadb")


def _sql_type(kind: str) -> Any:
    from sqlalchemy import BigInteger, Double, Text

    return {"int64": BigInteger(), "float": Double()}.get(kind, Text())


def _split(table: str) -> tuple[str | None, str]:
    from elasticdl.runtime.sql.statements import split_identifier

    parts = split_identifier(table)
    if len(parts) > 2:
        raise ConversionError(f"table {table!r}: expected TABLE or SCHEMA.TABLE")
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def _batches(rows: Iterable[Sequence[Any]], names: Sequence[str]) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for row in rows:
        batch.append(dict(zip(names, row, strict=True)))
        if len(batch) >= _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


@contextlib.contextmanager
def engine_for(db: str) -> Iterator[Any]:
    """A SQLAlchemy engine for `db`, disposed on exit."""
    from sqlalchemy import create_engine

    engine = create_engine(db)
    try:
        yield engine
    finally:
        engine.dispose()


@contextlib.contextmanager
def _transaction(engine: Any) -> Iterator[Any]:
    """engine.begin(), where SQLite's DDL is transactional too: Python's sqlite3 begins a
    transaction only before DML, so the DROP and RENAME would commit one by one."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        yield conn


def _qualified(engine: Any, schema: str | None, name: str) -> str:
    quote = engine.dialect.identifier_preparer.quote
    return f"{quote(schema)}.{quote(name)}" if schema else quote(name)


def describe(db: str, table: str) -> TargetFacts:
    """What `plan_write` needs to know about `table`."""
    from sqlalchemy import inspect

    schema, name = _split(table)
    with engine_for(db) as engine:
        with engine.connect() as conn:
            if not inspect(conn).has_table(name, schema=schema):
                return TargetFacts(exists=False)
        return _describe(engine, schema, name)


def carry_items(db: str, plan: WritePlan) -> list[str]:
    """SELECT items carrying `plan.carry` through the conversion, named CARRY_PREFIX<i>: the
    key as it is (fill), or each column as text (rewrite; read back the same way here)."""
    from sqlalchemy import String, cast, column

    with engine_for(db) as engine:
        items = []
        for i, name in enumerate(plan.carry):
            value = column(name) if plan.mode == "fill" else cast(column(name), String())
            alias = engine.dialect.identifier_preparer.quote(f"{CARRY_PREFIX}{i}")
            items.append(f"{value.compile(dialect=engine.dialect)} AS {alias}")
        return items


def replace_table(
    db: str, table: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]
) -> int:
    """Create `table` with `columns` ((name, kind) pairs) holding `rows`, or replace it when an
    earlier PREDICT created it; ConversionError for any other existing table."""
    from sqlalchemy import Column, MetaData, Table

    schema, name = _split(table)
    names = [c for c, _ in columns]

    def decide(conn: Any, old: Sequence[str] | None) -> Sequence[str] | None:
        ours = old is None or ownership.owned(conn, schema, name, old)[0]
        return names if ours else None

    with engine_for(db) as engine:
        staging = Table(
            f"{name}__staging_{uuid.uuid4().hex[:8]}",
            MetaData(),
            *[Column(c, _sql_type(kind)) for c, kind in columns],
            schema=schema,
        )
        written = 0
        with _swapped_in(engine, staging, table, decide) as conn:
            staging.create(conn)
            for batch in _batches(rows, names):
                conn.execute(staging.insert(), batch)
                written += len(batch)
    return written


@contextlib.contextmanager
def _swapped_in(engine: Any, staging: Any, table: str, decide: Any) -> Iterator[Any]:
    """A transaction in which the caller creates and fills `staging`; then `staging` takes
    `table`'s place (`_take_place`): in the same transaction where DDL is transactional, in a
    transaction of its own on MySQL/MariaDB (their DDL commits). On any failure the staging
    table is dropped, so a failed write leaves no trace."""
    try:
        with _transaction(engine) as conn:
            yield conn
            if engine.dialect.name not in _MYSQL:
                _take_place(conn, engine, table, staging.name, decide)
        if engine.dialect.name in _MYSQL:
            with engine.begin() as conn:
                _take_place(conn, engine, table, staging.name, decide)
    except BaseException:
        with engine.begin() as conn:
            staging.drop(conn, checkfirst=True)
        raise


def _take_place(conn: Any, engine: Any, table: str, staging: str, decide: Any) -> None:
    """Give `staging` the name of `table`, replacing it: atomically, and only where
    `decide(conn, the existing table's columns or None)` says PREDICT may, returning what to
    record as PREDICT's: the new table's columns, or the name of the column it added."""
    from sqlalchemy import inspect

    schema, name = _split(table)
    found = inspect(conn)
    exists = found.has_table(name, schema=schema)
    old_columns = [c["name"] for c in found.get_columns(name, schema=schema)] if exists else []
    record = decide(conn, old_columns if exists else None)
    if record is None:
        raise ConversionError(
            f"table {table} exists and was not created by PREDICT or EVALUATE (or it changed "
            "meanwhile), so it is never replaced"
        )
    target, moved = _qualified(engine, schema, name), _qualified(engine, schema, staging)
    if engine.dialect.name in _MYSQL:
        old = _qualified(engine, schema, f"{name}__old_{uuid.uuid4().hex[:8]}")
        renames = f"{target} TO {old}, {moved} TO {target}" if exists else f"{moved} TO {target}"
        conn.exec_driver_sql(f"RENAME TABLE {renames}")
        if exists:
            conn.exec_driver_sql(f"DROP TABLE {old}")
    else:
        if exists:
            conn.exec_driver_sql(f"DROP TABLE {target}")
        quote = engine.dialect.identifier_preparer.quote
        conn.exec_driver_sql(f"ALTER TABLE {moved} RENAME TO {quote(name)}")
    if isinstance(record, str):
        ownership.record(conn, schema, name, column=record)
    else:
        ownership.record(conn, schema, name, columns=record)


def fill_column(
    db: str, table: str, column: str, key: str, pairs: Iterable[tuple[Any, Any]]
) -> int:
    """Add float `column` to `table` (if missing) and set it from (key value, prediction)
    pairs, in one transaction; nothing changes when it fails. ConversionError when the column
    exists and PREDICT did not add it."""
    from sqlalchemy import Column, MetaData, Table, update

    schema, name = _split(table)
    with engine_for(db) as engine:
        facts = _facts_for_update(engine, db, table, column, key)
        metadata = MetaData()
        target = Table(name, metadata, autoload_with=engine, schema=schema)
        values = Table(
            f"elasticdl_predictions_{uuid.uuid4().hex[:8]}",
            metadata,
            Column("k", target.c[key].type),
            Column("v", _sql_type("float")),
            prefixes=["TEMPORARY"],
        )
        add = column not in facts.columns
        if add:
            target.append_column(Column(column, _sql_type("float")))
        qualified = _qualified(engine, schema, name)
        quoted = engine.dialect.identifier_preparer.quote(column)
        alter = f"ALTER TABLE {qualified} ADD COLUMN {quoted} {_float_ddl(engine)}"
        mysql = engine.dialect.name in _MYSQL
        if add and mysql:
            with engine.begin() as conn:
                conn.exec_driver_sql(alter)  # commits by itself: undone below on failure
        try:
            written = 0
            with _transaction(engine) as conn:
                if add and not mysql:
                    conn.exec_driver_sql(alter)
                values.create(conn)
                for batch in _batches(pairs, ["k", "v"]):
                    conn.execute(values.insert(), batch)
                    written += len(batch)
                filled = update(target).values({column: values.c.v})
                conn.execute(filled.where(target.c[key] == values.c.k))
                values.drop(conn)
                ownership.record(conn, schema, name, column=column)
        except BaseException:
            if add and mysql:
                with engine.begin() as conn:
                    conn.exec_driver_sql(f"ALTER TABLE {qualified} DROP COLUMN {quoted}")
            raise
    return written


def _float_ddl(engine: Any) -> str:
    return {"postgresql": "DOUBLE PRECISION", "sqlite": "REAL"}.get(engine.dialect.name, "DOUBLE")


def _facts_for_update(
    engine: Any, db: str, table: str, column: str, key: str | None
) -> TargetFacts:
    """The target's facts, refusing a missing table or key and a column PREDICT did not add."""
    from sqlalchemy import inspect

    schema, name = _split(table)
    with engine.connect() as conn:
        if not inspect(conn).has_table(name, schema=schema):
            raise ConversionError(f"table {table!r} does not exist in {redact_url(db)}")
    facts = _describe(engine, schema, name)
    if key is not None and key not in facts.columns:
        raise ConversionError(f"--key {key!r} is not a column of {table!r}")
    if column in facts.columns and column not in facts.owned_columns:
        raise ConversionError(
            f"table {table} already has a column {column!r} that PREDICT did not add; it is "
            "never overwritten: name the prediction column differently"
        )
    return facts


def _describe(engine: Any, schema: str | None, name: str) -> TargetFacts:
    from sqlalchemy import inspect

    with engine.connect() as conn:
        found = inspect(conn)
        columns = tuple(c["name"] for c in found.get_columns(name, schema=schema))
        key = found.get_pk_constraint(name, schema=schema).get("constrained_columns") or []
        whole, added = ownership.owned(conn, schema, name, columns)
    return TargetFacts(True, whole, columns, tuple(key), added)


def rewrite_with_column(
    db: str, table: str, column: str, kind: str, predictions: Mapping[str, Any]
) -> int:
    """Replace `table` by a copy with `column` (`kind`) set from `predictions`, keyed by
    `carried_line` of the text of the row's other columns (NULL where no prediction)."""
    from sqlalchemy import Column, MetaData, String, Table, cast, select

    schema, name = _split(table)
    with engine_for(db) as engine:
        facts = _facts_for_update(engine, db, table, column, None)
        metadata = MetaData()
        target = Table(name, metadata, autoload_with=engine, schema=schema)
        kept = [c for c in target.columns if c.name != column]
        staging = Table(
            f"{name}__staging_{uuid.uuid4().hex[:8]}",
            metadata,
            *[Column(c.name, c.type, nullable=c.nullable) for c in kept],
            Column(column, _sql_type(kind)),
            schema=schema,
        )
        texts = [cast(c, String()) for c in kept]
        names = [c.name for c in kept] + [column]
        mysql = engine.dialect.name in _MYSQL

        def decide(conn: Any, old: Sequence[str] | None) -> str | None:
            return column if old is not None and tuple(old) == facts.columns else None

        matched = 0
        with _swapped_in(engine, staging, table, decide) as conn:
            if engine.dialect.name == "postgresql":
                qualified = _qualified(engine, schema, name)
                conn.exec_driver_sql(f"LOCK TABLE {qualified} IN SHARE MODE")
            staging.create(conn)
            # pymysql cannot run the inserts while an unbuffered result is open
            result = conn.execute(select(*texts, *kept).execution_options(stream_results=not mysql))
            for part in iter(lambda: result.fetchmany(_BATCH), []):
                rows = []
                for row in part:
                    value = predictions.get(carried_line(row[: len(kept)]))
                    matched += value is not None
                    rows.append((*row[len(kept) :], value))
                conn.execute(staging.insert(), [dict(zip(names, r, strict=True)) for r in rows])
            result.close()  # PostgreSQL drops no table an open cursor reads
    return matched
