"""The master's liveness wiring end to end: real `elasticdl train` processes and real signals.

* SIGTERM to the master stops the job cleanly: workers finish their minibatch and leave, the
  report says "stopped" (in the log directory), the checkpoints stay, nothing is published.
* A SIGSTOPped parameter server answers no liveness probe: it is killed and relaunched from its
  checkpoint, the workers are not blamed, and the job trains every record.
* A SIGSTOPped worker is caught in under 30 s with the default task timeout settings.
* SIGTERM to a prediction master: workers stop, the report says "stopped", no output is left.
(A resume after SIGKILL of the master: test_fault_tolerance.py, `killed_job`.)
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from job_checks import assert_records_accounted, context_of, report_of
from paced_jobs import SLOW_WORKER0

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.ps import checkpoint

pytestmark = pytest.mark.slow

MODEL = ("--model_def", "regressor.DNN", "--params", "hidden_units=[8]")


@pytest.fixture(scope="module")
def regression_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("regression")
    gen.generate("regression", str(out), 1024, records_per_file=1024)
    return out


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)


def _processes_of(config: Path) -> list[int]:
    """Processes (PS, workers) started with this job's config file, still running."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(config).encode() in b" ".join(cmdline) and state != "Z":
            found.append(int(entry.name))
    return found


def _train(root: Path, data: Path, *extra: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    output, logs = root / "model", root / "logs"
    argv = [
        *(sys.executable, "-P", "-m", "elasticdl", "train", *MODEL, "--data", str(data)),
        *("--output", str(output), "--log_dir", str(logs), "--minibatch_size", "32"),
        *("--records_per_task", "128", *extra),
    ]
    out = (root / "master.log").open("wb")
    master = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, cwd=root)
    out.close()
    return master, output, logs


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_to_the_master_stops_the_job_with_a_stopped_report(
    tmp_path, regression_data, sig, status
):
    """SIGINT (Ctrl-C) as SIGTERM: the exit status is 128 + the signal's number, as a shell
    reports a process the signal ended."""
    master, output, logs = _train(
        tmp_path,
        regression_data,
        *("--num_workers", "2", "--num_epochs", "200", "--checkpoint_steps", "10"),
    )
    checkpoints = output / "checkpoints"
    try:

        def checkpointed() -> bool:
            assert master.poll() is None, (tmp_path / "master.log").read_text()[-3000:]
            return any(v > 0 for v in checkpoint.valid_versions(str(checkpoints)))

        _wait_for(checkpointed, "a checkpoint after training began", 120)
        assert len(_processes_of(logs / "job.json")) == 3, "one PS and two workers"
        master.send_signal(sig)
        stopped_at = time.monotonic()
        _, err = master.communicate(timeout=60)
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    seconds = time.monotonic() - stopped_at
    assert master.returncode == status
    lines = err.decode().strip().splitlines()
    name = signal.Signals(sig).name
    assert lines[-1] == f"elasticdl: training failed: stopped by {name}; checkpoints are kept"
    assert seconds < 30, f"the master took {seconds:.1f} s to stop"
    assert _processes_of(logs / "job.json") == [], "every PS and worker ended"
    report = report_of(logs)
    context = context_of(report, "status", "workers", "failures", "events")
    assert report["status"] == "stopped", context
    assert report["failures"] == [], context
    assert [e["kind"] for e in report["events"] if e["kind"] == "job_stopped"] == ["job_stopped"]
    # Both workers were asked to leave and left by themselves (finishing their minibatch).
    exits = [w["exit"] for w in report["workers"]["instances"]]
    assert [(e["reason"], e["exit_code"]) for e in exits] == [("retired", 0)] * 2, context
    assert report["records"]["trained"] > 0
    assert sorted(p.name for p in output.iterdir()) == ["checkpoints"], "nothing published"
    assert list((logs / "tensorboard").glob("events.out.tfevents.*")), "live logs set aside"
    kept = [c["version"] for c in report["checkpoints"]]
    assert kept and kept == checkpoint.valid_versions(str(checkpoints)), context


def events(report: dict, kind: str) -> list[dict]:
    return [e for e in report["events"] if e["kind"] == kind]


def test_a_hung_ps_is_killed_and_relaunched_from_its_checkpoint(tmp_path, regression_data):
    output = tmp_path / "model"
    result = elasticdl.train(
        model_def="regressor.DNN",
        params="hidden_units=[8]",
        data=str(regression_data),
        output=str(output),
        log_dir=str(tmp_path / "logs"),
        num_workers=2,
        minibatch_size=32,
        records_per_task=128,
        num_epochs=3,
        checkpoint_steps=5,
        chaos="ps0:stop@tasks=4",
    )
    assert result.succeeded, result.error
    report = report_of(output)
    context = context_of(report, "records", "failures", "recoveries", "events", "workers")
    assert_records_accounted(report, max_redone=2 * 32)
    (failure,) = report["failures"]
    assert (failure["role"], failure["id"], failure["kind"]) == ("ps", 0, "hung"), context
    assert "answered no liveness probe" in failure["cause"], context
    assert failure["restored_version"] % 5 == 0, context
    # Not the workers' fault: none was killed for a task timeout, none failed.
    assert not events(report, "task_timeout") and report["workers"]["failed"] == 0, context
    (stop,) = events(report, "chaos")
    (unresponsive,) = events(report, "ps_unresponsive")
    assert unresponsive["at_s"] - stop["at_s"] < 20, context
    # Its downtime runs from its first unanswered probe until the relaunched PS answered.
    assert failure["relaunch_s"] > unresponsive["silent_s"] > 0, context
    assert report["parameter_servers"]["relaunched"] == 1


def test_a_hung_worker_is_caught_in_under_30_s_by_default(tmp_path, regression_data):
    output = tmp_path / "model"
    result = elasticdl.train(
        **SLOW_WORKER0,
        data=str(regression_data),
        output=str(output),
        num_workers=2,
        minibatch_size=32,
        records_per_task=128,
        num_epochs=4,
        chaos="worker1:stop@tasks=1",
    )
    assert result.succeeded, result.error
    report = report_of(output)
    context = context_of(report, "records", "failures", "events", "workers")
    assert_records_accounted(report, max_redone=32)
    (stop,) = events(report, "chaos")
    (timeout,) = events(report, "task_timeout")
    assert timeout["worker_id"] == 1, context
    assert timeout["at_s"] - stop["at_s"] < 30, context
    (failure,) = report["failures"]
    assert failure["kind"] == "timed_out" and failure["relaunched_as"] == 2, context


SLOW_PROCESSOR = """
class PredictionOutputsProcessor:
    def process(self, predictions, worker_id, task=None):
        open(os.path.join(os.environ["TINY_PROCESSOR_DIR"], f"w{worker_id}"), "a").close()
        time.sleep(0.5)
"""


def test_sigterm_to_a_prediction_master_leaves_no_output(tmp_path, regression_data, monkeypatch):
    from tiny_zoo import tiny_zoo

    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "tiny.py").write_text(tiny_zoo(SLOW_PROCESSOR))
    model = tmp_path / "trained"
    trained = elasticdl.train(
        model_zoo=str(zoo),
        model_def="tiny.custom_model",
        data=str(regression_data),
        output=str(model),
        num_workers=1,
        minibatch_size=64,
        records_per_task=512,
    )
    assert trained.succeeded, trained.error
    calls, output, logs = tmp_path / "calls", tmp_path / "predictions", tmp_path / "logs"
    calls.mkdir()
    monkeypatch.setenv("TINY_PROCESSOR_DIR", str(calls))
    argv = [
        *(sys.executable, "-P", "-m", "elasticdl", "predict", "--data", str(regression_data)),
        *("--trained_model", str(model), "--output", str(output), "--log_dir", str(logs)),
        *("--num_workers", "2", "--minibatch_size", "8", "--records_per_task", "64"),
    ]
    master = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: any(calls.iterdir()) or master.poll() is not None, "a prediction", 120)
        assert master.poll() is None, master.communicate()[1].decode()[-3000:]
        master.send_signal(signal.SIGTERM)
        _, err = master.communicate(timeout=60)
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    assert master.returncode == 143
    assert err.decode().strip().splitlines()[-1].endswith("stopped by SIGTERM"), err[-2000:]
    assert _processes_of(logs / "job.json") == [], "every worker ended"
    report = report_of(logs)
    assert report["status"] == "stopped" and report["kind"] == "predict"
    assert report["failures"] == [], context_of(report, "workers", "events")
    assert not output.exists() and not list(tmp_path.glob(".predictions.staging-*"))
