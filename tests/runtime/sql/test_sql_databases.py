"""SQL on real databases: SQLite, and PostgreSQL and MariaDB servers on 127.0.0.1.

The seed's statements run end to end on each database; the same table converts to the same
records everywhere; bad statements and inputs fail with one clear message and never print the
database password.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from db_servers import database_fixture, unreachable_url

import elasticdl
from elasticdl.runtime.data.employees import create_sample_database
from elasticdl.runtime.data.recordio import read_records
from elasticdl.runtime.model_spec import ModelZooError
from elasticdl.runtime.sql.convert import ConversionError, convert
from elasticdl.runtime.sql.statements import StatementError

pytestmark = pytest.mark.slow

database = database_fixture(scope="module")

TRAIN = (
    "SELECT name, role, salary FROM employee TRAIN regressor.DNN WITH "
    "hidden_units=[10, 100, 20, 5], learning_rate=0.01 INTO my_trained_model;"
)
PREDICT = (
    "SELECT name, role FROM testdata PREDICT testdata.predicted_salary USING my_trained_model;"
)


@pytest.fixture(scope="module")
def hr(database):
    create_sample_database(database.url, employees=3000, testdata=400)
    return database


def converted(db_url: str, out: Path) -> list[bytes]:
    convert(
        db_url,
        "SELECT id, name, role, department, years, salary FROM employee ORDER BY id",
        str(out),
        records_per_file=1000,
        label="salary",
    )
    return [r for f in sorted(out.glob("*.recordio")) for r in read_records(str(f))]


@pytest.fixture(scope="module")
def sqlite_records(tmp_path_factory) -> list[bytes]:
    root = tmp_path_factory.mktemp("reference")
    url = f"sqlite:///{root / 'hr.db'}"
    create_sample_database(url, employees=3000, testdata=400)
    return converted(url, root / "out")


def test_the_same_table_converts_to_identical_records(hr, sqlite_records, tmp_path):
    records = converted(hr.url, tmp_path / "out")
    assert len(records) == 3000
    assert records == sqlite_records


@pytest.fixture(scope="module")
def models(hr, tmp_path_factory) -> Path:
    """The seed's TRAIN statement, run once per database."""
    root = tmp_path_factory.mktemp("models")
    trained = elasticdl.sql(TRAIN, db=hr.url, model_root=str(root))
    assert trained.succeeded, trained.error
    latest = (root / "my_trained_model" / "LATEST").read_text().strip()
    assert trained.rows == 3000 and latest == trained.run
    assert (Path(latest) / "trained_model.pb").exists()
    assert trained.notes == ["no LABEL clause: the last selected column 'salary' is the label"]
    from elasticdl.runtime.trained_model import read_trained_model

    lineage = read_trained_model(str(root / "my_trained_model")).trained
    assert lineage.sql == "SELECT name, role, salary FROM employee"
    assert lineage.label_column == "salary" and lineage.schema_json
    assert lineage.db_url.split(":")[0] in ("sqlite", "postgresql+psycopg", "mysql+pymysql")
    assert not hr.password or hr.password not in lineage.SerializeToString().decode("latin-1")
    return root


def query(database, sql: str) -> list:
    engine = database.engine()
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql(sql).all()
    finally:
        engine.dispose()


def test_seed_statements_train_then_predict_into_the_table(hr, models):
    predicted = elasticdl.sql(PREDICT, db=hr.url, model_root=str(models))
    assert predicted.succeeded, predicted.error
    rows = query(hr, "SELECT name, salary, predicted_salary FROM testdata ORDER BY name")
    assert len(rows) == 400 and predicted.rows == 400
    assert all(r[2] is not None for r in rows), "one prediction per row"
    truth = np.array([r[1] for r in rows])
    mse = float(np.mean((truth - np.array([r[2] for r in rows])) ** 2))
    naive = float(np.var(truth))
    assert mse < 0.5 * naive, f"mse {mse:,.0f} vs predicting the mean {naive:,.0f}"


def test_predict_into_another_table_replaces_it_atomically(hr, models):
    engine = hr.engine()
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS scored")
    finally:
        engine.dispose()
    statement = (
        "SELECT name, role, years FROM testdata WHERE years >= {} PREDICT scored.salary "
        "USING my_trained_model"
    )
    first = elasticdl.sql(statement.format(0), db=hr.url, model_root=str(models))
    assert first.succeeded and first.rows == 400, first.error
    # A table an earlier PREDICT created may be replaced (any other is refused:
    # test_predict_safety.py).
    result = elasticdl.sql(statement.format(15), db=hr.url, model_root=str(models))
    assert result.succeeded, result.error
    expected = query(hr, "SELECT COUNT(*) FROM testdata WHERE years >= 15")[0][0]
    rows = query(hr, "SELECT name, role, years, salary FROM scored")
    assert len(rows) == expected == result.rows and len({r[0] for r in rows}) == expected
    assert all(r[2] >= 15 and r[3] > 0 for r in rows)
    import sqlalchemy

    engine = hr.engine()
    try:
        tables = sqlalchemy.inspect(engine).get_table_names()
    finally:
        engine.dispose()
    assert not [t for t in tables if "__staging_" in t or "__old_" in t], tables


@pytest.mark.parametrize(
    ("statement", "error", "fragment"),
    [
        ("SELECT name FROM employee TRAIN regressor.DNN WITH x=1 INT0 m", StatementError, "^"),
        ("SELECT name, salary FROM employee TRAIN regressor.Nope INTO m", ModelZooError, "Nope"),
        (
            "SELECT name, salary FROM employee TRAIN regressor.DNN WITH train.epohcs=2 INTO m",
            StatementError,
            "did you mean 'train.epochs'",
        ),
        (
            "SELECT name, salary FROM employee TRAIN regressor.DNN LABEL wage INTO m",
            ConversionError,
            "--label 'wage' is not a selected column",
        ),
        (
            "SELECT name FROM employee PREDICT x; DROP TABLE employee; --.c USING m",
            StatementError,
            "^",
        ),
        (
            "SELECT name, salary FROM employee TRAIN regressor.DNN LABEL salary;DROP INTO m",
            StatementError,
            "^",
        ),
        ("SELECT name FROM employee; DROP TABLE employee TRAIN regressor.DNN INTO m", None, ""),
    ],
    ids=[
        "syntax",
        "unknown-model",
        "unknown-with-key",
        "missing-label",
        "injected-table",
        "injected-label",
        "stacked",
    ],
)
def test_bad_statements_are_clear(hr, tmp_path, statement, error, fragment):
    with pytest.raises(error or ValueError) as caught:
        elasticdl.sql(statement, db=hr.url, model_root=str(tmp_path / "models"))
    assert fragment in str(caught.value)
    assert not hr.password or hr.password not in str(caught.value)
    engine = hr.engine()
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT COUNT(*) FROM employee").scalar() == 3000
    finally:
        engine.dispose()
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)
def test_a_query_that_fails_while_its_rows_stream_is_one_clear_error(database, tmp_path):
    # Division by zero at row 5,000, past the first batches: PostgreSQL raises it mid-stream;
    # SQLite gives NULL instead, which --on_null error refuses. (MariaDB stops recursive CTEs
    # at 1,000 rows by default.)
    sql = (
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 6000) "
        "SELECT x, 1.0 / (x - 5000) AS y FROM n"
    )
    with pytest.raises(ConversionError) as err:
        convert(database.url, sql, str(tmp_path / "out"), batch_rows=1024)
    message = str(err.value)
    assert "\n" not in message and not (tmp_path / "out").exists()
    if database.kind == "postgresql":
        assert "while its rows were read: division by zero" in message, message
    else:
        assert "column 'y' is NULL" in message, message
    password = __import__("sqlalchemy").make_url(database.url).password
    if password:
        assert password not in message


def test_database_down_and_password_never_printed(database, tmp_path):
    url = unreachable_url(database.kind)
    done = subprocess.run(
        [sys.executable, "-P", "-m", "elasticdl", "sql", TRAIN, "--db", url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    # A SQLite file that does not exist is never created (connecting would create it).
    expected = "no such SQLite database file" if database.kind == "sqlite" else "cannot connect to"
    assert len(lines) == 1 and expected in lines[0], done.stderr
    password = __import__("sqlalchemy").make_url(url).password
    if password:
        assert password not in done.stdout + done.stderr


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_train_predict_evaluate_take_sql_instead_of_data(hr, models, tmp_path):
    trained = elasticdl.train(
        model_def="regressor.DNN",
        sql="SELECT role, years, salary FROM employee WHERE years < 10",
        db=hr.url,
        output=str(tmp_path / "model"),
        params="hidden_units=[4]",
        num_workers=1,
    )
    assert trained.succeeded, trained.error
    expected = query(hr, "SELECT COUNT(*) FROM employee WHERE years < 10")[0][0]
    assert trained.report["records"]["trained"] == expected
    model = str(models / "my_trained_model")
    predicted = elasticdl.predict(
        sql="SELECT name, role FROM testdata",
        db=hr.url,
        trained_model=model,
        output=str(tmp_path / "predictions"),
        keep_columns="name",
        num_workers=1,
    )
    assert predicted.succeeded, predicted.error
    assert predicted.report["records"] == {"input": 400, "written": 400}
    evaluated = elasticdl.evaluate(
        sql="SELECT name, role, salary FROM testdata", db=hr.url, trained_model=model
    )
    assert evaluated.succeeded, evaluated.error
    truth = np.array([r[0] for r in query(hr, "SELECT salary FROM testdata")])
    assert evaluated.metrics["mse"] < 0.5 * float(np.var(truth))
    with pytest.raises(ValueError, match="either --data or --sql"):
        elasticdl.evaluate(sql="SELECT 1", db=hr.url, data="x", trained_model=model)
    with pytest.raises(ValueError, match="--sql needs --db"):
        elasticdl.train(model_def="regressor.DNN", sql="SELECT 1", output=str(tmp_path / "o"))
