"""A training job whose --checkpoint_dir is full (issue 13 §2): the parameter server's failed
writes reach the master, the job fails by the documented rule (runtime/master/checkpoint_health.py)
in one line naming the shard file and the cause, and no version folder is left behind.

The checkpoint directory lies on a real 4 KiB tmpfs (one page) mounted in a private mount
namespace (`unshare -rm`); the master's progress journal, written first, takes that page, so
every checkpoint write of the PS fails with ENOSPC whatever the timing.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from mount_namespace import unshare_prefix

from elasticdl.runtime.data import generate as gen

FAULT_ZOO = Path(__file__).resolve().parents[1] / "support" / "fault_zoo"


@pytest.mark.slow
def test_a_full_checkpoint_disk_fails_the_job_in_one_line_and_leaves_no_version_folder(
    tmp_path: Path,
) -> None:
    prefix = unshare_prefix()
    if prefix is None:
        pytest.skip("needs unshare with mount namespaces to mount a small tmpfs")
    data, small, logs = tmp_path / "data", tmp_path / "small", tmp_path / "logs"
    gen.generate("regression", str(data), 256, records_per_file=256)
    small.mkdir()
    checkpoints = small / "ckpt"
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
        str(tmp_path / "model"),
        "--log_dir",
        str(logs),
        "--num_workers",
        "1",
        "--records_per_task",
        "128",
        "--minibatch_size",
        "32",
        "--checkpoint_steps",
        "1",
        "--checkpoint_dir",
        str(checkpoints),
    ]
    command = (
        f"mount -t tmpfs -o size=4k tmpfs {shlex.quote(str(small))} && "
        f"{shlex.join(train)}; echo EXIT $?; echo LEFT $(ls -A {shlex.quote(str(checkpoints))})"
    )
    done = subprocess.run(
        [*prefix, "sh", "-c", command], capture_output=True, text=True, timeout=400
    )
    lines = done.stdout.splitlines()
    assert "EXIT 1" in lines, done.stdout + done.stderr
    assert "LEFT progress-journal.jsonl" in lines, done.stdout  # no version-* folder
    assert "Traceback" not in done.stderr, done.stderr
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    shard = re.escape(str(checkpoints)) + r"/version-\d{12}/ps-0-of-1\.npz"
    assert re.fullmatch(
        r"elasticdl: training failed: checkpoints cannot be written: parameter server 0 failed "
        rf"\d+ checkpoint writes in a row, the last: cannot write checkpoint {shard}: "
        r"No space left on device \(free space there or choose another --checkpoint_dir\)",
        last,
    ), done.stderr
    report = json.loads((logs / "job_report.json").read_text())
    assert report["status"] == "failed"
    assert report["error"] == last.removeprefix("elasticdl: training failed: ")
    failures = report["checkpoint_failures"]
    assert failures and all(f["ps_id"] == 0 for f in failures)
    assert sum(f["failed"] for f in failures) >= 3
    assert all("No space left on device" in f["error"] for f in failures)
    assert "checkpoint_failed" in {e["kind"] for e in report["events"]}
    assert report["checkpoints"] == []
    assert not (tmp_path / "model").exists()
