"""On a loaded machine a starved role is slow, not hung (runtime/master/liveness.py).

A job with a parameter server and no checkpoint runs beside two other training jobs and a busy
loop per core, for its whole duration: it finishes with no role killed. (Before, its PS was
killed as "hung: answered no liveness probe for 7.1 s" in such company and the job was lost.)
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from job_checks import report_of
from paced_jobs import FAULT_ZOO

import elasticdl
from elasticdl.runtime.data import generate as gen

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # everything runs 4-6x slower


def _other_job(data, output) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "elasticdl.cli", "train", "--model_zoo", str(FAULT_ZOO)]
    argv += ["--model_def", "faulty.custom_model", "--data", str(data), "--output", str(output)]
    argv += ["--num_workers", "1", "--num_epochs", "20", "--records_per_task", "128"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_a_ps_job_beside_other_jobs_and_busy_loops_loses_no_role(tmp_path):
    data = tmp_path / "data"
    gen.generate("regression", str(data), 512, records_per_file=512)
    others = [_other_job(data, tmp_path / f"other{i}") for i in range(2)]
    busy = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        result = elasticdl.train(
            model_zoo=str(FAULT_ZOO),
            model_def="faulty.custom_model",
            data=str(data),
            output=str(tmp_path / "model"),
            num_ps=1,
            num_workers=2,
            num_epochs=1,
            records_per_task=64,
            minibatch_size=32,
        )
    finally:
        for process in busy + others:
            process.kill()
            process.wait()
    assert result.succeeded, result.error
    report = report_of(tmp_path / "model")
    kinds = [e["kind"] for e in report["events"]]
    slow = [e for e in report["events"] if e["kind"] == "instance_slow"]
    print(f"{len(slow)} slow episode(s) waited out: {slow}")
    assert report["failures"] == [], report["failures"]
    assert report["parameter_servers"]["exits"] == []
    assert report["workers"]["failed"] == 0
    assert "ps_unresponsive" not in kinds and "task_timeout" not in kinds
    assert report["records"]["trained"] == report["records"]["planned"] == 512
