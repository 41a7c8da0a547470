"""A whole training job "on Kubernetes": the master in this process manages its PS and worker
pods through KubernetesInstanceManager and the official client; the loopback fake API server
(tests/support/fake_kube.py) runs each pod's command as a local process.

The tests swap the manager in for the default factory of `TrainingJob` (monkeypatching the
module's `LocalInstanceManager`), so the jobs run through `elasticdl.train` unchanged; a caller
of `TrainingJob` passes `instance_manager_factory=` instead (steps/train.py will).

With KUBECONFIG set and `-m on_cluster`, `test_job_on_a_real_cluster` runs the same job on a
real cluster (see conftest.py).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_kube import FakeKube, fake_kube
from job_checks import assert_records_accounted, context_of, report_of

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.k8s import manifests as m
from elasticdl.runtime.k8s.manager import KubernetesInstanceManager
from elasticdl.runtime.k8s.pod_states import CreationBackoff
from elasticdl.runtime.master import job as job_module

pytestmark = pytest.mark.slow

MODEL = {"model_def": "regressor.DNN", "params": "hidden_units=[8]"}
OPTIONS = dict(num_workers=2, num_ps=1, minibatch_size=64, num_epochs=2, records_per_task=128)


@pytest.fixture(scope="module")
def regression_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("regression")
    gen.generate("regression", str(out), 2048, records_per_file=1024)
    return out


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    with fake_kube() as fake:
        yield fake


class LoopbackManager(KubernetesInstanceManager):
    """The master runs in this process, not in a pod: cluster DNS is the fake's, so PS
    addresses come back as the fake's 127.0.0.1 ports (the pods get the same addresses)."""

    kube: FakeKube

    def start_ps(self, ps_id: int) -> str:
        return self.kube.rewrite(super().start_ps(ps_id), self.namespace)


def on_kubernetes(
    monkeypatch: pytest.MonkeyPatch,
    api_client: Callable[[], Any],
    namespace: str = "default",
    kube: FakeKube | None = None,
) -> list[KubernetesInstanceManager]:
    """Make TrainingJob start its PS and workers as pods; the managers it made."""
    made: list[KubernetesInstanceManager] = []

    def factory(config_path: Path, master_addr: str, log_dir: Path, **_: Any) -> Any:
        config = json.loads(Path(config_path).read_text())
        spec = m.ClusterSpec(
            job_name=config["job_name"],
            image=os.environ.get("ELASTICDL_TEST_IMAGE", "elasticdl:local"),
            master_addr=master_addr,
            namespace=namespace,
            owner=m.Owner.from_env(os.environ),
            termination_grace_s=10,
            volumes=tuple(m.parse_volumes(os.environ.get("ELASTICDL_TEST_VOLUME", ""))),
        )
        if kube is not None:
            LoopbackManager.kube = kube
        cls = LoopbackManager if kube is not None else KubernetesInstanceManager
        manager = cls(
            spec,
            Path(config_path).read_text(),
            api_client=api_client(),
            backoff=lambda: CreationBackoff(initial_s=0.1, max_s=1.0, max_attempts=20),
        )
        made.append(manager)
        return manager

    monkeypatch.setattr(job_module, "LocalInstanceManager", factory)
    return made


def train(tmp_path: Path, data: Path, **options: Any) -> tuple[Any, dict[str, Any]]:
    output = tmp_path / "model"
    result = elasticdl.train(
        data=str(data), output=str(output), log_dir=str(tmp_path / "logs"), **MODEL, **options
    )
    report = report_of(output if result.succeeded else tmp_path / "logs")
    return result, report


def test_a_job_runs_on_kubernetes(tmp_path, monkeypatch, kube, regression_data) -> None:
    managers = on_kubernetes(monkeypatch, kube.api_client, kube=kube)
    result, report = train(tmp_path, regression_data, job_name="k8s-e2e", **OPTIONS)
    assert result.succeeded, result.error
    assert_records_accounted(report)
    assert len(managers) == 1
    created = [p for method, p in kube.requests if method == "POST"]
    assert sum(p.endswith("/pods") for p in created) == 3  # 1 PS, 2 workers
    assert kube.pods() == [] and kube.names("services") == [] and kube.names("configmaps") == []


def chaos_in_the_fake(kube: FakeKube, pod: str, act: Callable[[str], None]) -> threading.Thread:
    """A second after `pod` is ready to train (its log says so), `act` on it from outside."""

    def run() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if " ready for train" in kube.logs(pod) and kube.get("pods", pod):
                time.sleep(1.0)
                act(pod)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("chaos", "expected_reason"),
    [
        ("worker1:kill@tasks=2", "killed"),  # the master deletes the pod with grace 0
        ("worker1:term@tasks=2", "preempted"),  # graceful delete: minibatch, report, exit 0
    ],
)
def test_chaos_through_the_kubernetes_code_path(
    tmp_path, monkeypatch, kube, regression_data, chaos: str, expected_reason: str
) -> None:
    on_kubernetes(monkeypatch, kube.api_client, kube=kube)
    result, report = train(tmp_path, regression_data, job_name="k8s-chaos", chaos=chaos, **OPTIONS)
    context = context_of(report, "records", "failures", "events", "workers")
    assert result.succeeded, result.error
    assert_records_accounted(report, max_redone=64)
    (worker1,) = [w for w in report["workers"]["instances"] if w["worker_id"] == 1]
    assert worker1["exit"]["reason"] == expected_reason, context
    assert report["workers"]["launched"] == 3, context


@pytest.mark.parametrize(
    ("act", "reason"),
    [("preempt", "preempted"), ("oom_kill", "oom"), ("delete", "preempted")],
)
def test_outside_failures_of_a_worker_pod(
    tmp_path, monkeypatch, kube, regression_data, act: str, reason: str
) -> None:
    on_kubernetes(monkeypatch, kube.api_client, kube=kube)
    actions = {
        "preempt": kube.preempt,
        "oom_kill": kube.oom_kill,
        "delete": lambda name: kube.delete("pods", "default", name, 0),
    }
    thread = chaos_in_the_fake(kube, "k8s-out-worker-1", actions[act])
    result, report = train(tmp_path, regression_data, job_name="k8s-out", **OPTIONS)
    thread.join(1)
    context = context_of(report, "records", "failures", "events", "workers")
    assert result.succeeded, result.error
    assert_records_accounted(report, max_redone=64)
    (worker1,) = [w for w in report["workers"]["instances"] if w["worker_id"] == 1]
    assert worker1["exit"]["reason"] == reason, context
    if reason == "oom":
        assert "OOMKilled" in worker1["exit"]["detail"], context


def test_ps_pod_killed_restores_from_checkpoint(
    tmp_path, monkeypatch, kube, regression_data
) -> None:
    on_kubernetes(monkeypatch, kube.api_client, kube=kube)
    result, report = train(
        tmp_path,
        regression_data,
        job_name="k8s-ps",
        chaos="ps0:kill@tasks=6",
        checkpoint_steps=5,
        **{**OPTIONS, "minibatch_size": 32},
    )
    context = context_of(report, "records", "failures", "events")
    assert result.succeeded, result.error
    (failure,) = report["failures"]
    assert failure["role"] == "ps" and "restored_version" in failure, context
    created = [p for method, p in kube.requests if method == "POST" and p.endswith("/services")]
    assert len(created) == 1, "the relaunched PS kept its Service (and address)"


@pytest.mark.on_cluster
def test_job_on_a_real_cluster(tmp_path, monkeypatch) -> None:
    """The same job with a worker killed, on a real cluster (set-up: conftest.py)."""
    import socket

    from elasticdl.runtime.k8s.manager import current_namespace, load_api_client

    if not os.environ.get("ELASTICDL_TEST_DATA") and not os.environ.get("ELASTICDL_TEST_DATA_DIR"):
        pytest.skip("set ELASTICDL_TEST_DATA (a URL the pods can read) or ELASTICDL_TEST_DATA_DIR")
    data = os.environ.get("ELASTICDL_TEST_DATA", "")
    if not data:
        directory = Path(os.environ["ELASTICDL_TEST_DATA_DIR"]) / "regression"
        gen.generate("regression", str(directory), 2048, records_per_file=1024)
        data = str(directory)
    namespace = os.environ.get("ELASTICDL_TEST_NAMESPACE") or current_namespace()
    on_kubernetes(monkeypatch, load_api_client, namespace)
    host = os.environ.get("MY_POD_IP") or socket.gethostbyname(socket.gethostname())
    job_name = f"edl-test-{int(time.time())}"
    result = elasticdl.train(
        data=data,
        output=str(tmp_path / "model"),
        master_host=host,
        job_name=job_name,
        chaos="worker1:kill@tasks=2",
        **MODEL,
        **OPTIONS,
    )
    assert result.succeeded, result.error
    assert_records_accounted(result.report, max_redone=64)
    (worker1,) = [w for w in result.report["workers"]["instances"] if w["worker_id"] == 1]
    assert worker1["exit"]["reason"] == "killed"
