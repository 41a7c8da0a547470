"""KubernetesInstanceManager through the official client against the loopback fake API server.

Pods run a small stand-in process (a sleeper that leaves with 0 on SIGTERM, or one that fails):
these tests are about the API layer, not training; test_on_kubernetes.py runs a real job.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_kube import FakeKube, fake_kube

from elasticdl.runtime.k8s import manifests as m
from elasticdl.runtime.k8s.manager import KubernetesInstanceManager, PodExit
from elasticdl.runtime.k8s.pod_states import CreationBackoff
from elasticdl.runtime.k8s.throttle import ApiPace
from elasticdl.runtime.master.instances import InstanceExit, Role

SLEEPER = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)
FAILS = "import sys\nprint('loading the model', flush=True)\nsys.exit('ValueError: bad params')\n"
BEHAVIOUR: dict[str, str] = {}


def stand_in(pod: dict[str, Any], kube: FakeKube) -> list[str]:
    return [sys.executable, "-c", BEHAVIOUR.get(pod["metadata"]["name"], SLEEPER)]


def fast_backoff() -> CreationBackoff:
    return CreationBackoff(initial_s=0.05, factor=2, max_s=0.2, jitter=0, max_attempts=8)


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    BEHAVIOUR.clear()
    with fake_kube(command=stand_in) as fake:
        yield fake


def make_manager(kube: FakeKube, **kwargs: Any) -> KubernetesInstanceManager:
    spec = m.ClusterSpec(
        job_name="job1",
        image="elasticdl:test",
        master_addr="127.0.0.1:50001",
        owner=m.Owner("job1-master", "3d6f0c52-0000-4000-8000-000000000001"),
        worker_resources=m.resources("cpu=1,memory=1Gi"),
        termination_grace_s=5,
    )
    manager = KubernetesInstanceManager(
        spec,
        '{"job_name": "job1"}',
        api_client=kube.api_client(),
        backoff=kwargs.pop("backoff", fast_backoff),
        watch_timeout_s=kwargs.pop("watch_timeout_s", 2),
        **kwargs,
    )
    assert manager.wait_watching(10)
    return manager


@pytest.fixture
def manager(kube: FakeKube) -> Iterator[KubernetesInstanceManager]:
    manager = make_manager(kube)
    yield manager
    manager.shutdown(grace_s=1)


def wait_exits(manager: KubernetesInstanceManager, n: int = 1, timeout: float = 20) -> list[Any]:
    found: list[InstanceExit] = []
    deadline = time.monotonic() + timeout
    while len(found) < n and time.monotonic() < deadline:
        found += manager.exits(timeout=0.1)
    assert len(found) >= n, f"expected {n} exits, got {found}"
    return found


def running(kube: FakeKube, name: str) -> bool:
    pod = kube.get("pods", name)
    return bool(pod) and pod["status"].get("phase") == "Running"


def ready(kube: FakeKube, name: str) -> bool:
    """Running, and the stand-in has installed its SIGTERM handler."""
    return running(kube, name) and "ready" in kube.logs(name)


def test_start_creates_config_service_and_pods(kube: FakeKube, manager) -> None:
    address = manager.start_ps(0)
    assert address == "job1-ps-0.default.svc:2222"
    manager.start_worker(0, [address])
    manager.start_worker(1, [address])
    assert manager.alive(Role.PS) == [0] and manager.alive(Role.WORKER) == [0, 1]
    assert kube.names("configmaps") == ["job1-config"]
    assert kube.names("services") == ["job1-ps-0"]
    assert kube.wait_for(lambda: all(running(kube, f"job1-worker-{i}") for i in (0, 1)))
    assert kube.wait_for(lambda: running(kube, "job1-ps-0"))
    worker = kube.get("pods", "job1-worker-1")
    assert worker["metadata"]["labels"] == {
        m.LABEL_JOB: "job1",
        m.LABEL_TYPE: "worker",
        m.LABEL_INDEX: "1",
    }
    assert worker["metadata"]["ownerReferences"][0]["name"] == "job1-master"
    assert manager.exits(timeout=0.2) == []


def test_sigterm_deletes_gracefully_and_the_worker_leaves_with_0(kube, manager) -> None:
    manager.start_worker(0, [])
    assert kube.wait_for(lambda: ready(kube, "job1-worker-0"))
    assert manager.signal(Role.WORKER, 0, signal.SIGTERM)
    (exit_,) = wait_exits(manager)
    assert isinstance(exit_, PodExit)
    assert (exit_.role, exit_.index, exit_.exit_code, exit_.signal) == (Role.WORKER, 0, 0, None)
    assert exit_.reason == "exited"
    assert manager.alive(Role.WORKER) == []
    assert kube.wait_for(lambda: kube.get("pods", "job1-worker-0") is None)
    assert not manager.signal(Role.WORKER, 0, signal.SIGTERM)


def test_sigkill_by_the_master_is_killed_not_preempted(kube, manager) -> None:
    manager.start_worker(0, [])
    assert kube.wait_for(lambda: running(kube, "job1-worker-0"))
    assert manager.signal(Role.WORKER, 0, signal.SIGKILL)
    (exit_,) = wait_exits(manager)
    assert exit_.signal == signal.SIGKILL and exit_.reason == "killed"
    assert "deleted by the master (SIGKILL)" in exit_.describe()
    assert not manager.signal(Role.WORKER, 0, signal.SIGSTOP)


@pytest.mark.parametrize(
    ("act", "reason", "sig", "words"),
    [
        (lambda kube, name: kube.preempt(name), "preempted", 9, "SIGKILL"),
        (lambda kube, name: kube.oom_kill(name), "oom", 9, "OOMKilled"),
        (lambda kube, name: kube.evict(name), "preempted", 9, "evicted"),
        (lambda kube, name: kube.delete("pods", "default", name, 0), "preempted", None, "deleted"),
        (lambda kube, name: kube.lose_node(name), "preempted", None, "lost its node"),
    ],
    ids=["preempted-137", "oom", "evicted", "deleted-force", "node-lost"],
)
def test_outside_events(kube, manager, act, reason: str, sig: int | None, words: str) -> None:
    manager.start_worker(4, [])
    assert kube.wait_for(lambda: running(kube, "job1-worker-4"))
    act(kube, "job1-worker-4")
    (exit_,) = wait_exits(manager)
    assert (exit_.index, exit_.reason, exit_.signal) == (4, reason, sig)
    assert words in exit_.describe()
    if reason == "oom":
        assert "not to be relaunched" in exit_.describe() and "1Gi" in exit_.describe()
    if words == "lost its node":  # the manager force-deletes the lingering pod
        assert kube.wait_for(lambda: kube.get("pods", "job1-worker-4") is None)
    assert manager.alive(Role.WORKER) == []


def test_node_drain_sigterm_then_exit_0(kube, manager) -> None:
    manager.start_worker(2, [])
    assert kube.wait_for(lambda: ready(kube, "job1-worker-2"))
    kube.delete("pods", "default", "job1-worker-2", 30)  # kubectl drain: graceful eviction
    (exit_,) = wait_exits(manager)
    assert (exit_.exit_code, exit_.reason) == (0, "exited")


def test_failure_reports_exit_code_and_log_tail(kube, manager) -> None:
    BEHAVIOUR["job1-worker-0"] = FAILS
    manager.start_worker(0, [])
    (exit_,) = wait_exits(manager)
    assert (exit_.exit_code, exit_.reason) == (1, "failed")
    assert exit_.log_tail.rstrip().endswith("ValueError: bad params")
    assert "exit code 1" in exit_.describe() and "ValueError: bad params" in exit_.describe()


def test_deleted_while_pending(kube, manager) -> None:
    kube.hold("job1-worker-0")
    manager.start_worker(0, [])
    assert kube.wait_for(lambda: kube.get("pods", "job1-worker-0") is not None)
    kube.delete("pods", "default", "job1-worker-0", 30)
    (exit_,) = wait_exits(manager)
    assert exit_.reason == "preempted" and "deleted while Pending" in exit_.describe()


def test_quota_refusal_is_retried_with_backoff(kube, manager) -> None:
    kube.refuse_creates(3)
    manager.start_worker(0, [])
    assert manager.alive(Role.WORKER) == [0]  # pending creation counts as alive
    assert kube.wait_for(lambda: running(kube, "job1-worker-0"), timeout=10)
    posts = [p for method, p in kube.requests if method == "POST" and p.endswith("/pods")]
    assert len(posts) == 4
    assert manager.exits(timeout=0.2) == []


def test_refusal_for_good_or_past_the_backoff_is_a_failed_exit(kube, manager) -> None:
    kube.refuse_creates(1, code=403, message='pods is forbidden: User "sa" cannot create pods')
    manager.start_worker(0, [])
    (exit_,) = wait_exits(manager)
    assert exit_.reason == "failed" and "cannot create pods" in exit_.describe()
    kube.refuse_creates(100)
    manager.start_worker(1, [])
    (exit_,) = wait_exits(manager, timeout=10)
    assert exit_.index == 1 and "after 8 retries" in exit_.describe()
    assert "exceeded quota" in exit_.describe()


def test_signal_cancels_a_creation_still_refused(kube, manager) -> None:
    kube.refuse_creates(100)
    manager.start_worker(0, [])
    assert manager.signal(Role.WORKER, 0, signal.SIGKILL)
    (exit_,) = wait_exits(manager)
    assert exit_.signal == signal.SIGKILL and manager.alive(Role.WORKER) == []


def test_ps_relaunch_keeps_its_address(kube, manager) -> None:
    first = manager.start_ps(0)
    assert kube.wait_for(lambda: running(kube, "job1-ps-0"))
    kube.preempt("job1-ps-0")
    (exit_,) = wait_exits(manager)
    assert exit_.role is Role.PS and exit_.reason == "preempted"
    assert manager.start_ps(0) == first
    assert kube.wait_for(lambda: running(kube, "job1-ps-0-r1"))
    assert manager.alive(Role.PS) == [0]
    assert kube.names("services") == ["job1-ps-0"]


def test_stale_objects_from_an_earlier_attempt_are_replaced(kube: FakeKube) -> None:
    api = kube.api_client()
    from kubernetes import client

    core = client.CoreV1Api(api)
    old = m.ClusterSpec("job1", "elasticdl:old", "127.0.0.1:1", owner=m.Owner("old", "u0"))
    core.create_namespaced_config_map("default", m.config_map(old, "{}"))
    core.create_namespaced_service("default", m.ps_service(old, 0))
    core.create_namespaced_pod("default", m.worker_pod(old, 0, [], "old-launch"))
    assert kube.wait_for(lambda: running(kube, "job1-worker-0"))
    manager = make_manager(kube)
    try:
        manager.start_ps(0)
        manager.start_worker(0, [])
        assert kube.wait_for(
            lambda: (
                running(kube, "job1-worker-0")
                and kube.get("pods", "job1-worker-0")["spec"]["containers"][0]["image"]
                == "elasticdl:test"
            )
        )
        assert kube.get("configmaps", "job1-config")["data"] == {"job.json": '{"job_name": "job1"}'}
        owner = kube.get("services", "job1-ps-0")["metadata"]["ownerReferences"][0]
        assert owner["name"] == "job1-master"
        assert manager.exits(timeout=0.5) == []  # the stale pod's end is not ours
        assert manager.alive(Role.WORKER) == [0]
    finally:
        manager.shutdown(grace_s=1)


def test_watch_survives_410_gone(kube: FakeKube) -> None:
    manager = make_manager(kube, watch_timeout_s=1)
    try:
        manager.start_worker(0, [])
        assert kube.wait_for(lambda: running(kube, "job1-worker-0"))
        lists_before = sum(1 for method, p in kube.requests if method == "GET")
        kube.compact()
        time.sleep(1.5)  # the watch request ends; watching from its version answers 410
        kube.preempt("job1-worker-0")
        (exit_,) = wait_exits(manager)
        assert exit_.reason == "preempted"
        assert sum(1 for method, p in kube.requests if method == "GET") >= lists_before + 2
    finally:
        manager.shutdown(grace_s=1)


def test_shutdown_deletes_everything(kube: FakeKube) -> None:
    manager = make_manager(kube)
    manager.start_ps(0)
    manager.start_worker(0, [manager.start_ps(1)])
    assert kube.wait_for(
        lambda: (
            len(kube.pods()) == 3 and all(running(kube, p["metadata"]["name"]) for p in kube.pods())
        )
    )
    started = time.monotonic()
    manager.shutdown(grace_s=2)
    assert time.monotonic() - started < 5
    assert kube.pods() == [] and kube.names("services") == [] and kube.names("configmaps") == []
    assert manager.alive(Role.PS) == [] and manager.alive(Role.WORKER) == []
    manager.shutdown(grace_s=1)  # twice is fine
    with pytest.raises(RuntimeError, match="shut down"):
        manager.start_worker(5, [])


def pod_posts(kube: FakeKube) -> list[float]:
    """When each pod creation reached the API server, in order."""
    return sorted(
        t for t, method, p in kube.timed_requests if method == "POST" and p.endswith("/pods")
    )


def test_creations_keep_to_the_rate_limit(kube: FakeKube) -> None:
    """A token bucket (10 a second, bursts of 2 here) paces pod creations: 12 pods take at
    least (12 - 2) / 10 = 1 s from the first creation to the last, however fast the server."""
    manager = make_manager(kube, pace=ApiPace(qps=10, burst=2))
    try:
        for worker_id in range(12):
            manager.start_worker(worker_id, [])
        # The manager's own view: its watch saw every pod running.
        assert kube.wait_for(lambda: manager.running(Role.WORKER) == list(range(12)), timeout=60)
        posts = pod_posts(kube)
        assert len(posts) == 12
        assert posts[-1] - posts[0] >= 1.0 - 0.1, posts
        # No window holds more than the bucket allows (2 at once, then 10 a second).
        for i, start in enumerate(posts):
            within = [t for t in posts[i:] if t - start <= 0.5]
            assert len(within) <= 2 + 0.5 * 10 + 1, (start, within)
    finally:
        manager.shutdown(grace_s=1)


def test_a_429_holds_every_creation_back_for_its_retry_after(kube: FakeKube, manager) -> None:
    """An API server answering 429 Too Many Requests with Retry-After: 1 gets no creation
    (of any pod, not only the refused one) for that second; then every pod is created."""
    kube.refuse_creates(
        2, code=429, message="too many requests, please try again later", retry_after=1
    )
    for worker_id in range(3):
        manager.start_worker(worker_id, [])
    names = [f"job1-worker-{i}" for i in range(3)]
    assert kube.wait_for(lambda: all(running(kube, n) for n in names), timeout=30)
    posts = pod_posts(kube)
    assert len(posts) == 5  # two refused, three created
    assert posts[1] - posts[0] >= 0.95 and posts[2] - posts[1] >= 0.95, posts
    assert manager.exits(timeout=0.2) == []
