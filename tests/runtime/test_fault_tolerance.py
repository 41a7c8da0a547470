"""Fault tolerance end to end: real processes killed, stopped, added; reports that add up.

Every chaos case runs a short real job (master in this process, PS and workers as
subprocesses) and checks that it finished with every record accounted for in
`job_report.json`, and that the report tells what failed, why, and how fast its work was back
in the queue. Task-count triggers keep the cases independent of the machine's speed.
"""

from __future__ import annotations

import dataclasses
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from job_checks import assert_records_accounted, context_of, report_of
from paced_jobs import FAULT_ZOO, PACED_WORKERS, SLOW_WORKER0

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.master import progress_journal
from elasticdl.runtime.master.report import summary_line
from elasticdl.runtime.outputs import OutputError
from elasticdl.runtime.ps import checkpoint
from elasticdl.runtime.ps.servicer import parameters_of, restore_at_start

pytestmark = pytest.mark.slow

MODEL = {"model_def": "regressor.DNN", "params": "hidden_units=[8]"}
TIMEOUT_FLOOR_S = 3.0


@pytest.fixture(scope="module")
def regression_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("regression")
    gen.generate("regression", str(out), 2048, records_per_file=1024)
    return out


def events(report: dict, kind: str) -> list[dict]:
    return [e for e in report["events"] if e["kind"] == kind]


def check_worker_sigkill(report: dict) -> None:
    (failure,) = report["failures"]
    assert failure["role"] == "worker" and failure["id"] == 1
    assert failure["cause"] == "killed by SIGKILL (chaos worker1:kill@tasks=2)"
    assert failure["relaunched_as"] == 2
    assert report["workers"]["launched"] == 3 and report["workers"]["relaunched"] == 1


def check_worker_sigterm(report: dict) -> None:
    assert report["failures"] == []  # a preemption notice is no failure: nothing redone
    (worker1,) = [w for w in report["workers"]["instances"] if w["worker_id"] == 1]
    assert worker1["exit"]["reason"] == "preempted"
    assert report["workers"]["preempted"] == 1 and report["workers"]["launched"] == 3


def check_two_workers_at_once(report: dict) -> None:
    (chaos,) = events(report, "chaos")
    assert chaos["to"] == ["worker0", "worker1"]  # both signalled in one pass
    failures = sorted(report["failures"], key=lambda f: f["id"])
    assert [(f["role"], f["id"]) for f in failures] == [("worker", 0), ("worker", 1)]
    assert all("(chaos worker0+worker1:kill@tasks=1)" in f["cause"] for f in failures)
    # Every worker was dead at the same moment; both were relaunched, none refused.
    assert sorted(f["relaunched_as"] for f in failures) == [2, 3]
    assert not events(report, "relaunch_refused")


def check_ps_sigkill(report: dict) -> None:
    (failure,) = report["failures"]
    assert failure["role"] == "ps" and failure["id"] == 0
    assert failure["cause"] == "killed by SIGKILL (chaos ps0:kill@tasks=6)"
    assert failure["requeue_s"] is None  # a PS holds no task: nothing goes back to the queue
    restored = failure["restored_version"]
    assert restored % 5 == 0 and failure["rolled_back_versions"] >= 0
    # The version before comes from the workers' reports (which may lag the PS by a report).
    assert failure["rolled_back_versions"] == max(0, failure["model_version_before"] - restored)
    first_last = [restored + 1, failure["model_version_before"]]
    assert failure["rolled_back"] == (first_last if failure["rolled_back_versions"] else [])
    # The relaunched shard said what it restored: a dense model has no embedding rows.
    assert failure["restored_rows"] == 0 and failure["restored_table_rows"] == {}
    assert report["parameter_servers"]["relaunched"] == 1
    # The recovery time is the real downtime: from the kill until the new PS answered (it
    # imports TensorFlow and restores its checkpoint first), not the time to spawn it.
    assert failure["relaunch_s"] > failure["spawn_s"] and failure["relaunch_s"] > 0.5
    (recovery,) = [r for r in report["recoveries"] if r["cause"].startswith("ps0")]
    assert recovery == {
        "cause": "ps0 killed",
        "seconds": failure["relaunch_s"],
        "tasks_requeued": 0,
    }
    kept = report["checkpoints"]
    assert 1 <= len(kept) <= 3, "keep_checkpoint_max=3"
    versions = [c["version"] for c in kept]
    assert versions == sorted(versions) and all(v % 5 == 0 for v in versions)
    assert versions[-1] >= restored
    for entry in kept:
        path = Path(entry["path"])
        assert path.is_dir() and path.is_absolute()
        assert path.name == checkpoint.version_dirname(entry["version"])
        assert path.parent == Path.cwd() / "model" / "checkpoints"


def check_worker_hang(report: dict) -> None:
    (stop,) = events(report, "chaos")
    (timeout,) = events(report, "task_timeout")
    assert timeout["worker_id"] == 1 and timeout["timeout_s"] >= TIMEOUT_FLOOR_S
    # The worker stopped right after a progress report; the master notices at the timeout.
    detection_s = timeout["at_s"] - stop["at_s"]
    assert timeout["timeout_s"] - 0.5 <= detection_s < timeout["timeout_s"] + 2.0, detection_s
    assert detection_s < TIMEOUT_FLOOR_S + 4.0, "the warm-up of the first task is not counted"
    (failure,) = report["failures"]
    assert failure["id"] == 1 and failure["cause"].startswith("hung: no progress on task")
    assert failure["at_s"] == pytest.approx(timeout["at_s"], abs=0.01)
    assert failure["relaunched_as"] == 2
    (exit_,) = [w["exit"] for w in report["workers"]["instances"] if w["worker_id"] == 1]
    assert exit_["reason"] == "timed_out" and exit_["signal"] == signal.SIGKILL


def check_worker_added(report: dict) -> None:
    assert report["failures"] == []
    (added,) = events(report, "worker_added")
    (relaunched,) = events(report, "worker_relaunched")
    assert added["worker_id"] == 1 and (relaunched["worker_id"], relaunched["replaces"]) == (2, 0)
    assert report["workers"]["launched"] == 3 and report["workers"]["preempted"] == 1
    assert report["tasks"]["by_worker"].get("1", 0) > 0, "the added worker trained"


@dataclasses.dataclass
class Case:
    chaos: str
    check: Callable[[dict], None]
    max_redone: int
    options: dict


CASES = {
    # One minibatch (64 records) in flight may reach the PS unreported: redone, and counted.
    "worker_sigkill": Case(
        "worker1:kill@tasks=2",
        check_worker_sigkill,
        64,
        dict(num_workers=2, minibatch_size=64, num_epochs=2, records_per_task=128, **SLOW_WORKER0),
    ),
    "worker_sigterm": Case(
        "worker1:term@tasks=2",
        check_worker_sigterm,
        0,
        dict(num_workers=2, minibatch_size=64, num_epochs=2, records_per_task=128, **SLOW_WORKER0),
    ),
    "two_workers_at_once": Case(
        "worker0+worker1:kill@tasks=1",
        check_two_workers_at_once,
        2 * 64,
        dict(num_workers=2, minibatch_size=64, num_epochs=2, records_per_task=128, **PACED_WORKERS),
    ),
    "ps_sigkill_restores_checkpoint": Case(
        "ps0:kill@tasks=6",
        check_ps_sigkill,
        2 * 32,
        dict(
            num_workers=2,
            minibatch_size=32,
            num_epochs=2,
            records_per_task=128,
            checkpoint_steps=5,
        ),
    ),
    "worker_hang": Case(
        "worker1:stop@tasks=1",
        check_worker_hang,
        32,
        dict(
            num_workers=2,
            minibatch_size=32,
            num_epochs=2,
            records_per_task=128,
            task_timeout_floor=TIMEOUT_FLOOR_S,
            **SLOW_WORKER0,
        ),
    ),
    # The first worker leaves (preempted) after 3 tasks, so the rest of the job waits for
    # the added worker however long starting it takes on a busy machine.
    "worker_added": Case(
        "worker:add@tasks=1,worker0:term@tasks=3",
        check_worker_added,
        0,
        dict(num_workers=1, minibatch_size=32, num_epochs=2, records_per_task=128),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_chaos_job_finishes_and_accounts_for_every_record(
    tmp_path, monkeypatch, regression_data, name
):
    case = CASES[name]
    monkeypatch.chdir(tmp_path)  # a relative --output: PS and workers run in the log dir
    output = tmp_path / "model"
    result = elasticdl.train(
        data=str(regression_data), output="model", chaos=case.chaos, **{**MODEL, **case.options}
    )
    assert result.succeeded, result.error
    report = report_of(output)
    context = context_of(report, "records", "failures", "recoveries", "events", "workers")
    assert report["status"] == "succeeded" and (output / "trained_model.pb").exists()
    fired = sorted(c.split(" at ")[0] for c in report["chaos"])
    assert fired == sorted(case.chaos.split(",")), context
    assert_records_accounted(report, max_redone=case.max_redone)
    for failure in report["failures"]:
        if failure["role"] == "worker":
            # At most the task it held went back, at once (the loop reacts to exits at once).
            assert failure["tasks_requeued"] <= 1, context
            if failure["tasks_requeued"]:
                assert 0 <= failure["requeue_s"] < 1.0, context
    try:
        case.check(report)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{context}") from error
    line = summary_line(report)
    assert f"{len(report['failures'])} failure(s)" in line
    assert f"{len(report['checkpoints'])} checkpoint(s)" in line


def test_a_worker_killed_every_time_fails_once_the_relaunch_budget_is_spent(
    tmp_path, regression_data
):
    # The zoo's input function SIGKILLs the worker that runs it, as the kernel's OOM killer
    # would: relaunching it can never help, and the job must not try forever.
    output, logs = tmp_path / "model", tmp_path / "logs"
    result = elasticdl.train(
        model_zoo=str(FAULT_ZOO),
        model_def="faulty.custom_model",
        dataset_fn="faulty.sigkill_in_workers",
        data=str(regression_data),
        output=str(output),
        log_dir=str(logs),
        num_workers=1,
        records_per_task=512,
        max_worker_relaunches=2,
    )
    assert not result.succeeded
    assert not output.exists(), "a failed job publishes nothing"
    report = report_of(logs)
    context = context_of(report, "failures", "events", "workers")
    assert report["status"] == "failed" and report["error"] == result.error
    error = result.error
    assert error.startswith("all workers are gone and the relaunch budget"), error
    assert (
        "(--max_worker_relaunches=2) is spent: 3 worker failures, each killed by SIGKILL" in error
    )
    assert "from outside the job (exit status 137: most often the kernel's OOM killer" in error
    failures = report["failures"]
    assert [(f["role"], f["id"]) for f in failures] == [("worker", i) for i in range(3)], context
    for failure in failures:
        assert failure["cause"].startswith("killed by SIGKILL from outside the job"), context
        assert failure["tasks_requeued"] == 1 and failure["requeue_s"] < 1.0, context
    assert [f.get("relaunched_as") for f in failures] == [1, 2, None], context
    assert report["workers"]["failed"] == 3 and report["workers"]["relaunched"] == 2
    assert report["records"]["trained"] == 0
    (refused,) = events(report, "relaunch_refused")
    assert "--max_worker_relaunches=2" in refused["reason"], context
    assert "3 failure(s)" in summary_line(report)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)


@dataclasses.dataclass
class KilledJob:
    output: Path
    logs: Path
    version: int
    """The newest valid checkpoint when the master was killed."""

    @property
    def checkpoints(self) -> Path:
        return self.output / "checkpoints"


@pytest.fixture(scope="module")
def killed_job(tmp_path_factory, regression_data) -> KilledJob:
    """`elasticdl train` with checkpoints, its master SIGKILLed once a checkpoint exists."""
    root = tmp_path_factory.mktemp("killed")
    first, logs = root / "first", root / "first-logs"
    checkpoints = first / "checkpoints"
    argv = [
        *(sys.executable, "-P", "-m", "elasticdl", "train", "--model_def", MODEL["model_def"]),
        *("--params", MODEL["params"], "--data", str(regression_data), "--output", str(first)),
        *("--num_workers", "1", "--minibatch_size", "32", "--records_per_task", "256"),
        *("--num_epochs", "100", "--checkpoint_steps", "10", "--log_dir", str(logs)),
    ]
    with (root / "master.log").open("wb") as out:
        master = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    try:

        def checkpointed() -> bool:
            assert master.poll() is None, (root / "master.log").read_text()[-3000:]
            return any(v > 0 for v in checkpoint.valid_versions(str(checkpoints)))

        _wait_for(checkpointed, "a checkpoint after training began", 120)
        children = _children(master.pid)
        assert len(children) == 2, "one parameter server and one worker"
        master.send_signal(signal.SIGKILL)
        master.wait(10)
        # Orphaned, the parameter server and the worker exit by themselves.
        _wait_for(lambda: not any(_running(p) for p in children), "orphans to exit", 15)
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    # Nothing published; what the killed master wrote live stays: checkpoints and the
    # TensorBoard logs (a resume appends to them).
    left = sorted(p.name for p in first.iterdir())
    assert left == ["checkpoints", "tensorboard"], "nothing published"
    version = checkpoint.latest_valid_version(str(checkpoints))
    assert version is not None and version > 0
    return KilledJob(first, logs, version)


def test_a_new_master_resumes_from_the_checkpoint_of_a_killed_one(
    tmp_path, regression_data, killed_job
):
    checkpoints, version = str(killed_job.checkpoints), killed_job.version
    second = tmp_path / "second"
    result = elasticdl.train(
        data=str(regression_data),
        output=str(second),
        num_workers=1,
        minibatch_size=32,
        records_per_task=256,
        checkpoint_dir_for_init=checkpoints,
        **MODEL,
    )
    assert result.succeeded, result.error
    report = report_of(second)
    assert report["resumed_from"] == {"dir": checkpoints, "model_version": version}
    # The progress journal beside the checkpoints says which records the checkpoint holds:
    # only the others are trained. One worker, asynchronous SGD: one version per minibatch.
    covered = report["records"]["covered"]
    assert 0 < covered <= version * 32 and covered % 32 == 0, report["records"]
    assert report["model_version"] == version + (2048 - covered) // 32
    # What the killed run trained beyond its checkpoint (journaled) is trained again: redone.
    plan = progress_journal.read_journal(checkpoints)[0]["plan"]
    point = progress_journal.resume_point(checkpoints, version, plan)
    assert covered == sum(point.resumed.covered.values())
    earlier = sum(point.resumed.trained.values())
    assert report["records"]["redone"] == earlier - covered, report["records"]
    # Redone: only those (the killed run may have journaled minibatches past its checkpoint).
    assert_records_accounted(report, max_redone=earlier - covered)
    assert f"resumed from model version {version}" in summary_line(report)

    # The killed job's applied-records progress (task id -> records) is restored only into
    # that job: a job resuming from its checkpoint numbers its tasks anew.
    config = JobConfig.read(killed_job.logs / "job.json")
    own = parameters_of(config)
    assert restore_at_start(config, own, 0) == version
    assert any(own.applied_progress(range(1, 1000)).values())
    resumed = dataclasses.replace(config, checkpoint_dir="", checkpoint_dir_for_init=checkpoints)
    other = parameters_of(resumed)
    assert restore_at_start(resumed, other, 0) == version
    assert not any(other.applied_progress(range(1, 1000)).values())


def test_a_killed_job_resumes_into_its_own_output(tmp_path, regression_data, killed_job):
    # The same --output again: it holds only the killed job's checkpoints.
    output = tmp_path / "again"
    shutil.copytree(killed_job.output, output)
    common = dict(data=str(regression_data), output=str(output), num_workers=1, **MODEL)
    with pytest.raises(OutputError, match="resume it with --checkpoint_dir_for_init"):
        elasticdl.train(**common)
    result = elasticdl.train(
        minibatch_size=32,
        records_per_task=256,
        checkpoint_steps=10,
        checkpoint_dir_for_init=str(output / "checkpoints"),
        **common,
    )
    assert result.succeeded, result.error
    report = report_of(output)
    version = killed_job.version
    assert report["resumed_from"]["model_version"] == version
    covered = report["records"]["covered"]
    assert 0 < covered <= version * 32, report["records"]
    assert report["model_version"] == version + (2048 - covered) // 32
    # As in the test above: what the killed run journaled beyond its checkpoint is redone.
    checkpoints = str(killed_job.checkpoints)
    plan = progress_journal.read_journal(checkpoints)[0]["plan"]
    earlier = sum(
        progress_journal.resume_point(checkpoints, version, plan).resumed.trained.values()
    )
    assert report["records"]["redone"] == earlier - covered, report["records"]
    assert_records_accounted(report, max_redone=earlier - covered)
    assert (output / "trained_model.pb").exists()
    kept = [c["version"] for c in report["checkpoints"]]
    assert 1 <= len(kept) <= 3 and kept[-1] == report["model_version"] // 10 * 10, kept
    assert all(Path(c["path"]).parent == output / "checkpoints" for c in report["checkpoints"])
