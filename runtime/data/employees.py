"""A generated HR database for the SQL demo and tests: tables `employee` and `testdata`.

    employee(id INTEGER PRIMARY KEY, name TEXT UNIQUE, role TEXT, department TEXT,
             years INTEGER, salary REAL)
    testdata(name TEXT PRIMARY KEY, role TEXT, department TEXT, years INTEGER, salary REAL)

A salary is its role's base pay, plus pay for years of service, plus noise, so a model that
sees the role predicts it far better than the mean, and one that also sees the years better
still. `testdata` holds other people (for `PREDICT testdata.predicted_salary`); its true
salaries are kept so predictions can be scored. Rows are drawn from a seeded generator: the
same arguments give the same tables on every database.
"""

from __future__ import annotations

import numpy as np

ROLES = {
    "engineer": ("engineering", 7200.0),
    "senior engineer": ("engineering", 9400.0),
    "manager": ("engineering", 10500.0),
    "analyst": ("finance", 5600.0),
    "accountant": ("finance", 5100.0),
    "designer": ("product", 6100.0),
    "recruiter": ("people", 4700.0),
    "support": ("operations", 3900.0),
}
PAY_PER_YEAR = 140.0
NOISE_STD = 250.0
_FIRST = "ada alan barbara claude dennis edsger frances grace john ken linus margaret".split()
_LAST = "lovelace turing liskov shannon ritchie dijkstra allen hopper backus thompson".split()


def employee_rows(n: int, seed: int = 0, first_id: int = 0) -> list[tuple]:
    """(id, name, role, department, years, salary) rows, names unique across ids."""
    rng = np.random.default_rng(seed)
    roles = list(ROLES)
    picks = rng.integers(0, len(roles), n)
    years = rng.integers(0, 31, n)
    noise = rng.normal(0.0, NOISE_STD, n)
    rows = []
    for i in range(n):
        ident = first_id + i
        role = roles[int(picks[i])]
        department, base = ROLES[role]
        name = f"{_FIRST[ident % len(_FIRST)]} {_LAST[(ident // len(_FIRST)) % len(_LAST)]} {ident}"
        salary = round(base + PAY_PER_YEAR * int(years[i]) + float(noise[i]), 2)
        rows.append((ident, name, role, department, int(years[i]), salary))
    return rows


def create_sample_database(db: str, employees: int = 4000, testdata: int = 500) -> None:
    """Create (or replace) `employee` and `testdata` in database `db` (a SQLAlchemy URL)."""
    from sqlalchemy import Column, Float, Integer, MetaData, Table, Text, create_engine

    metadata = MetaData()
    employee = Table(
        "employee",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("name", Text, nullable=False),
        Column("role", Text, nullable=False),
        Column("department", Text, nullable=False),
        Column("years", Integer, nullable=False),
        Column("salary", Float(53), nullable=False),
    )
    test = Table(
        "testdata",
        metadata,
        # A bounded VARCHAR: MySQL cannot index TEXT.
        Column("name", Text().with_variant(_varchar(), "mysql", "mariadb"), primary_key=True),
        Column("role", Text, nullable=False),
        Column("department", Text, nullable=False),
        Column("years", Integer, nullable=False),
        Column("salary", Float(53), nullable=False),
    )
    engine = create_engine(db)
    try:
        metadata.drop_all(engine)
        metadata.create_all(engine)
        names = [c.name for c in employee.columns]
        with engine.begin() as conn:
            rows = employee_rows(employees, seed=1)
            conn.execute(employee.insert(), [dict(zip(names, r, strict=True)) for r in rows])
            rows = employee_rows(testdata, seed=2, first_id=employees)
            conn.execute(
                test.insert(),
                [dict(zip(names[1:], r[1:], strict=True)) for r in rows],
            )
    finally:
        engine.dispose()


def _varchar() -> object:
    from sqlalchemy import String

    return String(120)
