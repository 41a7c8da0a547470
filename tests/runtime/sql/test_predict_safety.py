"""PREDICT never destroys what it did not create, and a failed PREDICT leaves no trace.

On real SQLite, PostgreSQL and MariaDB (servers on 127.0.0.1): a table PREDICT did not create
is refused, one it created may be replaced; the seed's statement works verbatim on a table
keyed by `id` (the key carried implicitly) and on a table with no key (rewritten atomically);
a failing UPDATE or a locked database leaves the table as it was and keeps the predictions
for `elasticdl sql --write_back`; a missing SQLite file is an error that creates nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from db_servers import database_fixture

import elasticdl
from elasticdl.runtime.data.employees import create_sample_database
from elasticdl.runtime.sql.convert import ConversionError, convert

pytestmark = pytest.mark.slow

database = database_fixture()

SEED_PREDICT = (
    "SELECT name, role FROM testdata PREDICT testdata.predicted_salary USING my_trained_model;"
)
JOB = {"num_workers": 1}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """A small regressor on `name, role -> salary`, trained once on SQLite."""
    root = tmp_path_factory.mktemp("models")
    url = f"sqlite:///{root / 'train.db'}"
    create_sample_database(url, employees=300, testdata=10)
    trained = elasticdl.sql(
        "SELECT name, role, salary FROM employee TRAIN regressor.DNN WITH hidden_units=[4], "
        "train.epochs=1 INTO my_trained_model",
        db=url,
        model_root=str(root),
        job_options=JOB,
    )
    assert trained.succeeded, trained.error
    return root


def run(db, sql: str, **kwargs) -> list:
    engine = db.engine()
    try:
        with engine.begin() as conn:
            result = conn.exec_driver_sql(sql)
            return result.all() if result.returns_rows else []
    finally:
        engine.dispose()


def tables(db) -> list[str]:
    engine = db.engine()
    try:
        return sorted(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def columns(db, table: str) -> list[str]:
    engine = db.engine()
    try:
        return [c["name"] for c in sa.inspect(engine).get_columns(table)]
    finally:
        engine.dispose()


def predict(db, models: Path, statement: str, tmp_path: Path, **kwargs):
    return elasticdl.sql(
        statement,
        db=db.url,
        model_root=str(models),
        work_dir=str(tmp_path),
        job_options=JOB,
        **kwargs,
    )


def keyed_testdata(db, rows: int = 30) -> None:
    """`testdata` with an `id` primary key, as in the design document's example."""
    run(
        db,
        "CREATE TABLE testdata (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL, "
        "role VARCHAR(40) NOT NULL, years INTEGER NOT NULL)",
    )
    values = ", ".join(
        f"({i}, 'n{i}', '{('dev', 'ops', 'qa')[i % 3]}', {i % 7})" for i in range(rows)
    )
    run(db, f"INSERT INTO testdata (id, name, role, years) VALUES {values}")


def test_predict_never_replaces_a_table_it_did_not_create(database, models, tmp_path):
    create_sample_database(database.url, employees=200, testdata=20)
    before = run(database, "SELECT id, salary FROM employee ORDER BY id")
    with pytest.raises(ValueError) as refused:
        predict(
            database,
            models,
            "SELECT name, role FROM testdata PREDICT employee.predicted_salary USING "
            "my_trained_model",
            tmp_path,
        )
    message = str(refused.value)
    assert "employee" in message and "not created by PREDICT" in message, message
    assert "testdata.predicted_salary" in message, "says how to proceed"
    assert run(database, "SELECT id, salary FROM employee ORDER BY id") == before
    assert columns(database, "employee")[-1] == "salary"


def test_a_table_predict_created_may_be_replaced(database, models, tmp_path):
    create_sample_database(database.url, employees=10, testdata=20)
    statement = (
        "SELECT name, role FROM testdata WHERE years >= {} PREDICT scored.s USING my_trained_model"
    )
    first = predict(database, models, statement.format(0), tmp_path)
    assert first.succeeded, first.error
    assert run(database, "SELECT COUNT(*) FROM scored")[0][0] == 20
    second = predict(database, models, statement.format(10), tmp_path)
    assert second.succeeded, second.error
    expected = run(database, "SELECT COUNT(*) FROM testdata WHERE years >= 10")[0][0]
    assert run(database, "SELECT COUNT(*) FROM scored")[0][0] == expected < 20
    # The same name, dropped and re-created by the user, is theirs again.
    run(database, "DROP TABLE scored")
    run(database, "CREATE TABLE scored (keep INTEGER)")
    with pytest.raises(ValueError, match="not created by PREDICT"):
        predict(database, models, statement.format(0), tmp_path)
    assert columns(database, "scored") == ["keep"]


def test_the_seed_statement_verbatim_on_a_table_keyed_by_id(database, models, tmp_path):
    keyed_testdata(database)
    result = predict(database, models, SEED_PREDICT, tmp_path)
    assert result.succeeded, result.error
    assert columns(database, "testdata") == ["id", "name", "role", "years", "predicted_salary"]
    rows = run(database, "SELECT id, predicted_salary FROM testdata")
    assert len(rows) == 30 and all(r[1] is not None for r in rows)
    again = predict(database, models, SEED_PREDICT, tmp_path)  # its own column: rewritten
    assert again.succeeded, again.error
    # A column PREDICT did not add is never overwritten.
    with pytest.raises(ValueError, match="already has a column 'years'"):
        predict(
            database,
            models,
            "SELECT name, role FROM testdata PREDICT testdata.years USING my_trained_model",
            tmp_path,
        )


def test_a_table_without_a_key_is_rewritten_with_one_more_column(database, models, tmp_path):
    run(
        database,
        "CREATE TABLE people (name VARCHAR(40), role VARCHAR(40), years INTEGER, score REAL)",
    )
    rows = [("a", "dev", 1, 0.5), ("a", "dev", 1, 0.5), ("b", "ops", 5, None), ("c", "qa", 9, 1.25)]
    rows += [(f"x{i}", "dev", i, i / 4) for i in range(20)]
    values = ", ".join(f"('{n}', '{r}', {y}, {'NULL' if s is None else s})" for n, r, y, s in rows)
    run(database, f"INSERT INTO people VALUES {values}")
    result = predict(
        database,
        models,
        "SELECT name, role FROM people WHERE years < 9 PREDICT people.guess USING my_trained_model",
        tmp_path,
    )
    assert result.succeeded, result.error
    assert columns(database, "people") == ["name", "role", "years", "score", "guess"]
    after = run(database, "SELECT name, role, years, score, guess FROM people")
    assert sorted((r[:4] for r in after), key=repr) == sorted(rows, key=repr), "the same rows"
    guess = {}
    for name, _, years, _, value in after:
        assert (value is None) == (years >= 9), (name, years, value)
        guess.setdefault(name, set()).add(value)
    assert len(guess["a"]) == 1, "equal rows get the same prediction"
    assert tables(database) == ["elasticdl_predict_owned", "people"], "no staging table left"
    again = predict(
        database,
        models,
        "SELECT name, role FROM people PREDICT people.guess USING my_trained_model",
        tmp_path,
    )
    assert again.succeeded, again.error
    assert run(database, "SELECT COUNT(*) FROM people WHERE guess IS NULL")[0][0] == 0


_REFUSE_UPDATES = {
    "sqlite": [
        "CREATE TRIGGER refuse BEFORE UPDATE ON testdata BEGIN "
        "SELECT RAISE(ABORT, 'updates refused'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'updates refused'; END $$",
        "CREATE TRIGGER refuse BEFORE UPDATE ON testdata FOR EACH ROW EXECUTE FUNCTION refuse()",
    ],
    "mariadb": [
        "CREATE TRIGGER refuse BEFORE UPDATE ON testdata FOR EACH ROW "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'updates refused'"
    ],
}


def test_a_failed_update_leaves_no_trace(database, models, tmp_path):
    keyed_testdata(database)
    for sql in _REFUSE_UPDATES[database.kind]:
        run(database, sql)
    before = run(database, "SELECT * FROM testdata ORDER BY id")
    result = predict(database, models, SEED_PREDICT, tmp_path)
    assert not result.succeeded
    assert "updates refused" in result.error and "--write_back" in result.error, result.error
    assert "\n" not in result.error
    assert columns(database, "testdata") == ["id", "name", "role", "years"]
    assert run(database, "SELECT * FROM testdata ORDER BY id") == before
    assert tables(database) == ["testdata"], "no registry, staging or temporary table left"


def _sql_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-P", "-m", "elasticdl", "sql", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_a_locked_database_keeps_the_predictions_for_a_retry(database, models, tmp_path):
    keyed_testdata(database)
    url = f"{database.url}?timeout=1"
    holder = sa.create_engine(database.url).raw_connection()
    try:
        holder.execute("BEGIN IMMEDIATE")  # a writer holds the database: reads pass, writes wait
        failed = _sql_cli(SEED_PREDICT, "--db", url, "--model_root", str(models), cwd=tmp_path)
    finally:
        holder.rollback()
        holder.close()
    assert failed.returncode == 1, failed.stderr
    last = failed.stderr.strip().splitlines()[-1]  # after the progress log lines
    assert last.startswith("elasticdl: predict failed: ") and "database is locked" in last, last
    assert "Traceback" not in failed.stderr
    kept = last.split("--write_back ", 1)[1].split()[0]
    assert Path(kept).is_dir()
    assert columns(database, "testdata") == ["id", "name", "role", "years"]
    retried = _sql_cli("--write_back", kept, "--db", url, cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    assert "30 prediction(s) written to testdata" in retried.stdout
    assert (
        run(database, "SELECT COUNT(*) FROM testdata WHERE predicted_salary IS NOT NULL")[0][0]
        == 30
    )
    assert not Path(kept).exists(), "kept predictions are removed once written"


def test_a_missing_sqlite_file_is_an_error_that_creates_nothing(models, tmp_path):
    missing = tmp_path / "missing.db"
    url = f"sqlite:///{missing}"
    with pytest.raises(ConversionError, match="no such SQLite database file"):
        convert(url, "SELECT 1", str(tmp_path / "out"))
    for statement in (
        SEED_PREDICT,
        "SELECT name, salary FROM employee TRAIN regressor.DNN INTO m",
    ):
        with pytest.raises(ValueError, match="no such SQLite database file"):
            elasticdl.sql(statement, db=url, model_root=str(models), work_dir=str(tmp_path))
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "elasticdl",
            "data",
            "convert",
            "--db",
            url,
            "--sql",
            "SELECT 1",
            "--output",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "no such SQLite database file" in done.stderr, done.stderr
    assert not missing.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_on_null_is_a_flag_and_a_with_key(database, models, tmp_path, capsys):
    from elasticdl.cli import main

    run(database, "CREATE TABLE staff (id INTEGER PRIMARY KEY, name TEXT, role TEXT, salary REAL)")
    values = ", ".join(
        f"({i}, 'n{i}', {'NULL' if i % 4 == 0 else repr('dev')}, {1000 + i})" for i in range(40)
    )
    run(database, f"INSERT INTO staff VALUES {values}")
    trained = elasticdl.sql(
        "SELECT name, role, salary FROM staff TRAIN regressor.DNN WITH hidden_units=[4], "
        "train.epochs=1, train.on_null='fill:0' INTO staff_model",
        db=database.url,
        model_root=str(tmp_path / "m"),
        job_options=JOB,
    )
    assert trained.succeeded and trained.rows == 40, trained.error
    statement = "SELECT name, role FROM staff PREDICT staff.guess USING my_trained_model"
    argv = ["sql", statement, "--db", database.url, "--model_root", str(models)]
    assert main(argv) == 2
    assert "--on_null skip" in capsys.readouterr().err
    assert main([*argv, "--on_null", "skip"]) == 0, capsys.readouterr().err
    assert "30 prediction(s) written to staff" in capsys.readouterr().out
    assert run(database, "SELECT COUNT(*) FROM staff WHERE guess IS NULL")[0][0] == 10
    assert main([*argv, "--on_null", "fill:x"]) == 0, capsys.readouterr().err
    assert run(database, "SELECT COUNT(*) FROM staff WHERE guess IS NULL")[0][0] == 0
    assert main([*argv, "--on_null", "nope"]) == 2
    assert "expected error, skip or fill:VALUE" in capsys.readouterr().err
