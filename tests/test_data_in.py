"""Users' own data, through the CLI as a user runs it.

`elasticdl data convert --from csv|parquet|tfrecord`: the same table in three formats converts
to the same records (with schema.json), and a model trains on the converted CSV and predicts on
the converted TFRecord. `elasticdl sql` trains on a statement with a common table expression."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from elasticdl.runtime.data.recordio import read_records

ROWS = 240


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-P", "-m", "elasticdl", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"elasticdl {args} failed:\n{done.stdout}\n{done.stderr}")
    return done


def _table() -> dict[str, list]:
    rng = np.random.default_rng(7)
    x0 = np.round(rng.uniform(-1, 1, ROWS), 3)
    x1 = np.round(rng.uniform(-1, 1, ROWS), 3)
    return {
        "id": list(range(ROWS)),
        "x0": [float(v) for v in x0],
        "x1": [float(v) for v in x1],
        "city": [["oslo", "lima", "pune"][i % 3] for i in range(ROWS)],
        "label": [float(v) for v in np.round(3 * x0 - 2 * x1 + 1, 3)],
    }


def _write_inputs(directory: Path, table: dict[str, list]) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import tensorflow as tf

    names = list(table)
    rows = list(zip(*table.values(), strict=True))
    (directory / "csv").mkdir()
    for part, chunk in enumerate((rows[:100], rows[100:])):  # two files, one header each
        with open(directory / "csv" / f"part-{part}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(names)
            writer.writerows(chunk)
    pq.write_table(pa.table(table), directory / "table.parquet", row_group_size=64)
    with tf.io.TFRecordWriter(str(directory / "table.tfrecord")) as writer:
        for row in rows:
            feature = {}
            for name, value in zip(names, row, strict=True):
                if isinstance(value, int):
                    feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
                elif isinstance(value, float):
                    feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
                else:
                    raw = [value.encode()]
                    feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=raw))
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
    return {
        "csv": directory / "csv",
        "parquet": directory / "table.parquet",
        "tfrecord": directory / "table.tfrecord",
    }


def _examples(directory: Path) -> list[dict]:
    from tensorflow.core.example import example_pb2

    found = []
    for file in sorted(directory.glob("*.recordio")):
        for record in read_records(str(file)):
            example = example_pb2.Example.FromString(record)
            row = {}
            for name, feature in example.features.feature.items():
                kind = feature.WhichOneof("kind")
                row[name] = list(getattr(feature, kind).value)
            found.append(row)
    return found


def test_csv_parquet_and_tfrecord_convert_alike_then_train_and_predict(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow", reason="--from parquet needs the parquet extra")
    table = _table()
    inputs = _write_inputs(tmp_path, table)
    converted = {}
    for fmt, location in inputs.items():
        out = tmp_path / f"converted-{fmt}"
        done = _cli(
            "data", "convert", "--from", fmt, "--input", str(location),
            "--output", str(out), "--label", "label", "--records_per_file", "100",
        )  # fmt: skip
        assert f"{ROWS} row(s) in 3 file(s)" in done.stdout, done.stdout
        schema = json.loads((out / "schema.json").read_text())
        assert schema["label"] == "label" and schema["input_format"] == fmt
        kinds = {c["name"]: c["dtype"] for c in schema["columns"]}
        assert kinds == {"id": "int64", "x0": "float", "x1": "float", "city": "bytes",
                         "label": "float"}  # fmt: skip
        converted[fmt] = out
    # The same rows, whatever the format (the CSV's two files read in order).
    rows = {fmt: _examples(out) for fmt, out in converted.items()}
    assert len(rows["csv"]) == ROWS
    assert rows["csv"] == rows["parquet"] == rows["tfrecord"]
    assert rows["csv"][5]["city"] == [b"pune"] and rows["csv"][5]["id"] == [5]

    model = tmp_path / "model"
    _cli(
        "train", "--model_def", "regressor.DNN", "--data", str(converted["csv"]),
        "--output", str(model), "--num_workers", "1", "--num_epochs", "4",
        "--minibatch_size", "16", "--records_per_task", "120",
        "--params", "hidden_units=[16], learning_rate=0.05",
    )  # fmt: skip
    predictions = tmp_path / "predictions"
    _cli(
        "predict", "--data", str(converted["tfrecord"]), "--trained_model", str(model),
        "--output", str(predictions), "--output_format", "csv", "--num_workers", "1",
    )  # fmt: skip
    predicted: dict[int, float] = {}
    for part in sorted(predictions.glob("*.csv")):
        with open(part, newline="") as f:
            for row in csv.DictReader(f):
                value = next(v for k, v in row.items() if k != "id")
                predicted[int(row["id"])] = float(value)
    assert sorted(predicted) == list(range(ROWS))
    errors = [abs(predicted[i] - table["label"][i]) for i in range(ROWS)]
    spread = float(np.std(table["label"]))
    print(f"mean absolute error {np.mean(errors):.3f}, label std {spread:.3f}")
    assert float(np.mean(errors)) < 0.25 * spread, (np.mean(errors), spread)


def test_convert_from_files_says_what_is_wrong_in_one_line(tmp_path: Path, capsys) -> None:
    from elasticdl.cli import main

    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3\n")
    cases = [
        (("--from", "csv", "--input", str(bad)), "line 3: 1 fields, the header names 2"),
        (("--from", "csv", "--input", str(tmp_path / "none.csv")), "no such file"),
        (("--from", "csv"), "needs --input"),
        (("--from", "tfrecord", "--input", str(bad)), "TFRecord file"),
        (("--input", str(bad)), "--from sql needs --db and --sql"),
    ]
    for args, fragment in cases:
        status = main(["data", "convert", *args, "--output", str(tmp_path / "o")])
        lines = capsys.readouterr().err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and fragment in lines[0], lines
        assert not (tmp_path / "o").exists()


def test_a_statement_with_a_common_table_expression_trains_on_sqlite(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "hr.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE emp (id INTEGER, years REAL, level REAL, salary REAL)")
        conn.executemany(
            "INSERT INTO emp VALUES (?, ?, ?, ?)",
            [(i, i % 20, i % 7, 1000 + 50 * (i % 20) + 80 * (i % 7)) for i in range(200)],
        )
    statement = (
        "WITH senior AS (SELECT years, level, salary FROM emp WHERE id >= 50) "
        "SELECT years, level, salary FROM senior "
        "TRAIN regressor.DNN WITH hidden_units=[8], train.epochs=2, engine.num_workers=1 "
        "LABEL salary INTO cte_model"
    )
    done = _cli("sql", statement, "--db", f"sqlite:///{db}", "--model_root", str(tmp_path))
    from elasticdl.runtime.trained_model import resolve_model_url

    run = resolve_model_url(str(tmp_path / "cte_model"))  # TRAIN INTO: a new run, LATEST on it
    report = json.loads((Path(run) / "job_report.json").read_text())
    assert report["status"] == "succeeded", done.stderr
    assert report["records"]["planned"] == 150 * 2  # the expression's rows, not the table's
    from elasticdl.runtime.trained_model import read_trained_model

    lineage = read_trained_model(str(tmp_path / "cte_model")).trained
    assert lineage.sql.startswith("WITH senior AS (")
