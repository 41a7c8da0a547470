"""The pod state machine, driven by pod objects shaped like the API's watch events."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from elasticdl.runtime.k8s.pod_states import (
    EXIT_KIND,
    TRANSITIONS,
    CreationBackoff,
    Observation,
    Outcome,
    PodState,
    PodTracker,
    Refusal,
    classify,
    creation_refusal,
    newer,
)
from elasticdl.runtime.master.exits import ExitKind

NAME = "train-1a2b-worker-3"
UID = "6f1c9a52-2b1e-4a55-9d0e-0c3f5b8e7a11"


def pod(
    rv: int,
    phase: str = "Pending",
    *,
    name: str = NAME,
    uid: str = UID,
    running: bool = False,
    exit_code: int | None = None,
    term_reason: str = "",
    reason: str = "",
    message: str = "",
    deleting: bool = False,
    disruption: str = "",
    node: str = "gke-pool-1-abcd",
    waiting: str = "",
) -> dict[str, Any]:
    """A v1 Pod as the API server serialises it in a watch event."""
    state: dict[str, Any] = {}
    if exit_code is not None:
        state["terminated"] = {
            "exitCode": exit_code,
            "reason": term_reason or ("Completed" if exit_code == 0 else "Error"),
            "startedAt": "2025-05-01T10:00:05Z",
            "finishedAt": "2025-05-01T10:07:40Z",
            "containerID": "containerd://4be1c2d3",
        }
    elif running:
        state["running"] = {"startedAt": "2025-05-01T10:00:05Z"}
    else:
        state["waiting"] = {"reason": waiting or "ContainerCreating"}
    conditions = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-05-01T10:00:01Z"}
    ]
    if disruption:
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": disruption,
                "message": "Kubelet: eviction or preemption",
                "lastTransitionTime": "2025-05-01T10:07:39Z",
            }
        )
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": "10.128.0.7",
        "podIP": "10.4.2.17",
        "startTime": "2025-05-01T10:00:01Z",
        "qosClass": "Guaranteed",
        "containerStatuses": [
            {
                "name": "worker",
                "image": "gcr.io/p/zoo:abc",
                "imageID": "gcr.io/p/zoo@sha256:00",
                "ready": running and exit_code is None,
                "restartCount": 0,
                "started": running,
                "state": state,
            }
        ],
    }
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "ml",
        "uid": uid,
        "resourceVersion": str(rv),
        "creationTimestamp": "2025-05-01T10:00:00Z",
        "labels": {
            "elasticdl-job-name": "train-1a2b",
            "elasticdl-replica-type": "worker",
            "elasticdl-replica-index": "3",
        },
    }
    if deleting:
        metadata["deletionTimestamp"] = "2025-05-01T10:07:38Z"
        metadata["deletionGracePeriodSeconds"] = 60
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "worker",
                    "image": "gcr.io/p/zoo:abc",
                    "resources": {"limits": {"cpu": "1", "memory": "4Gi"}},
                }
            ],
        },
        "status": status,
    }


def run(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any, Any]]:
    """Feed events to a tracker expecting NAME; the decisions as (outcome, code, signal)."""
    tracker = PodTracker()
    tracker.expect(NAME, UID)
    out = []
    for event_type, obj in events:
        decision = tracker.observe(event_type, obj)
        if decision is not None:
            out.append((str(decision.outcome), decision.exit_code, decision.signal))
    return out


PENDING = ("ADDED", pod(100))
SCHEDULED = ("MODIFIED", pod(101, waiting="ContainerCreating"))
RUNNING = ("MODIFIED", pod(102, "Running", running=True))
STARTED = [PENDING, SCHEDULED, RUNNING]

SCENARIOS: dict[str, tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, Any, Any]]]] = {
    "runs and succeeds; the DELETED after Succeeded is ignored": (
        [
            *STARTED,
            ("MODIFIED", pod(110, "Succeeded", exit_code=0)),
            ("DELETED", pod(111, "Succeeded", exit_code=0)),
        ],
        [("running", None, None), ("succeeded", 0, None)],
    ),
    "preempted: SIGKILL (137) without OOMKilled": (
        [*STARTED, ("MODIFIED", pod(110, "Failed", exit_code=137))],
        [("running", None, None), ("preempted", None, 9)],
    ),
    "preempted by the scheduler: DisruptionTarget, SIGTERM, 143": (
        [
            *STARTED,
            ("MODIFIED", pod(105, "Running", running=True, disruption="PreemptionByScheduler")),
            ("MODIFIED", pod(106, "Running", running=True, deleting=True)),
            ("MODIFIED", pod(110, "Failed", exit_code=143, deleting=True)),
            ("DELETED", pod(111, "Failed", exit_code=143, deleting=True)),
        ],
        [("running", None, None), ("preempted", None, 15)],
    ),
    "node drain: the worker finishes its minibatch on SIGTERM and exits 0": (
        [
            *STARTED,
            ("MODIFIED", pod(106, "Running", running=True, deleting=True)),
            ("MODIFIED", pod(110, "Succeeded", exit_code=0, deleting=True)),
            ("DELETED", pod(111, "Succeeded", exit_code=0, deleting=True)),
        ],
        [("running", None, None), ("succeeded", 0, None)],
    ),
    "DELETED with phase Succeeded (the MODIFIED was missed)": (
        [*STARTED, ("DELETED", pod(111, "Succeeded", exit_code=0, deleting=True))],
        [("running", None, None), ("succeeded", 0, None)],
    ),
    "SIGTERM (143) with no deletion in sight is a failure": (
        [*STARTED, ("MODIFIED", pod(110, "Failed", exit_code=143))],
        [("running", None, None), ("failed", None, 15)],
    ),
    "OOMKilled": (
        [*STARTED, ("MODIFIED", pod(110, "Failed", exit_code=137, term_reason="OOMKilled"))],
        [("running", None, None), ("oom", None, 9)],
    ),
    "kubelet eviction under node pressure": (
        [
            *STARTED,
            (
                "MODIFIED",
                pod(
                    110,
                    "Failed",
                    exit_code=137,
                    reason="Evicted",
                    message="The node was low on resource: ephemeral-storage.",
                    disruption="TerminationByKubelet",
                ),
            ),
        ],
        [("running", None, None), ("preempted", None, 9)],
    ),
    "eviction before the container ran (no terminated state)": (
        [PENDING, ("MODIFIED", pod(103, "Failed", reason="Evicted", message="low memory"))],
        [("preempted", None, None)],
    ),
    "node lost: phase Unknown": (
        [*STARTED, ("MODIFIED", pod(120, "Unknown", running=True, reason="NodeLost"))],
        [("running", None, None), ("preempted", None, None)],
    ),
    "deleted while Pending": (
        [
            PENDING,
            ("MODIFIED", pod(101, deleting=True)),
            ("DELETED", pod(102, deleting=True)),
        ],
        [("preempted", None, None)],
    ),
    "deleted while Pending, only the DELETED seen": (
        [("DELETED", pod(102, deleting=True))],
        [("preempted", None, None)],
    ),
    "deleted while Running (grace 0: no termination state recorded)": (
        [*STARTED, ("DELETED", pod(130, "Running", running=True, deleting=True))],
        [("running", None, None), ("preempted", None, None)],
    ),
    "user error: exit 1": (
        [*STARTED, ("MODIFIED", pod(110, "Failed", exit_code=1))],
        [("running", None, None), ("failed", 1, None)],
    ),
    "duplicate events change nothing": (
        [PENDING, PENDING, RUNNING, RUNNING, RUNNING, ("MODIFIED", pod(110, "Failed", exit_code=2))]
        * 2,
        [("running", None, None), ("failed", 2, None)],
    ),
    "out of order: an older Running after the exit is ignored": (
        [
            *STARTED,
            ("MODIFIED", pod(110, "Failed", exit_code=1)),
            ("MODIFIED", pod(105, "Running", running=True)),
        ],
        [("running", None, None), ("failed", 1, None)],
    ),
    "out of order: a resync lists an older Pending after Running": (
        [RUNNING, ("ADDED", pod(100)), ("MODIFIED", pod(110, "Failed", exit_code=137))],
        [("running", None, None), ("preempted", None, 9)],
    ),
    "another incarnation under the same name is ignored": (
        [*STARTED, ("MODIFIED", pod(200, "Failed", exit_code=1, uid="other-uid"))],
        [("running", None, None)],
    ),
    "ADDED may be the first and terminal event (watch started late)": (
        [("ADDED", pod(300, "Failed", exit_code=137, term_reason="OOMKilled"))],
        [("oom", None, 9)],
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenarios(name: str) -> None:
    events, expected = SCENARIOS[name]
    assert run(copy.deepcopy(events)) == expected


@pytest.mark.parametrize(
    ("event", "observation"),
    [
        (PENDING, Observation.PENDING),
        (RUNNING, Observation.RUNNING),
        (("MODIFIED", pod(1, "Running", running=True, deleting=True)), Observation.TERMINATING),
        (("MODIFIED", pod(1, "Succeeded", exit_code=0)), Observation.EXITED_OK),
        (
            ("MODIFIED", pod(1, "Failed", exit_code=137, term_reason="OOMKilled")),
            Observation.OOM_KILLED,
        ),
        (("MODIFIED", pod(1, "Failed", exit_code=137)), Observation.KILLED),
        (("MODIFIED", pod(1, "Failed", exit_code=143, deleting=True)), Observation.SIGTERM_DRAIN),
        (("MODIFIED", pod(1, "Failed", exit_code=143)), Observation.SIGTERM),
        (("MODIFIED", pod(1, "Failed", exit_code=1)), Observation.ERROR),
        (("MODIFIED", pod(1, "Unknown", reason="NodeLost")), Observation.NODE_LOST),
        (("MODIFIED", pod(1, "Failed", reason="Evicted")), Observation.EVICTED),
        (("DELETED", pod(1, "Running", running=True)), Observation.VANISHED),
    ],
)
def test_classify(event: tuple[str, dict[str, Any]], observation: Observation) -> None:
    assert classify(*event) is observation


def test_the_table_covers_every_end_from_every_live_state() -> None:
    ends = [o for o in Observation if o not in (Observation.PENDING, Observation.RUNNING)]
    for state, observation in itertools.product(PodState, ends):
        if state is PodState.DONE:
            assert (state, observation) not in TRANSITIONS
        elif observation is not Observation.TERMINATING:
            to, outcome = TRANSITIONS[(state, observation)]
            assert to is PodState.DONE and outcome is not None
    assert EXIT_KIND[Outcome.OOM] is ExitKind.OOM
    assert EXIT_KIND[Outcome.PREEMPTED] is ExitKind.PREEMPTED
    assert EXIT_KIND[Outcome.FAILED] is ExitKind.FAILED
    assert set(EXIT_KIND) == set(Outcome)


def test_decision_messages() -> None:
    tracker = PodTracker()
    tracker.expect(NAME, UID)
    oom = tracker.observe("MODIFIED", pod(5, "Failed", exit_code=137, term_reason="OOMKilled"))
    assert oom is not None and oom.kind is ExitKind.OOM and oom.ended
    assert (
        "OOMKilled" in oom.message
        and "4Gi" in oom.message
        and "not to be relaunched" in oom.message
    )
    tracker.expect("lost", UID)
    lost = tracker.observe("MODIFIED", pod(5, "Unknown", name="lost", reason="NodeLost"))
    assert lost is not None and lost.force_delete and "lost its node" in lost.message
    tracker.expect("err", UID)
    err = tracker.observe("MODIFIED", pod(5, "Failed", name="err", exit_code=3, message="boom"))
    assert err is not None and "exit code 3" in err.message and "boom" in err.message


def test_unexpected_pods_and_other_event_types_are_ignored() -> None:
    tracker = PodTracker()
    assert tracker.observe("MODIFIED", pod(5, "Failed", exit_code=1)) is None
    tracker.expect(NAME, UID)
    assert tracker.observe("BOOKMARK", pod(5)) is None
    assert tracker.observe("ERROR", {"kind": "Status", "code": 410}) is None
    assert tracker.live() == [NAME]


def test_resync_finds_pods_deleted_while_the_watch_was_down() -> None:
    tracker = PodTracker()
    for name in ("a", "b", "c"):
        tracker.expect(name, UID)
    tracker.observe("ADDED", pod(1, "Running", name="a", running=True))
    tracker.observe("ADDED", pod(2, "Succeeded", name="c", exit_code=0))
    decisions = tracker.vanished(expected=["a", "b", "c"], listed=["b"])
    assert [(d.pod, d.outcome) for d in decisions] == [("a", Outcome.PREEMPTED)]
    assert tracker.state("a") is PodState.DONE and tracker.live() == ["b"]
    assert tracker.vanished(["a", "b"], ["b"]) == []


def test_newer() -> None:
    assert newer("10", "") and newer("10", "9") and not newer("9", "10") and not newer("9", "9")
    assert newer("abc", "abd") and not newer("abc", "abc") and not newer("", "5")


@pytest.mark.parametrize(
    ("status", "message", "refusal"),
    [
        (
            403,
            'pods "w-3" is forbidden: exceeded quota: compute, requested: cpu=1, used: cpu=8, '
            "limited: cpu=8",
            Refusal.RETRY,
        ),
        (403, 'pods is forbidden: User "x" cannot create resource "pods"', Refusal.FATAL),
        (409, 'pods "w-3" already exists', Refusal.CONFLICT),
        (429, "too many requests", Refusal.RETRY),
        (503, "", Refusal.RETRY),
        (422, "Pod is invalid", Refusal.FATAL),
        (404, 'namespaces "ml" not found', Refusal.FATAL),
    ],
)
def test_creation_refusal(status: int, message: str, refusal: Refusal) -> None:
    assert creation_refusal(status, message) is refusal


def test_creation_backoff_doubles_caps_and_gives_up() -> None:
    backoff = CreationBackoff(initial_s=1, factor=2, max_s=5, jitter=0.0, max_attempts=5)
    assert [backoff.next_delay() for _ in range(6)] == [1, 2, 4, 5, 5, None]
    backoff.reset()
    assert backoff.next_delay() == 1
    jittered = CreationBackoff(initial_s=10, jitter=0.5, rand=lambda: 1.0)
    assert jittered.next_delay() == 5.0
    bounded = CreationBackoff(initial_s=10, factor=1, jitter=0, give_up_after_s=25)
    assert [bounded.next_delay() for _ in range(4)] == [10, 10, 10, None]


def test_events_before_the_uid_is_known_are_held_and_replayed() -> None:
    tracker = PodTracker()
    tracker.expect(NAME)  # the create call has not returned yet
    stale = pod(50, "Running", uid="stale-uid", running=True, deleting=True)
    assert tracker.observe("MODIFIED", stale) is None
    assert tracker.observe("DELETED", pod(51, "Running", uid="stale-uid", deleting=True)) is None
    assert tracker.observe("ADDED", pod(60)) is None
    assert tracker.observe("MODIFIED", pod(61, "Running", running=True)) is None
    decisions = tracker.bind(NAME, UID)
    assert [d.outcome for d in decisions] == [Outcome.RUNNING]
    assert tracker.state(NAME) is PodState.RUNNING
    assert tracker.observe("DELETED", pod(70, "Running", uid="stale-uid")) is None
    end = tracker.observe("MODIFIED", pod(71, "Failed", exit_code=1, message="x"))
    assert end is not None and end.outcome is Outcome.FAILED


def test_log_tail_and_one_line_message() -> None:
    tracker = PodTracker()
    tracker.expect(NAME, UID)
    failed = pod(5, "Failed", exit_code=1)
    failed["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = (
        "Traceback (most recent call last):\n  ...\nValueError: bad input\n"
    )
    decision = tracker.observe("MODIFIED", failed)
    assert decision is not None
    assert decision.log_tail.endswith("ValueError: bad input\n")
    assert decision.message.endswith("exit code 1 (Error): ValueError: bad input")
