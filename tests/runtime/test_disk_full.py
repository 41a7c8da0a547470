"""A training job whose --output fills up: one line, a "failed" report, nothing left behind.

The output lies on a real 8 KiB tmpfs (two pages) mounted in a private mount namespace
(`unshare -rm`); the whole job (master, PS and worker processes) runs inside it. The model does
not fit, so publishing fails with ENOSPC after training succeeded.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from mount_namespace import unshare_prefix

from elasticdl.runtime.data import generate as gen

FAULT_ZOO = Path(__file__).resolve().parents[1] / "support" / "fault_zoo"


@pytest.mark.slow
def test_a_full_output_disk_fails_the_job_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    prefix = unshare_prefix()
    if prefix is None:
        pytest.skip("needs unshare with mount namespaces to mount a small tmpfs")
    data, small, logs = tmp_path / "data", tmp_path / "small", tmp_path / "logs"
    gen.generate("regression", str(data), 256, records_per_file=256)
    small.mkdir()
    train = [
        sys.executable,
        "-m",
        "elasticdl.cli",
        "train",
        "--model_zoo",
        str(FAULT_ZOO),
        "--model_def",
        "faulty.custom_model",
        "--data",
        str(data),
        "--output",
        str(small / "model"),
        "--log_dir",
        str(logs),
        "--num_workers",
        "1",
        "--records_per_task",
        "128",
        "--minibatch_size",
        "32",
    ]
    command = (
        f"mount -t tmpfs -o size=8k tmpfs {shlex.quote(str(small))} && "
        f"{shlex.join(train)}; echo EXIT $?; echo LEFT $(ls -A {shlex.quote(str(small))})"
    )
    done = subprocess.run(
        [*prefix, "sh", "-c", command], capture_output=True, text=True, timeout=400
    )
    lines = done.stdout.splitlines()
    assert "EXIT 1" in lines, done.stdout + done.stderr
    assert "LEFT " in lines or "LEFT" in lines, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert last == (
        f"elasticdl: training failed: could not publish the outputs to {small / 'model'}: "
        "No space left on device"
    ), done.stderr
    report = json.loads((logs / "job_report.json").read_text())
    assert report["status"] == "failed"
    assert "No space left on device" in report["error"]
    assert report["records"]["trained"] == report["records"]["planned"] == 256


@pytest.mark.slow
def test_a_full_tmpdir_fails_the_job_in_one_line_with_a_report_and_no_output(
    tmp_path: Path,
) -> None:
    """TMPDIR is a 24 KiB tmpfs: the model is staged there for export and does not fit
    (TensorFlow says ResourceExhaustedError). One line, a "failed" report in the log
    directory, and --output as it was: absent (its live TensorBoard logs moved to the logs)."""
    prefix = unshare_prefix()
    if prefix is None:
        pytest.skip("needs unshare with mount namespaces to mount a small tmpfs")
    data, small, logs, output = (tmp_path / n for n in ("data", "small", "logs", "model"))
    gen.generate("regression", str(data), 256, records_per_file=256)
    small.mkdir()
    train = [
        *(sys.executable, "-m", "elasticdl.cli", "train", "--model_zoo", str(FAULT_ZOO)),
        *("--model_def", "faulty.custom_model", "--data", str(data), "--output", str(output)),
        *("--log_dir", str(logs), "--num_workers", "1", "--records_per_task", "128"),
    ]
    command = (
        f"mount -t tmpfs -o size=24k tmpfs {shlex.quote(str(small))} && "
        f"TMPDIR={shlex.quote(str(small))} {shlex.join(train)}; echo EXIT $?"
    )
    done = subprocess.run(
        [*prefix, "sh", "-c", command], capture_output=True, text=True, timeout=400
    )
    assert "EXIT 1" in done.stdout.splitlines(), done.stdout + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert last.startswith(f"elasticdl: training failed: could not stage the model in {small}/")
    assert last.endswith("No space left on device"), last
    report = json.loads((logs / "job_report.json").read_text())
    assert report["status"] == "failed" and "No space left on device" in report["error"]
    assert not output.exists(), "--output as it was"
    assert (logs / "tensorboard").is_dir()
