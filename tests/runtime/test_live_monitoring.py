"""Watching a running training job through the CLI, as a user does: TensorBoard event files
that hold scalars while the job still runs, `elasticdl status` answering for it, and, once it
ends, the per-epoch history in job_report.json and the training-curves PNG with the outputs.

The job cannot end before the test lets it: its workers wait at a gate file after their first
64 records (faulty.gated), so every check below waits on a condition, never on time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from elasticdl.runtime.data import generate as gen

FAULT_ZOO = Path(__file__).resolve().parents[1] / "support" / "fault_zoo"
BOUND_S = 240.0
"""Only a bound on a hung test: every wait ends on its condition."""


def _scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    import tensorflow as tf

    found: dict[str, list[tuple[int, float]]] = {}
    for file in sorted(directory.rglob("events.out.tfevents*")):
        try:
            for event in tf.compat.v1.train.summary_iterator(str(file)):
                for value in event.summary.value:
                    number = float(tf.make_ndarray(value.tensor))
                    found.setdefault(value.tag, []).append((event.step, number))
        except tf.errors.DataLossError:  # the record being written: read again later
            continue
    return found


def _wait_for(condition, what: str):
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {BOUND_S}s: {what}")


def test_live_tensorboard_and_status_while_a_job_runs_then_history_and_curves(tmp_path):
    data, output, logs, gate = (
        tmp_path / "data",
        tmp_path / "model",
        tmp_path / "logs",
        tmp_path / "gate",
    )
    gen.generate("regression", str(data), 256, records_per_file=256)
    train = [
        sys.executable, "-m", "elasticdl.cli", "train",
        "--model_zoo", str(FAULT_ZOO), "--model_def", "faulty.custom_model",
        "--dataset_fn", "faulty.gated", "--data", str(data), "--output", str(output),
        "--log_dir", str(logs), "--num_workers", "1", "--num_epochs", "2",
        "--records_per_task", "128", "--minibatch_size", "32",
        "--task_timeout_floor", "600",
    ]  # fmt: skip
    env = {**os.environ, "FAULTY_GATE": str(gate)}
    job = subprocess.Popen(
        train, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(job.stderr), daemon=True)
    reader.start()
    try:
        # TensorBoard, live: the loss of the minibatches before the gate, at the default place.
        tensorboard = output / "tensorboard"
        scalars = _wait_for(
            lambda: (s := _scalars(tensorboard)) and "loss" in s and s, "a loss in TensorBoard"
        )
        assert job.poll() is None, "the job ended before the gate opened"
        assert all(v == v for _, v in scalars["loss"])
        # `elasticdl status`, from the address the job logged.
        logged = _wait_for(
            lambda: next((line for line in list(lines) if "master on " in line), None),
            "the master's address in the log",
        )
        address = logged.split("master on ", 1)[1].split(",", 1)[0]
        status = subprocess.run(
            [sys.executable, "-m", "elasticdl.cli", "status", "--master", address,
             "--secret_file", str(logs)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert status.returncode == 0, status.stderr
        text = status.stdout
        assert "running" in text.splitlines()[0], text
        assert "/512 records" in text, text
        assert "worker 0: training" in text, text
        assert "recent failures: none" in text, text
        as_json = subprocess.run(
            [sys.executable, "-m", "elasticdl.cli", "status", "--master", address,
             "--secret_file", str(logs), "--json"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        report = json.loads(as_json.stdout)
        assert report["progress"]["records_planned"] == 512
        assert report["workers"] == [{"worker_id": 0, "state": "training"}]
        # Without the secret the master refuses: one line, exit 2.
        (tmp_path / "wrong.secret").write_text("nope")
        refused = subprocess.run(
            [sys.executable, "-m", "elasticdl.cli", "status", "--master", address,
             "--secret_file", str(tmp_path / "wrong.secret")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert refused.returncode == 2
        assert refused.stderr.startswith("elasticdl: error:"), refused.stderr
    finally:
        gate.write_text("open")
    try:
        assert job.wait(timeout=BOUND_S) == 0, "".join(lines)
    finally:
        if job.poll() is None:
            job.kill()
    reader.join(timeout=10)
    report = json.loads((output / "job_report.json").read_text())
    epochs = report["history"]["epochs"]
    assert [e["epoch"] for e in epochs] == [0, 1]
    assert all(e["losses_reported"] >= 1 and e["loss"] == e["loss"] for e in epochs)
    final = _scalars(output / "tensorboard")
    assert [step for step, _ in final["train/epoch_loss"]] == [1, 2]
    assert "train/records_per_second" in final
    assert [v for _, v in final["train/learning_rate"]][-1] == pytest.approx(0.01)
    png = output / "training_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(png) as image:
        image.load()
        assert image.size[0] > 100 and image.size[1] > 100
