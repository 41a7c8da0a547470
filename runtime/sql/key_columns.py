"""Key columns among the features of `SELECT ... TRAIN`: said, never trained on silently.

A key (a row's identity: `id`, a primary key) carries no signal a model should learn, and a
model that learns it fits the rows it saw. The zoo's table models (`zoo_common.tabular`,
behind regressor.DNN, classifier.DNN...) leave out a column named `id`; any other primary key
of a table the SELECT reads is a feature unless the SELECT leaves it out. `key_notes` says
which is which, in one line each, for `elasticdl sql` to print.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

EXCLUDED = ("id",)
"""Columns the zoo's table models never take as features (DatasetMetadata.feature_columns)."""


def key_notes(features: Sequence[str], primary_keys: Iterable[tuple[str, str]]) -> list[str]:
    """One note per key among `features`: `primary_keys` are (table, column) pairs of the
    tables the SELECT reads (pure: no database)."""
    notes = []
    for name in features:
        if name in EXCLUDED:
            notes.append(
                f"column {name!r} is left out of the features: the zoo's table models never "
                "train on a column named id"
            )
    for table, column in primary_keys:
        if column in features and column not in EXCLUDED:
            notes.append(
                f"warning: column {column!r}, the primary key of {table}, is a feature: the "
                f"model learns row identities; select the columns to learn from instead of "
                f"it (SELECT a, b, label FROM {table} ...) or name it id"
            )
    return notes


def primary_keys(db: str, tables: Sequence[str] | None) -> list[tuple[str, str]]:
    """(table, column) for each primary-key column of `tables` in `db`; [] when the FROM
    clause is not a plain list of tables or a table cannot be inspected (a view, say)."""
    from sqlalchemy import create_engine, inspect

    from elasticdl.runtime.sql.statements import split_identifier

    found: list[tuple[str, str]] = []
    if not tables:
        return found
    engine = create_engine(db)
    try:
        with engine.connect() as conn:
            inspector = inspect(conn)
            for table in tables:
                parts = split_identifier(table)
                schema, name = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[-1])
                try:
                    key = inspector.get_pk_constraint(name, schema=schema)
                except Exception:  # noqa: BLE001 - a note is informative, never vital
                    continue
                found += [(table, column) for column in key.get("constrained_columns") or []]
    finally:
        engine.dispose()
    return found
