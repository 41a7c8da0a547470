"""The `elasticdl` command: real subprocesses, real files, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-P", "-m", "elasticdl", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"elasticdl {args} failed:\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="module")
def regression_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("regression")
    done = run_cli(
        "data",
        "gen",
        "regression",
        "--output",
        str(out),
        "--num_records",
        "300",
        "--records_per_file",
        "100",
    )
    assert "wrote 300 regression record(s) in 3 file(s)" in done.stdout
    return out


def test_gen_inspect_and_plan(regression_dir):
    done = run_cli("data", "inspect", f"{regression_dir}/*.recordio", "--json")
    report = json.loads(done.stdout)
    assert report["records"] == 300
    assert [f["records"] for f in report["files"]] == [100, 100, 100]
    assert all(f["compressors"] == ["snappy"] for f in report["files"])
    assert report["first_record"]["label"].startswith("float[1]")
    assert report["first_record"]["x0"].startswith("float[1]")

    text = run_cli("data", "inspect", str(regression_dir)).stdout
    assert "3 file(s), 300 record(s)" in text and "first record (tf.train.Example)" in text

    plan = run_cli("data", "plan", str(regression_dir), "--records_per_task", "64").stdout
    assert "6 task(s), 300 record(s)" in plan
    assert "[64, 100)" in plan


def test_zoo_command_shows_the_resolved_spec():
    done = run_cli("zoo", "show", "--model_def", "regressor.DNN", "--params", "hidden_units=[8]")
    assert "style:           keras_defaults" in done.stdout
    assert "regressor.DNN.default_loss" in done.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("data", "inspect", "/nonexistent/*.recordio"), "no data file matches"),
        (("zoo", "show", "--model_def", "nope.Model"), "no module 'nope'"),
        (
            ("zoo", "show", "--model_def", "regressor.DNN", "--params", "x=os.system('true')+1"),
            "literal",
        ),
        (
            ("zoo", "show", "--model_def", "regressor.DNN", "--params", "hiden_units=[1]"),
            "hidden_units",
        ),
    ],
)
def test_user_errors_are_one_line(args, fragment):
    done = run_cli(*args, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("elasticdl: error:"), done.stderr
    assert fragment in lines[0]


def test_corrupt_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.recordio"
    bad.write_bytes(b"\x00" * 64)
    done = run_cli("data", "inspect", str(bad), check=False)
    assert done.returncode == 2
    assert "bad.recordio" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (("--data", "/nonexistent/*.recordio"), "no data file matches"),
        (("--chaos", "worker1:explode@tasks=1"), "--chaos: cannot parse"),
        (("--num_workers", "0"), "--num_workers must be >= 1"),
        (("--model_def", "mnist.nothing.Model"), "no module 'mnist.nothing'"),
        # Right name, wrong type: the master builds the model before launching anything.
        (
            ("--params", "hidden_units='abc'", "--log_dir", "LOGS"),
            "the model cannot be built on the first records of ",
        ),
    ],
)
def test_train_bad_input_is_one_line(regression_dir, tmp_path, extra, fragment):
    args = [
        "train",
        "--model_def",
        "regressor.DNN",
        "--data",
        str(regression_dir),
        "--output",
        str(tmp_path / "model"),
    ]
    extra = tuple(str(tmp_path / "logs") if a == "LOGS" else a for a in extra)
    done = run_cli(*args, *extra, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], done.stderr
    assert not (tmp_path / "model").exists()
    assert not (tmp_path / "logs").exists()  # no process was started: none logged


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("predict", "--output", "OUT"), "--trained_model '/nonexistent/model' does not exist"),
        (("evaluate",), "--trained_model '/nonexistent/model' does not exist"),
        (("predict", "--output", "OUT", "--num_workers", "0"), "--num_workers must be >= 1"),
    ],
    ids=["predict", "evaluate", "workers"],
)
def test_predict_and_evaluate_bad_input_is_one_line(regression_dir, tmp_path, args, fragment):
    command, *rest = args
    rest = [str(tmp_path / "out") if a == "OUT" else a for a in rest]
    done = run_cli(
        command,
        "--data",
        str(regression_dir),
        "--trained_model",
        "/nonexistent/model",
        *rest,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], done.stderr
    assert not (tmp_path / "out").exists()


def test_data_convert_from_sqlite(tmp_path):
    import sqlite3

    db = tmp_path / "t.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x REAL, y INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i / 2, i) for i in range(50)])
    out = tmp_path / "converted"
    args = ["data", "convert", "--db", f"sqlite:///{db}", "--sql", "SELECT x, y FROM t"]
    done = run_cli(*args, "--output", str(out), "--label", "y", "--records_per_file", "20")
    assert "50 row(s) in 3 file(s)" in done.stdout
    assert json.loads((out / "schema.json").read_text())["label"] == "y"
    done = run_cli(*args, "--output", str(out), check=False)
    assert done.returncode == 2 and "already exists and is not empty" in done.stderr
    step = subprocess.run(
        [sys.executable, "-P", "-m", "elasticdl.steps.sql_to_recordio", *args[2:]]
        + ["--output", str(tmp_path / "again"), "--on_null", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert step.returncode == 2 and "expected error, skip or fill:VALUE" in step.stderr


@pytest.mark.parametrize(
    ("status", "events", "code"),
    [
        ("stopped", [{"kind": "job_stopped", "signal": "SIGINT"}], 130),
        ("stopped", [{"kind": "job_stopped", "signal": "SIGTERM"}], 143),
        ("stopped", [], 1),
        ("failed", [{"kind": "job_stopped", "signal": "SIGINT"}], 1),
    ],
)
def test_a_stopped_job_exits_128_plus_its_signal(status, events, code):
    from types import SimpleNamespace

    from elasticdl.cli import failed_status

    result = SimpleNamespace(status=status, report={"events": events})
    assert failed_status(result) == code
