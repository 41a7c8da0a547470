"""Elastic size end to end on the local engine: --min_workers, and resizing a running job.

Real jobs (master in this process, PS and workers as subprocesses). Resize requests go
through the master's gRPC `scale_workers` call, as `elasticdl scale --master` sends them.
"""

from __future__ import annotations

import threading
import time

import pytest
from job_checks import assert_records_accounted, context_of, report_of
from paced_jobs import SLOW_WORKER0

import elasticdl
from elasticdl import cli
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.master.options import TrainOptions
from elasticdl.runtime.master.scaling import ScaleRefused
from elasticdl.runtime.master.training_job import JobResult, TrainingJob
from elasticdl.scale_command import scale_via_master

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def regression_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("regression")
    gen.generate("regression", str(out), 1024, records_per_file=1024)
    return out


def events(report: dict, kind: str) -> list[dict]:
    return [e for e in report["events"] if e["kind"] == kind]


@pytest.mark.parametrize("min_workers", [1, 2])
def test_the_job_goes_on_while_min_workers_are_alive(tmp_path, regression_data, min_workers):
    # Worker 0 is slow (20 ms a record), so worker 1 gets its 2 tasks however late it starts.
    output, logs = tmp_path / "model", tmp_path / "logs"
    result = elasticdl.train(
        **SLOW_WORKER0,
        data=str(regression_data),
        output=str(output),
        log_dir=str(logs),
        num_workers=2,
        min_workers=min_workers,
        max_worker_relaunches=0,
        records_per_task=64,
        minibatch_size=32,
        chaos="worker1:kill@tasks=2",
    )
    if min_workers == 1:
        assert result.succeeded, result.error
        report = report_of(output)
        assert_records_accounted(report, max_redone=32)
        assert report["workers"]["launched"] == 2 and report["workers"]["target"] == 2
        (refused,) = events(report, "relaunch_refused")
        assert "--max_worker_relaunches=0" in refused["reason"]
        return
    assert not result.succeeded and not output.exists()
    report = report_of(logs)
    assert result.error.startswith(
        "only 1 worker(s) alive, fewer than --min_workers=2 and the relaunch budget "
        "(--max_worker_relaunches=0) is spent: 1 worker failure(s), the last: worker 1 killed "
        "by SIGKILL (chaos worker1:kill@tasks=2)"
    ), result.error
    assert report["workers"]["min_workers"] == 2


def _start(options: TrainOptions) -> tuple[TrainingJob, threading.Thread, list[JobResult]]:
    job = TrainingJob(options)
    results: list[JobResult] = []
    thread = threading.Thread(target=lambda: results.append(job.run()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not job.master_addr:
        assert thread.is_alive() and time.monotonic() < deadline, "the master did not start"
        time.sleep(0.05)
    return job, thread, results


def test_a_running_job_grows_and_shrinks_on_request(tmp_path, regression_data, capsys):
    # Worker 0 takes 20 ms a record (a 64-record task: 1.3 s): the job lasts until the workers
    # asked for have started and trained, however slow the machine is.
    options = TrainOptions(
        model_def=SLOW_WORKER0["model_def"],
        model_zoo=SLOW_WORKER0["model_zoo"],
        dataset_fn=SLOW_WORKER0["dataset_fn"],
        training_data=str(regression_data),
        output=str(tmp_path / "model"),
        log_dir=str(tmp_path / "logs"),
        num_workers=1,
        min_workers=1,
        records_per_task=64,
        minibatch_size=32,
    )
    job, thread, results = _start(options)
    address, logs = job.master_addr, str(tmp_path / "logs")

    with pytest.raises(ValueError, match="UNAUTHENTICATED"):  # without the job's secret
        scale_via_master(address, 2)
    with pytest.raises(ScaleRefused, match=r"cannot scale to 0 worker\(s\): below the job's"):
        scale_via_master(address, 0, secret_file=logs)
    # 1,024 records in 64-record tasks: 16 tasks an epoch (memory may bound it lower).
    above = r"cannot scale to 17 worker\(s\): above the (16 tasks in an epoch|worker processes)"
    with pytest.raises(ScaleRefused, match=above):
        scale_via_master(address, 17, secret_file=logs)
    assert cli.main(["scale", "--master", address, "--workers", "3", "--secret_file", logs]) == 0
    assert capsys.readouterr().out.strip() == "scaled from 1 to 3 worker(s): started worker(s) 1, 2"
    secret = f"{logs}/job.secret"
    assert scale_via_master(address, 2, secret_file=secret) == (
        "scaled from 3 to 2 worker(s): retiring worker(s) 2"
    )
    assert scale_via_master(address, 2, secret_file=logs) == (
        "scaled from 2 to 2 worker(s): nothing to do"
    )

    thread.join(timeout=240)
    assert not thread.is_alive(), "the job did not end"
    (result,) = results
    assert result.succeeded, result.error
    report = report_of(tmp_path / "model")
    context = context_of(report, "workers", "failures", "events", "tasks")
    assert_records_accounted(report, max_redone=0)
    workers = report["workers"]
    assert workers["target"] == 2 and workers["launched"] == 3, context
    accepted = [s["accepted"] for s in workers["scaling"]]
    assert accepted == [False, False, True, True, True], context
    assert workers["scaling"][2]["launched"] == [1, 2], context
    assert workers["scaling"][3]["retired"] == [2], context
    assert report["failures"] == [] and workers["failed"] == 0, context
    assert report["tasks"]["by_worker"].get("1", 0) > 0, "the worker the job grew by trained"
    assert report["tasks"]["by_worker"].get("2", 0) == 0, context
    (retired,) = [w for w in workers["instances"] if w["worker_id"] == 2]
    assert retired["exit"] is None or retired["exit"]["reason"] == "retired", context

    # The job is over: its master no longer answers.
    assert cli.main(["scale", "--master", address, "--workers", "2", "--secret_file", logs]) == 2
    assert "no master answered" in capsys.readouterr().err


def test_scale_needs_one_job_and_a_positive_size(capsys):
    assert cli.main(["scale", "--workers", "2"]) == 2
    assert "give the job's name (Kubernetes) or --master HOST:PORT" in capsys.readouterr().err
    assert cli.main(["scale", "job1", "--master", "127.0.0.1:1", "--workers", "2"]) == 2
    assert cli.main(["scale", "--master", "127.0.0.1:1", "--workers", "0"]) == 2
    assert "--workers must be >= 1, got 0" in capsys.readouterr().err
    assert cli.main(["scale", "--master", "127.0.0.1:1", "--workers", "2"]) == 2
    assert "--master needs --secret_file" in capsys.readouterr().err
    missing = ["--secret_file", "/nonexistent/logs"]
    assert cli.main(["scale", "--master", "127.0.0.1:1", "--workers", "2", *missing]) == 2
    assert "--secret_file: cannot read the job's secret /nonexistent/logs" in (
        capsys.readouterr().err
    )
    assert cli.main(["scale", "--master", "127.0.0.1:1", "--workers", "1001"]) == 2
    assert "--workers 1001 is more than 1000, the limit for one job" in capsys.readouterr().err
