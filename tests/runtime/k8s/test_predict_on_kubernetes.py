"""The prediction step with `--instance_manager kubernetes`: the master in this process runs each
worker as a pod through KubernetesInstanceManager and the official client; the loopback fake API
server (tests/support/fake_kube.py) runs each pod's command as a local process.

The jobs go through `elasticdl.steps.predict.main` with its Kubernetes flags, as the Argo step
runs it. Only the API client is swapped for one bound to the fake (no kubeconfig here). The data,
the trained model and the predictions lie under a hostPath `--volume` mounted at the same path
(the fake's pods are local processes, so they see it; on a cluster: a shared claim that the
master pod mounts too), which is what the step requires of local paths.
"""

from __future__ import annotations

import json
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_kube import FakeKube, fake_kube
from tiny_zoo import tiny_zoo

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.k8s import manager as k8s_manager
from elasticdl.runtime.k8s.options import check_reachable_from_pods
from elasticdl.runtime.prediction_output import read_rows
from elasticdl.steps import predict

RECORDS = 400
TASK = 40  # records per task on Kubernetes: 10 tasks
CALLS_ENV = "K8S_PREDICT_CALLS"

# A functions-style zoo whose PredictionOutputsProcessor, when K8S_PREDICT_CALLS names a
# directory, logs each call (after the worker wrote the task's part, before it reports the task
# done) and then takes half a second: the test preempts a worker in that window, and the job
# lasts long enough for every worker to take tasks.
ZOO = tiny_zoo(
    textwrap.dedent(
        """
        class PredictionOutputsProcessor:
            def process(self, predictions, worker_id, task=None):
                directory = os.environ.get("K8S_PREDICT_CALLS")
                if not directory:
                    return
                with open(os.path.join(directory, "calls.log"), "a") as log:
                    log.write(f"{worker_id} {task['part']} {len(predictions)}\\n")
                time.sleep(0.5)
        """
    )
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every pod mounts (a hostPath volume at the same path)."""
    return tmp_path_factory.mktemp("shared")


@pytest.fixture(scope="module")
def data(shared: Path) -> Path:
    gen.generate("regression", str(shared / "data"), RECORDS, records_per_file=RECORDS // 2)
    return shared / "data"


@pytest.fixture(scope="module")
def model(shared: Path, data: Path) -> Path:
    (shared / "zoo").mkdir()
    (shared / "zoo" / "tiny.py").write_text(ZOO)
    output = shared / "model"
    result = elasticdl.train(
        model_zoo=str(shared / "zoo"),
        model_def="tiny.custom_model",
        data=str(data),
        output=str(output),
        num_workers=1,
        minibatch_size=64,
        records_per_task=RECORDS // 2,
    )
    assert result.succeeded, result.error
    return output


def rows_of(output: Path) -> list[dict[str, Any]]:
    return [
        row for part in sorted(output.glob("part-*")) for row in read_rows(str(part), "recordio")
    ]


@pytest.fixture(scope="module")
def plain_rows(tmp_path_factory: pytest.TempPathFactory, data: Path, model: Path) -> list:
    """The predictions of a plain run: the local engine, one worker process."""
    output = tmp_path_factory.mktemp("plain") / "predictions"
    result = elasticdl.predict(
        data=str(data), trained_model=str(model), output=str(output), num_workers=1
    )
    assert result.succeeded, result.error
    rows = rows_of(output)
    assert [row["id"][0] for row in rows] == list(range(RECORDS))
    return rows


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    """The fake API server, reached by the step's own `make_instance_manager` (it would load
    the in-cluster config or a kubeconfig); the master pod's IP is loopback."""
    with fake_kube() as fake:
        monkeypatch.setattr(k8s_manager, "load_api_client", fake.api_client)
        monkeypatch.setenv("MY_POD_IP", "127.0.0.1")
        monkeypatch.delenv("MY_POD_NAME", raising=False)
        yield fake


def step_argv(shared: Path, job_name: str, **flags: Any) -> list[str]:
    """The step's flags for job `job_name`, writing to <shared>/runs/<job_name>."""
    argv = {
        "data": str(shared / "data"),
        "trained_model": str(shared / "model"),
        "output": str(shared / "runs" / job_name),
        "instance_manager": "kubernetes",
        "pod_image": "elasticdl:local",
        "pod_namespace": "default",
        "volume": f"host_path={shared},mount_path={shared}",
        "termination_grace_period": "5",
        "job_name": job_name,
        "num_workers": "2",
        "records_per_task": str(TASK),
        "minibatch_size": "16",
        **flags,
    }
    return [f"--{name}={value}" for name, value in argv.items()]


def when_worker_logs(
    calls: Path, worker_id: int, act: Callable[[], None], timeout: float = 120
) -> threading.Thread:
    """`act` from outside the job as soon as worker `worker_id` logs its first processed task
    (its part written, the task not yet reported)."""

    def run() -> None:
        deadline = time.monotonic() + timeout
        log = calls / "calls.log"
        while time.monotonic() < deadline:
            lines = log.read_text().splitlines() if log.exists() else []
            if any(line.split()[0] == str(worker_id) for line in lines):
                act()
                return
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def calls_of(calls: Path) -> list[tuple[int, str]]:
    return [
        (int(line.split()[0]), line.split()[1])
        for line in (calls / "calls.log").read_text().splitlines()
    ]


@pytest.mark.slow
def test_prediction_on_kubernetes_with_a_worker_pod_preempted(
    tmp_path, monkeypatch, kube, shared, model, plain_rows
) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv(CALLS_ENV, str(calls))
    output = shared / "runs" / "k8s-predict"
    thread = when_worker_logs(calls, 1, lambda: kube.preempt("k8s-predict-worker-1"))
    # A preemption does not count against the relaunch budget: none is needed here.
    argv = step_argv(shared, "k8s-predict", max_worker_relaunches="0")
    assert predict.main(argv) == 0
    thread.join(1)
    report = json.loads((output / "job_report.json").read_text())
    context = json.dumps({k: report[k] for k in ("workers", "tasks", "events", "recoveries")})
    assert report["status"] == "succeeded" and (output / "_SUCCESS").exists(), context
    exits = {e["worker_id"]: e for e in report["workers"]["exits"]}
    assert exits[1]["reason"] == "preempted", context
    assert "exit code 137, not OOMKilled" in exits[1]["detail"], context
    workers = report["workers"]
    assert (workers["launched"], workers["failed"], workers["preempted"]) == (3, 0, 1), context
    assert report["tasks"]["requeued"] == 1, context
    assert [r["cause"] for r in report["recoveries"]] == ["worker 1 preempted"], context
    # Worker 1 wrote its part and was killed before it reported the task: another worker
    # redid the task and wrote the same part again.
    logged = calls_of(calls)
    parts = [part for _, part in logged]
    assert len(parts) == RECORDS // TASK + 1 and len(set(parts)) == RECORDS // TASK, logged
    (redone,) = [part for part in set(parts) if parts.count(part) == 2]
    assert [w for w, part in logged if part == redone][0] == 1, logged

    rows = rows_of(output)
    assert report["records"] == {"input": RECORDS, "written": RECORDS}
    assert [row["id"][0] for row in rows] == list(range(RECORDS)), "each row once, in order"
    np.testing.assert_allclose(
        [row["prediction"][0] for row in rows],
        [row["prediction"][0] for row in plain_rows],
        rtol=1e-6,
        atol=1e-6,
    )
    assert not list(output.parent.glob(".k8s-predict.staging-*")), "staging renamed into place"
    # Every pod of the job was deleted, with its ConfigMap.
    assert kube.wait_for(lambda: kube.pods() == [], 30)
    assert kube.names("configmaps") == []
    created = [p for method, p in kube.requests if method == "POST" and p.endswith("/pods")]
    assert len(created) == 3


@pytest.mark.slow
def test_an_out_of_memory_worker_pod_is_not_relaunched(
    tmp_path, monkeypatch, capsys, kube, shared, model
) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv(CALLS_ENV, str(calls))
    output = shared / "runs" / "k8s-oom"
    thread = when_worker_logs(calls, 0, lambda: kube.oom_kill("k8s-oom-worker-0"))
    argv = step_argv(shared, "k8s-oom", num_workers="1", max_worker_relaunches="3")
    assert predict.main(argv) == 1
    thread.join(1)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("predict: the job failed: all workers are gone and worker 0 ran "), err
    assert "OOMKilled" in err[0] and "--worker_resource_limit" in err[0], err
    assert not output.exists() and not list(output.parent.glob(".k8s-oom.staging-*"))
    created = [p for method, p in kube.requests if method == "POST" and p.endswith("/pods")]
    assert len(created) == 1, "an out-of-memory worker is not relaunched, whatever the budget"


def test_the_step_refuses_bad_kubernetes_input_in_one_line(
    tmp_path, monkeypatch, capsys, shared
) -> None:
    """Each refused before the job starts (no model needed: nothing is read)."""
    monkeypatch.setenv("MY_POD_IP", "10.0.0.5")
    monkeypatch.delenv("MY_POD_NAME", raising=False)
    output = shared / "runs" / "k8s-bad"
    cases: list[tuple[dict[str, str], str]] = [
        ({"worker_resource_request": "cpu=lots"}, "--worker_resource_request"),
        ({"pod_image": ""}, "--pod_image: no image for the worker pods"),
        ({"volume": ""}, "cannot reach a local path outside every shared --volume (none is"),
        ({"volume": "empty_dir=true,mount_path=/x"}, "outside every shared --volume (none is"),
        ({"output": str(tmp_path / "p")}, f"--output '{tmp_path / 'p'}': the worker pods cannot"),
        ({"data": str(tmp_path)}, f"--data '{tmp_path}': the worker pods cannot reach"),
        ({"trained_model": "memory://m"}, "--trained_model 'memory://m': memory:// lives in"),
        ({"output": str(shared)}, "is the --volume mount_path itself; give a new directory"),
        (
            {"volume": f"host_path={shared},mount_path={shared},read_only=true"},
            f"lies on the read-only --volume mounted at {shared}",
        ),
    ]
    for flags, expected in cases:
        assert predict.main(step_argv(shared, "k8s-bad", **flags)) == 2, flags
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("predict: error: "), (flags, err)
        assert expected in err[0], (flags, err)
    monkeypatch.delenv("MY_POD_IP")
    assert predict.main(step_argv(shared, "k8s-bad")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MY_POD_IP is not set" in err[0], err
    assert not output.exists()


def test_object_store_urls_need_no_volume() -> None:
    for url in ("gs://bucket/predictions", "s3://b/p", "gcs://b/p"):
        check_reachable_from_pods("--output", url, "", writable=True)
    volume = "claim_name=data,mount_path=/data/;host_path=/h,mount_path=/data/ro,read_only=true"
    check_reachable_from_pods("--data", "/data/ro/train/*.recordio", volume)
    check_reachable_from_pods("--output", "file:///data/p", volume, writable=True)
    with pytest.raises(ValueError, match="read-only --volume mounted at /data/ro"):
        check_reachable_from_pods("--output", "/data/ro/p", volume, writable=True)
    with pytest.raises(
        ValueError, match=r"outside every shared --volume \(mounted: /data, /data/ro\)"
    ):
        check_reachable_from_pods("--output", "/database/p", volume, writable=True)
