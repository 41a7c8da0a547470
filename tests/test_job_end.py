"""What a user reads when a training job ends, through the CLI: the final metrics, the loss
with its units, the TensorBoard command, a word on key columns, and no internal temporary
folder in any log line."""

from __future__ import annotations

import json
import logging
import re
import tempfile
from pathlib import Path

import pytest

from elasticdl.cli import main
from elasticdl.job_summary import ended_lines
from elasticdl.runtime.sql.key_columns import key_notes


def test_ended_lines_say_metrics_loss_units_and_the_tensorboard_command(tmp_path):
    (tmp_path / "m" / "tensorboard").mkdir(parents=True)
    report = {
        "metrics": {"mse": 0.25, "mae": 0.4},
        "evaluation": [{"model_version": 7, "metrics": {}}],
        "final_loss": 0.0312,
        "loss_units": "standardized label units",
    }
    assert ended_lines(report, str(tmp_path / "m")) == [
        "metrics: mae=0.4, mse=0.25 (evaluation at model version 7)",
        "training loss: 0.0312 (last minibatch), in standardized label units",
        f"training curves: tensorboard --logdir {tmp_path / 'm' / 'tensorboard'}",
    ]
    # No metrics, no units, no local event files: nothing made up.
    assert ended_lines({"final_loss": 1.5}, str(tmp_path / "none")) == [
        "training loss: 1.5 (last minibatch)"
    ]
    assert ended_lines({}, "gs://b/m") == [
        "training curves: tensorboard --logdir gs://b/m/tensorboard"
    ]


def test_key_notes_say_id_is_left_out_and_warn_of_other_primary_keys():
    notes = key_notes(["id", "name", "years"], [("employee", "id")])
    assert len(notes) == 1 and "'id' is left out of the features" in notes[0]
    notes = key_notes(["emp_no", "years"], [("staff", "emp_no"), ("staff", "gone")])
    assert len(notes) == 1 and notes[0].startswith("warning: column 'emp_no', the primary key")
    assert key_notes(["years"], [("staff", "emp_no")]) == []


@pytest.mark.slow
def test_sql_train_ends_with_metrics_units_curves_and_no_temporary_folder(tmp_path, capsys, caplog):
    db = f"sqlite:///{tmp_path / 'hr.db'}"
    assert main(["data", "sample_db", "--db", db, "--employees", "600", "--testdata", "10"]) == 0
    capsys.readouterr()
    caplog.set_level(logging.INFO)
    statement = (
        "SELECT * FROM employee TRAIN regressor.DNN WITH engine.num_workers=1, "
        "train.validation.select='SELECT * FROM employee WHERE id < 200' LABEL salary INTO m"
    )
    code = main(["sql", statement, "--db", db, "--model_root", str(tmp_path / "models")])
    out, err = capsys.readouterr()
    assert code == 0, err
    from elasticdl.runtime.trained_model import resolve_model_url

    model = Path(resolve_model_url(str(tmp_path / "models" / "m")))  # the run LATEST names
    assert model.parent == tmp_path / "models" / "m" / "runs"
    report = json.loads((model / "job_report.json").read_text())
    lines = out.splitlines()
    assert "note: column 'id' is left out of the features" in lines[0]
    assert lines[1] == (
        f"trained on 600 row(s); model {tmp_path / 'models' / 'm'} is now run {model.name} "
        f"({model})"
    )
    assert re.fullmatch(r"metrics: mae=\S+, mse=\S+ \(evaluation at model version \d+\)", lines[2])
    # regressor.DNN learns the standardized salary: its loss says so, the metrics are in dollars.
    assert report["loss_units"].startswith("standardized label units, (label - ")
    assert lines[3].startswith("training loss: ") and "standardized label units" in lines[3]
    assert report["metrics"]["mae"] > 100  # salaries: thousands of dollars, not sigmas
    assert lines[4] == f"training curves: tensorboard --logdir {model / 'tensorboard'}"
    assert (model / "tensorboard").is_dir()
    temporary = tempfile.gettempdir().rstrip("/") + "/"
    named = [
        r.getMessage()
        for r in caplog.records
        if temporary in r.getMessage() and "logs in" not in r.getMessage()
    ]
    assert named == []  # the job's own log folder ("logs in ...") is the one a user needs
