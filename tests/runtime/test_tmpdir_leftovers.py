"""Killed processes leave nothing in TMPDIR (issue 13, section 6): each process the job launches
writes its temporary files (TensorFlow's autograph modules) into a private TMPDIR inside the
job's log directory, which the job removes when it ends."""

from __future__ import annotations

import tempfile

import pytest
from job_checks import report_of
from paced_jobs import SLOW_WORKER0

import elasticdl
from elasticdl.runtime.data import generate as gen

pytestmark = pytest.mark.slow

AUTOGRAPH = "__autograph_generated_file*"


def test_a_sigkilled_worker_leaves_no_autograph_files_in_tmpdir(tmp_path, monkeypatch):
    data, tmpdir, logs = tmp_path / "data", tmp_path / "tmpdir", tmp_path / "logs"
    gen.generate("regression", str(data), 1024, records_per_file=1024)
    tmpdir.mkdir()
    tempfile.gettempdir()  # this process keeps its own; the job's processes inherit TMPDIR
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    # Worker 0 is slow (20 ms a record), so worker 1 gets its 2 tasks however late it starts.
    result = elasticdl.train(
        **SLOW_WORKER0,
        data=str(data),
        output=str(tmp_path / "model"),
        log_dir=str(logs),
        num_workers=2,
        records_per_task=64,
        minibatch_size=32,
        chaos="worker1:kill@tasks=2",
    )
    assert result.succeeded, result.error
    (failure,) = report_of(tmp_path / "model")["failures"]
    assert failure["cause"].startswith("killed by SIGKILL"), failure
    assert list(tmpdir.rglob(AUTOGRAPH)) == []
    assert not (logs / "tmp").exists(), "the job's private TMPDIRs are removed when it ends"
