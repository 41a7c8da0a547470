"""A warm spare worker takes a lost worker's place (`--spare_workers`), end to end on the
local engine: real processes, a real SIGKILL."""

from __future__ import annotations

import pytest
from job_checks import assert_records_accounted, context_of, report_of
from paced_jobs import SLOW_WORKER0

import elasticdl
from elasticdl.runtime.data import generate as gen

pytestmark = pytest.mark.slow


def test_a_spare_takes_the_place_of_a_killed_worker(tmp_path):
    data = tmp_path / "data"
    gen.generate("regression", str(data), 2048, records_per_file=1024)
    output = tmp_path / "model"
    # Worker 0 takes 20 ms a record (1.3 s a task): the spare, started once its first task is
    # done, is up before the kill after its 6th; the spare is fast and trains the rest.
    result = elasticdl.train(
        **SLOW_WORKER0,
        data=str(data),
        output=str(output),
        log_dir=str(tmp_path / "logs"),
        num_workers=1,
        spare_workers=1,
        records_per_task=64,
        minibatch_size=32,
        chaos="worker0:kill@tasks=6",
    )
    assert result.succeeded, result.error
    report = report_of(output)
    context = context_of(report, "records", "failures", "events", "workers", "tasks")
    assert_records_accounted(report, max_redone=32)
    (failure,) = report["failures"]
    assert (failure["id"], failure["relaunched_as"]) == (0, 1), context
    assert failure["training_again_s"] > 0, context
    spare = report["workers"]["instances"][1]
    assert spare["worker_id"] == 1 and spare["replaces"] == 0, context
    assert spare["spare"]["promoted_at"] is not None, context
    (promoted,) = [e for e in report["events"] if e["kind"] == "spare_promoted"]
    assert (promoted["worker_id"], promoted["replaces"]) == (1, 0), context
    assert report["tasks"]["by_worker"]["1"] > 0, context
    assert report["workers"]["relaunched"] == 1, context
