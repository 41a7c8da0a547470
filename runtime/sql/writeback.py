"""Writing predictions back into a database table, atomically.

Two cases, as `SELECT ... PREDICT <table>.<column> USING <model>` needs them:

* **replace** (the result table is not read by the SELECT): the rows go into a staging table,
  which then takes the target's name in one step: in one transaction on PostgreSQL and SQLite
  (transactional DDL), with MySQL's atomic multi-table `RENAME TABLE` on MySQL/MariaDB. Readers
  see the old table or the new one, never a half-filled one.
* **add a column** (the SELECT reads the result table): the source rows are never dropped; the
  column is added if missing and filled by matching on the table's primary key (or a given
  key column) through a temporary table and one `UPDATE ... FROM` / `UPDATE ... JOIN`.

Identifiers come from the statement parser, which validated them; here they are also quoted
by SQLAlchemy for the database's dialect, never spliced into SQL text.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from elasticdl.runtime.sql.convert import ConversionError, redact_url

_INSERT_BATCH = 2000


def _sql_type(kind: str, dialect: str) -> Any:
    from sqlalchemy import BigInteger, Double, Text

    if kind == "int64":
        return BigInteger()
    if kind == "float":
        return Double()
    return Text()


def _split(table: str) -> tuple[str | None, str]:
    from elasticdl.runtime.sql.statements import split_identifier

    parts = split_identifier(table)
    if len(parts) > 2:
        raise ConversionError(f"table {table!r}: expected TABLE or SCHEMA.TABLE")
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def _batches(rows: Iterable[Sequence[Any]], names: Sequence[str]) -> Iterable[list[dict]]:
    batch: list[dict] = []
    for row in rows:
        batch.append(dict(zip(names, row, strict=True)))
        if len(batch) >= _INSERT_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def replace_table(
    db: str, table: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]
) -> int:
    """Create or replace `table` with `columns` ((name, kind) pairs) holding `rows`."""
    from sqlalchemy import Column, MetaData, Table, create_engine, inspect

    schema, name = _split(table)
    engine = create_engine(db)
    staging_name = f"{name}__staging_{uuid.uuid4().hex[:8]}"
    dialect = engine.dialect.name
    metadata = MetaData()
    staging = Table(
        staging_name,
        metadata,
        *[Column(c, _sql_type(kind, dialect)) for c, kind in columns],
        schema=schema,
    )
    names = [c for c, _ in columns]
    written = 0
    try:
        staging.create(engine)
        try:
            with engine.begin() as conn:
                for batch in _batches(rows, names):
                    conn.execute(staging.insert(), batch)
                    written += len(batch)
            quote = engine.dialect.identifier_preparer.quote
            qualified = (lambda n: f"{quote(schema)}.{quote(n)}") if schema else quote
            with engine.begin() as conn:
                exists = inspect(conn).has_table(name, schema=schema)
                if dialect in ("mysql", "mariadb"):
                    if exists:
                        old = f"{name}__old_{uuid.uuid4().hex[:8]}"
                        conn.exec_driver_sql(
                            f"RENAME TABLE {qualified(name)} TO {qualified(old)}, "
                            f"{qualified(staging_name)} TO {qualified(name)}"
                        )
                        conn.exec_driver_sql(f"DROP TABLE {qualified(old)}")
                    else:
                        conn.exec_driver_sql(
                            f"RENAME TABLE {qualified(staging_name)} TO {qualified(name)}"
                        )
                else:
                    if exists:
                        conn.exec_driver_sql(f"DROP TABLE {qualified(name)}")
                    conn.exec_driver_sql(
                        f"ALTER TABLE {qualified(staging_name)} RENAME TO {quote(name)}"
                    )
        except BaseException:
            with engine.begin() as conn:
                staging.drop(conn, checkfirst=True)
            raise
    finally:
        engine.dispose()
    return written


def fill_column(
    db: str,
    table: str,
    column: str,
    key: str | None,
    pairs: Iterable[tuple[Any, float]],
) -> int:
    """Add float `column` to `table` (if missing) and set it from (key value, prediction) pairs.

    `key` defaults to the table's single-column primary key.
    """
    from sqlalchemy import Column, MetaData, Table, create_engine, inspect, update

    schema, name = _split(table)
    engine = create_engine(db)
    dialect = engine.dialect.name
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table(name, schema=schema):
                raise ConversionError(f"table {table!r} does not exist in {redact_url(db)}")
            existing = {c["name"] for c in inspect(conn).get_columns(name, schema=schema)}
            if key is None:
                primary = inspect(conn).get_pk_constraint(name, schema=schema)
                found = primary.get("constrained_columns") or []
                if len(found) != 1:
                    raise ConversionError(
                        f"table {table!r} has no single-column primary key to match predictions "
                        "on; pass --key COLUMN (a column that identifies each row)"
                    )
                key = found[0]
            if key not in existing:
                raise ConversionError(f"--key {key!r} is not a column of {table!r}")
        quote = engine.dialect.identifier_preparer.quote
        qualified = f"{quote(schema)}.{quote(name)}" if schema else quote(name)
        if column not in existing:
            with engine.begin() as conn:
                kind = "DOUBLE PRECISION" if dialect == "postgresql" else "DOUBLE"
                if dialect == "sqlite":
                    kind = "REAL"
                conn.exec_driver_sql(f"ALTER TABLE {qualified} ADD COLUMN {quote(column)} {kind}")
        metadata = MetaData()
        target = Table(name, metadata, autoload_with=engine, schema=schema)
        values = Table(
            f"elasticdl_predictions_{uuid.uuid4().hex[:8]}",
            metadata,
            Column("k", target.c[key].type),
            Column("v", _sql_type("float", dialect)),
            prefixes=["TEMPORARY"],
        )
        written = 0
        with engine.begin() as conn:
            values.create(conn)
            for batch in _batches(pairs, ["k", "v"]):
                conn.execute(values.insert(), batch)
                written += len(batch)
            conn.execute(
                update(target).values({column: values.c.v}).where(target.c[key] == values.c.k)
            )
            values.drop(conn)
    finally:
        engine.dispose()
    return written
