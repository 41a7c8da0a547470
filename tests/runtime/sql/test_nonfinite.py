"""Non-finite numbers (NaN, inf, -inf) in the data follow the --on_null rules: refused by default
naming the file and line (or row) and the column; statistics never see them; schema.json is
always strict JSON. CSV, Parquet and TFRecord files, SQLite and PostgreSQL columns."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from db_servers import database_fixture

from elasticdl.cli import main
from elasticdl.data_commands import convert_files
from elasticdl.runtime.data.recordio import read_records
from elasticdl.runtime.sql.convert import ConversionError, convert

database = database_fixture(kinds=["postgresql"])


def _csv(path: Path, rows: list[str], header: str = "a,b,y") -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def _strict_schema(output: Path) -> dict:
    """schema.json, read as strict JSON (NaN and Infinity are not JSON)."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"schema.json holds {constant}")

    return json.loads((output / "schema.json").read_text(), parse_constant=refuse)


def test_a_nan_cell_in_a_csv_file_is_refused_naming_its_line(tmp_path, capsys):
    rows = [f"{i / 3000},{i % 7},{i}" for i in range(3000)]
    rows[1500] = "nan,3,1500"
    data = _csv(tmp_path / "employees.csv", rows)
    code = main(["data", "convert", "--from", "csv", "--input", str(data), "--output", "x"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert err == (
        f"elasticdl: error: column 'a' holds nan in {data} line 1502, not a finite number "
        "(statistics and training need finite numbers); correct or remove that row, or pass "
        "--on_null skip (drop such rows) or --on_null fill:VALUE"
    )
    assert not (Path.cwd() / "x").exists()


@pytest.mark.parametrize("cell", ["inf", "-inf", "NaN", "-Infinity"])
def test_every_spelling_in_an_integer_column_counts_as_non_finite(tmp_path, cell):
    rows = [f"{i},{i % 7},{i}" for i in range(1200)]  # after the 1,000 rows that type columns
    rows[1100] = f"1100,{cell},1100"
    # A quoted field over three lines before it: the line number counts them.
    rows[10] = '10,3,"1\n0\n"'
    data = _csv(tmp_path / "ints.csv", rows)
    with pytest.raises(ConversionError, match=rf"column .b. holds {float(cell)} in .*line 1104,"):
        convert_files("csv", str(data), str(tmp_path / "out"), label="a")


def test_skip_drops_non_finite_rows_and_statistics_never_see_them(tmp_path):
    rows = [f"{i},{i % 7},{i}" for i in range(20)]
    rows[3], rows[9] = "inf,3,3", "9,nan,9"
    data = _csv(tmp_path / "d.csv", rows)
    result = convert_files("csv", str(data), str(tmp_path / "out"), on_null="skip", label="y")
    schema = _strict_schema(tmp_path / "out")
    assert result.rows == schema["rows"] == 18
    assert schema["rows_skipped_for_nonfinite"] == 2 and schema["rows_skipped_for_null"] == 0
    a, b, _ = schema["columns"]
    assert (a["nonfinite"], b["nonfinite"]) == (1, 1)
    kept = [i for i in range(20) if i not in (3, 9)]
    assert a["stats"]["count"] == 18 and a["stats"]["max"] == 19.0
    assert math.isclose(a["stats"]["mean"], sum(kept) / 18)
    filled = convert_files("csv", str(data), str(tmp_path / "f"), on_null="fill:0", label="y")
    assert filled.rows == 20 and _strict_schema(tmp_path / "f")["columns"][0]["stats"]["min"] == 0


def test_a_non_finite_fill_value_is_refused(tmp_path):
    data = _csv(tmp_path / "d.csv", ["1.5,2,3", "nan,2,3"])
    with pytest.raises(ConversionError, match="fill value must be a finite number"):
        convert_files("csv", str(data), str(tmp_path / "out"), on_null="fill:nan")


def test_a_type_change_in_a_csv_file_names_its_line_and_gives_no_sql_advice(tmp_path):
    rows = [f"{i},{i % 7},{i}" for i in range(3000)]
    rows[2500] = "2500,seven,5000"
    data = _csv(tmp_path / "d.csv", rows)
    with pytest.raises(ConversionError) as refused:
        convert_files("csv", str(data), str(tmp_path / "out"))
    text = str(refused.value)
    assert f"holds str 'seven' in {data} line 2502;" in text, text
    assert "SELECT" not in text and "correct that value" in text


def test_parquet_nan_and_inf_are_refused_naming_the_file_and_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    directory = tmp_path / "parquet"
    directory.mkdir()
    pq.write_table(pa.table({"x": [1.0, 2.0], "y": [0, 1]}), directory / "part-0.parquet")
    pq.write_table(
        pa.table({"x": [3.0, 4.0, float("inf")], "y": [2, 3, 4]}), directory / "part-1.parquet"
    )
    with pytest.raises(ConversionError, match=r"'x' holds inf in .*part-1.parquet row 3,"):
        convert_files("parquet", str(directory), str(tmp_path / "out"))
    convert_files("parquet", str(directory), str(tmp_path / "ok"), on_null="skip")
    assert _strict_schema(tmp_path / "ok")["columns"][0]["stats"]["max"] == 4.0


def test_a_tfrecord_nan_is_refused_naming_the_record(tmp_path):
    import tensorflow as tf

    path = tmp_path / "d.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for value in (0.5, 1.5, float("nan")):
            example = tf.train.Example()
            example.features.feature["x"].float_list.value.append(value)
            example.features.feature["y"].int64_list.value.append(1)
            writer.write(example.SerializeToString())
    with pytest.raises(ConversionError, match=r"'x' holds nan in .*d.tfrecord record 3,"):
        convert_files("tfrecord", str(path), str(tmp_path / "out"))


def test_an_sqlite_infinity_is_refused_naming_the_row_and_the_select(tmp_path):
    db = tmp_path / "t.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x REAL, y INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(0.5, 1), (9e999, 2), (1.5, 3)])
    url = f"sqlite:///{db}"
    with pytest.raises(ConversionError) as refused:
        convert(url, "SELECT x, y FROM t ORDER BY y", str(tmp_path / "out"))
    assert "column 'x' holds inf in row 2," in str(refused.value)
    assert "filter it in the SELECT" in str(refused.value)
    result = convert(url, "SELECT x, y FROM t", str(tmp_path / "ok"), on_null="fill:0")
    assert result.rows == 3
    records = list(read_records(str(tmp_path / "ok" / result.files[0])))
    assert len(records) == 3


def test_postgresql_real_nan_and_infinity_follow_the_rules(database, tmp_path):
    engine = database.engine()
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE t (id INTEGER, x REAL, z NUMERIC)"))
            conn.execute(
                sa.text(
                    "INSERT INTO t VALUES (1, 0.5, 1), (2, 'NaN', 2), (3, 'Infinity', 3), "
                    "(4, 2.5, 'NaN'), (5, 4.5, 5)"
                )
            )
    finally:
        engine.dispose()
    sql = "SELECT id, x, z FROM t ORDER BY id"
    with pytest.raises(ConversionError, match="column 'x' holds nan in row 2, "):
        convert(database.url, sql, str(tmp_path / "out"))
    result = convert(database.url, sql, str(tmp_path / "ok"), on_null="skip")
    schema = _strict_schema(tmp_path / "ok")
    assert result.rows == 2 and schema["rows_skipped_for_nonfinite"] == 3
    assert [c["nonfinite"] for c in schema["columns"]] == [0, 2, 1]
    assert schema["columns"][1]["stats"]["mean"] == 2.5
