"""SQLFlow's tutorial tables, in database-qualified schemas, on SQLite, PostgreSQL and MariaDB.

SQLFlow's tutorials and end-to-end tests read `iris.train` / `iris.test` (Fisher's iris
measurements: 110 training rows, 10 test rows) and `housing.train` / `housing.test` (13 numeric
features `f1`..`f13` and a `target`). The iris rows come from scikit-learn's copy of Fisher's
data (a dev dependency): the test rows are the 10 flowers of SQLFlow's iris.test
(doc/datasets/popularize_iris.sql), named by their index there; the training rows 110 of the
others. The housing rows are generated (a fixed seed): a target that a regressor can learn.

`schemas(database)` creates the schemas `iris` and `housing` (a schema in the test's database on
PostgreSQL, a database of their own on MariaDB; on SQLite, which has no other database without
ATTACH, tables `main.iris_train`, ...) and yields the prefix of each one's table names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import sqlalchemy as sa

IRIS_COLUMNS = ("sepal_length", "sepal_width", "petal_length", "petal_width", "class")
IRIS_TEST = (123, 99, 25, 100, 43, 90, 95, 8, 12, 81)
"""SQLFlow's iris.test, by index in scikit-learn's `load_iris()`."""
HOUSING_FEATURES = tuple(f"f{i}" for i in range(1, 14))


def iris_rows() -> tuple[list[tuple], list[tuple]]:
    """(110 training rows, SQLFlow's 10 test rows) of (4 floats, class id)."""
    from sklearn.datasets import load_iris

    iris = load_iris()
    rows = [(*(round(float(v), 1) for v in iris.data[i]), int(iris.target[i])) for i in range(150)]
    others = [i for i in range(150) if i not in IRIS_TEST]
    chosen = np.random.default_rng(20200101).choice(others, size=110, replace=False)
    return [rows[i] for i in sorted(chosen)], [rows[i] for i in IRIS_TEST]


def housing_rows(train: int = 200, test: int = 40) -> tuple[list[tuple], list[tuple]]:
    """Rows of 13 features and a target that depends on four of them (and noise)."""
    rng = np.random.default_rng(506)
    features = rng.normal(size=(train + test, 13)) * np.linspace(1, 20, 13) + 10
    target = 22 + 0.5 * features[:, 0] - 0.2 * features[:, 5] + 0.1 * features[:, 9]
    target = target + 0.3 * features[:, 12] + rng.normal(scale=0.5, size=train + test)
    rows = [
        (*(round(float(v), 3) for v in row), round(float(value), 3))
        for row, value in zip(features, target, strict=True)
    ]
    return rows[:train], rows[train:]


def _create(conn: Any, table: str, columns: list[tuple[str, str]], rows: list[tuple]) -> None:
    preparer = conn.dialect.identifier_preparer
    names = ", ".join(f"{preparer.quote(n)} {kind}" for n, kind in columns)
    conn.exec_driver_sql(f"CREATE TABLE {table} ({names})")
    marks = ", ".join(f":{i}" for i in range(len(columns)))
    conn.execute(
        sa.text(f"INSERT INTO {table} VALUES ({marks})"),
        [{str(i): v for i, v in enumerate(row)} for row in rows],
    )


@contextlib.contextmanager
def schemas(database: Any) -> Iterator[dict[str, str]]:
    """Create `iris` and `housing` with their tables; yield the prefix of their table names
    ({"iris": "iris.", "housing": "housing."}: `iris.train`); drop what was made afterwards."""
    from db_servers import shared_server

    made: list[str] = []
    if database.kind == "sqlite":
        names = {"iris": "main", "housing": "main"}
        tables = {"iris": "main.iris_", "housing": "main.housing_"}
    else:
        names = {"iris": "iris", "housing": "housing"}
        tables = {"iris": "iris.", "housing": "housing."}
        if database.kind == "mariadb":
            server = shared_server("mariadb")
            for name in names.values():
                with contextlib.suppress(Exception):  # what an interrupted run left
                    server.drop_database(name)
                server.create_database(name)
                made.append(name)
    engine = database.engine()
    try:
        with engine.begin() as conn:
            if database.kind == "postgresql":
                for name in names.values():
                    conn.exec_driver_sql(f"CREATE SCHEMA {name}")
            iris_train, iris_test = iris_rows()
            iris = [(c, "REAL" if c != "class" else "INTEGER") for c in IRIS_COLUMNS]
            _create(conn, f"{tables['iris']}train", iris, iris_train)
            _create(conn, f"{tables['iris']}test", iris, iris_test)
            housing_train, housing_test = housing_rows()
            housing = [(c, "REAL") for c in (*HOUSING_FEATURES, "target")]
            _create(conn, f"{tables['housing']}train", housing, housing_train)
            _create(conn, f"{tables['housing']}test", housing, housing_test)
        yield tables
    finally:
        engine.dispose()
        for name in made:
            shared_server("mariadb").drop_database(name)
