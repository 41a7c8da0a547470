"""A whole training job "on Kubernetes": the master in this process manages its PS and worker
pods through KubernetesInstanceManager and the official client; the loopback fake API server
(tests/support/fake_kube.py) runs each pod's command as a local process.

Each test passes `TrainingJob` an `instance_manager_factory` that makes the Kubernetes manager,
as steps/train.py does with --instance_manager kubernetes; the options are `elasticdl train`'s
flags (`options_from_kwargs`).

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
from paced_jobs import PACED_WORKERS, SLOW_WORKER0

from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.k8s import manifests as m
from elasticdl.runtime.k8s.manager import KubernetesInstanceManager
from elasticdl.runtime.k8s.pod_states import CreationBackoff
from elasticdl.runtime.master.training_job import TrainingJob
from elasticdl.train_command import options_from_kwargs

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


class OnKubernetes:
    """An `instance_manager_factory` for `TrainingJob` that starts the PS and workers as pods;
    `made` holds the managers it made."""

    def __init__(
        self,
        api_client: Callable[[], Any],
        namespace: str = "default",
        kube: FakeKube | None = None,
        tls_secret: str = "",
    ) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self.kube = kube
        self.tls_secret = tls_secret
        self.made: list[KubernetesInstanceManager] = []

    def __call__(self, config_path: Path, master_addr: str, log_dir: Path) -> Any:
        config = json.loads(Path(config_path).read_text())
        spec = m.ClusterSpec(
            job_name=config["job_name"],
            image=os.environ.get("ELASTICDL_TEST_IMAGE", "elasticdl:local"),
            master_addr=master_addr,
            namespace=self.namespace,
            owner=m.Owner.from_env(os.environ),
            termination_grace_s=10,
            volumes=tuple(m.parse_volumes(os.environ.get("ELASTICDL_TEST_VOLUME", ""))),
            tls_secret=self.tls_secret,
        )
        if self.kube is not None:
            LoopbackManager.kube = self.kube
        cls = LoopbackManager if self.kube is not None else KubernetesInstanceManager
        manager = cls(
            spec,
            Path(config_path).read_text(),
            api_client=self.api_client(),
            backoff=lambda: CreationBackoff(initial_s=0.1, max_s=1.0, max_attempts=20),
            job_secret=(Path(config_path).parent / "job.secret").read_text(),
        )
        self.made.append(manager)
        return manager


def run_job(factory: OnKubernetes, **flags: Any) -> Any:
    """A training job with `elasticdl train` flags whose instances `factory` manages."""
    return TrainingJob(options_from_kwargs(**flags), instance_manager_factory=factory).run()


def train(
    tmp_path: Path, data: Path, factory: OnKubernetes, **options: Any
) -> tuple[Any, dict[str, Any]]:
    output = tmp_path / "model"
    result = run_job(
        factory,
        data=str(data),
        output=str(output),
        log_dir=str(tmp_path / "logs"),
        **{**MODEL, **options},
    )
    report = report_of(output if result.succeeded else tmp_path / "logs")
    return result, report


def test_a_job_runs_on_kubernetes(tmp_path, kube, regression_data) -> None:
    factory = OnKubernetes(kube.api_client, kube=kube)
    result, report = train(tmp_path, regression_data, factory, job_name="k8s-e2e", **OPTIONS)
    assert result.succeeded, result.error
    assert_records_accounted(report)
    assert len(factory.made) == 1
    created = [p for method, p in kube.requests if method == "POST"]
    assert sum(p.endswith("/pods") for p in created) == 3  # 1 PS, 2 workers
    assert kube.pods() == [] and kube.names("services") == [] and kube.names("configmaps") == []
    # The job's own NetworkPolicy was there while it ran and went with it.
    assert any(p.endswith("/networkpolicies") for p in created)
    assert kube.names("networkpolicies") == []


def test_tls_on_kubernetes_comes_from_a_secret_every_pod_projects(
    tmp_path, kube, regression_data
) -> None:
    """--tls: the master serves with the Secret's certificate (here: its own copy, as the
    pipeline step mounts it); the PS and worker pods read the same Secret's files beside
    job.json, so every channel of the job is TLS and the job trains."""
    import base64

    from kubernetes import client
    from tls_certs import self_signed

    self_signed(tmp_path / "tls")
    data = {k: base64.b64encode((tmp_path / "tls" / k).read_bytes()).decode() for k in m.TLS_KEYS}
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "job-tls"},
        "type": "kubernetes.io/tls",
        "data": data,
    }
    client.CoreV1Api(kube.api_client()).create_namespaced_secret("default", body)
    factory = OnKubernetes(kube.api_client, kube=kube, tls_secret="job-tls")
    result, report = train(
        tmp_path,
        regression_data,
        factory,
        job_name="k8s-tls",
        tls_dir=str(tmp_path / "tls"),
        **OPTIONS,
    )
    assert result.succeeded, result.error
    assert_records_accounted(report)
    config = json.loads(factory.made[0]._config_json)
    assert config["tls_dir"] == m.TLS_SUBDIR, config
    pods = [p for method, p in kube.requests if method == "POST" and p.endswith("/pods")]
    assert len(pods) == 3


def test_tls_files_of_the_master_alone_are_refused_on_kubernetes(tmp_path) -> None:
    spec = m.ClusterSpec(job_name="j", image="i", master_addr="127.0.0.1:1")
    with pytest.raises(m.ManifestError, match="--tls true"):
        m.config_for_pods(spec, json.dumps({"tls_dir": str(tmp_path)}))


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
    tmp_path, kube, regression_data, chaos: str, expected_reason: str
) -> None:
    factory = OnKubernetes(kube.api_client, kube=kube)
    options = {**OPTIONS, **SLOW_WORKER0, "num_epochs": 1}
    result, report = train(
        tmp_path, regression_data, factory, job_name="k8s-chaos", chaos=chaos, **options
    )
    context = context_of(report, "records", "failures", "events", "workers")
    assert result.succeeded, result.error
    assert_records_accounted(report, max_redone=64)
    (worker1,) = [w for w in report["workers"]["instances"] if w["worker_id"] == 1]
    assert worker1["exit"] is not None, context
    assert worker1["exit"]["reason"] == expected_reason, context
    assert report["workers"]["launched"] == 3, context


def test_a_spare_pod_takes_the_place_of_a_killed_worker_pod(tmp_path, kube, regression_data):
    factory = OnKubernetes(kube.api_client, kube=kube)
    options = {**OPTIONS, **SLOW_WORKER0, "num_epochs": 1, "records_per_task": 64}
    result, report = train(
        tmp_path,
        regression_data,
        factory,
        job_name="k8s-spare",
        chaos="worker0:kill@tasks=6",
        **{**options, "num_workers": 1, "spare_workers": 1, "minibatch_size": 32},
    )
    context = context_of(report, "records", "failures", "events", "workers")
    assert result.succeeded, result.error
    assert_records_accounted(report, max_redone=32)
    (failure,) = report["failures"]
    assert failure["relaunched_as"] == 1, context
    (promoted,) = [e for e in report["events"] if e["kind"] == "spare_promoted"]
    assert (promoted["worker_id"], promoted["replaces"]) == (1, 0), context
    assert report["workers"]["instances"][1]["spare"]["promoted_at"] is not None, context


@pytest.mark.parametrize(
    ("act", "reason"),
    [("preempt", "preempted"), ("oom_kill", "oom"), ("delete", "preempted")],
)
def test_outside_failures_of_a_worker_pod(
    tmp_path, kube, regression_data, act: str, reason: str
) -> None:
    factory = OnKubernetes(kube.api_client, kube=kube)
    actions = {
        "preempt": kube.preempt,
        "oom_kill": kube.oom_kill,
        "delete": lambda name: kube.delete("pods", "default", name, 0),
    }
    thread = chaos_in_the_fake(kube, "k8s-out-worker-1", actions[act])
    # Paced (2 ms a record, 4 s of training for two workers): the act, a second after worker 1
    # is ready, comes while the job still trains, however fast the machine and late worker 1.
    options = {**OPTIONS, **PACED_WORKERS}
    result, report = train(tmp_path, regression_data, factory, job_name="k8s-out", **options)
    thread.join(1)
    context = context_of(report, "records", "failures", "events", "workers")
    assert result.succeeded, result.error
    assert_records_accounted(report, max_redone=64)
    (worker1,) = [w for w in report["workers"]["instances"] if w["worker_id"] == 1]
    assert worker1["exit"]["reason"] == reason, context
    if reason == "oom":
        assert "OOMKilled" in worker1["exit"]["detail"], context


def test_ps_pod_killed_restores_from_checkpoint(tmp_path, kube, regression_data) -> None:
    factory = OnKubernetes(kube.api_client, kube=kube)
    result, report = train(
        tmp_path,
        regression_data,
        factory,
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


def test_a_running_job_is_resized_through_its_config_map(tmp_path, kube, regression_data):
    """`elasticdl scale JOB --workers N` on Kubernetes: grow by two pods, retire one."""
    from kubernetes import client

    from elasticdl.runtime.k8s.scale import request_scale

    api = client.CoreV1Api(kube.api_client())
    answers: list[str] = []

    def resize() -> None:
        assert kube.wait_for(lambda: kube.get("configmaps", "k8s-scale-config"), timeout=120)
        answers.append(request_scale(api, "default", "k8s-scale", 3, wait_s=120))
        answers.append(request_scale(api, "default", "k8s-scale", 2, wait_s=120))

    thread = threading.Thread(target=resize, daemon=True)
    thread.start()
    factory = OnKubernetes(kube.api_client, kube=kube)
    # Worker 0 takes 20 ms a record: the job lasts until the pods it grew by have trained.
    result = run_job(
        factory,
        job_name="k8s-scale",
        **SLOW_WORKER0,
        data=str(regression_data),
        output=str(tmp_path / "model"),
        log_dir=str(tmp_path / "logs"),
        num_workers=1,
        records_per_task=128,
        minibatch_size=32,
    )
    thread.join(5)
    assert result.succeeded, result.error
    report = result.report
    context = context_of(report, "workers", "failures", "events", "tasks")
    assert answers == [
        "scaled from 1 to 3 worker(s): started worker(s) 1, 2",
        "scaled from 3 to 2 worker(s): retiring worker(s) 2",
    ], context
    assert_records_accounted(report)
    assert report["failures"] == [] and report["workers"]["target"] == 2, context
    assert report["tasks"]["by_worker"].get("1", 0) > 0, context
    assert [s["source"] for s in report["workers"]["scaling"]] == ["configmap k8s-scale-config"] * 2
    created = [p for method, p in kube.requests if method == "POST" and p.endswith("/pods")]
    assert len(created) == 4, "1 PS and 3 workers"


@pytest.mark.on_cluster
def test_job_on_a_real_cluster(tmp_path) -> None:
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
    factory = OnKubernetes(load_api_client, namespace)
    host = os.environ.get("MY_POD_IP") or socket.gethostbyname(socket.gethostname())
    job_name = f"edl-test-{int(time.time())}"
    result = run_job(
        factory,
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
