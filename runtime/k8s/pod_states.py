"""What a PS or worker pod's watch events mean for the job, as pure logic.

The Kubernetes instance manager feeds every watch event (and every object a resync lists) to a
`PodTracker`; the tracker answers with at most one `Decision` per pod and event. Nothing here
talks to the API, reads a clock or sleeps.

**Step 1: classify.** `classify(event_type, pod)` reduces one event (`ADDED`, `MODIFIED` or
`DELETED` with the pod object as the API's JSON shapes it: camelCase dicts) to an
`Observation`, reading `status.phase`, `status.reason`, the `DisruptionTarget` condition,
`metadata.deletionTimestamp` and the main container's `state.terminated` (`exitCode`,
`reason`). The rules, first match wins:

    observation      when
    VANISHED         DELETED and no container has terminated (the pod is simply gone)
    OOM_KILLED       terminated, reason OOMKilled
    EXITED_OK        terminated with exit code 0, or phase Succeeded
    EVICTED          status.reason Evicted (kubelet node-pressure eviction)
    NODE_LOST        phase Unknown, or status.reason NodeLost
    KILLED           terminated with 137 (SIGKILL) without OOMKilled
    SIGTERM_DRAIN    terminated with 143 (SIGTERM) while being deleted or disrupted (a drain)
    SIGTERM          terminated with 143 and no deletion or disruption in sight
    ERROR            terminated with another non-zero code, or phase Failed without one
    TERMINATING      metadata.deletionTimestamp set, the container not terminated yet
    RUNNING          phase Running
    PENDING          phase Pending (or no phase yet)

**Step 2: transition.** `TRANSITIONS` maps (state, observation) to (next state, outcome);
a pair not in the table changes nothing and decides nothing. States: NEW (created, no event
seen), PENDING, RUNNING, TERMINATING (deletion seen, not ended), DONE (an outcome with an end
was decided: every later event is ignored, e.g. the DELETED that follows Succeeded).

    from                                  observation     to           outcome
    NEW, PENDING                          PENDING         PENDING      -
    NEW, PENDING                          RUNNING         RUNNING      running
    NEW, PENDING, RUNNING                 TERMINATING     TERMINATING  -
    NEW, PENDING, RUNNING, TERMINATING    EXITED_OK       DONE         succeeded
    NEW, PENDING, RUNNING, TERMINATING    OOM_KILLED      DONE         oom
    NEW, PENDING, RUNNING, TERMINATING    EVICTED         DONE         preempted
    NEW, PENDING, RUNNING, TERMINATING    KILLED          DONE         preempted
    NEW, PENDING, RUNNING, TERMINATING    SIGTERM_DRAIN   DONE         preempted
    NEW, PENDING, RUNNING, TERMINATING    NODE_LOST       DONE         preempted (force delete)
    NEW, PENDING, RUNNING, TERMINATING    VANISHED        DONE         preempted
    NEW, PENDING, RUNNING                 SIGTERM         DONE         failed
    TERMINATING                           SIGTERM         DONE         preempted
    NEW, PENDING, RUNNING, TERMINATING    ERROR           DONE         failed

**Outcomes** and the `ExitKind` (runtime/master/exits.py) each one reports (`EXIT_KIND`); what
the job then does is decided once, by `exits.decide`, for pods and local processes alike:

    running     the pod started                                     (no exit)
    succeeded   exit code 0                                         exited
    preempted   137 without OOMKilled, SIGTERM in a drain,          preempted
                eviction, deletion while Pending or Running,
                node lost
    oom         OOMKilled                                           oom
    failed      any other non-zero exit                             failed (killed when the
                                                                    master deleted it)

**Ordering.** Each pod's events are ordered by `metadata.resourceVersion` (compared as
integers when both are, as etcd revisions are; otherwise only equality is known): an event not
newer than the last one applied is a duplicate or arrived out of order (a resync listing an
older copy than the watch already delivered) and is ignored. Events count only for the pod's
`metadata.uid` as the create call returned it (`PodTracker.bind`; events that come earlier are
held and replayed): a stale pod of the same name (an older incarnation) is ignored.

`CreationBackoff` (pure too) says when to retry a pod creation the API refused for a
transient reason (`creation_refusal`: quota exceeded, 409 conflict, throttling, 5xx).
"""

from __future__ import annotations

import enum
import random
import signal as signals
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elasticdl.runtime.master.exits import ExitKind


class PodState(enum.StrEnum):
    NEW = "new"
    PENDING = "pending"
    RUNNING = "running"
    TERMINATING = "terminating"
    DONE = "done"


class Observation(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    TERMINATING = "terminating"
    EXITED_OK = "exited_ok"
    OOM_KILLED = "oom_killed"
    EVICTED = "evicted"
    NODE_LOST = "node_lost"
    KILLED = "killed"
    SIGTERM_DRAIN = "sigterm_drain"
    SIGTERM = "sigterm"
    ERROR = "error"
    VANISHED = "vanished"


class Outcome(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PREEMPTED = "preempted"
    OOM = "oom"
    FAILED = "failed"


EXIT_KIND: Mapping[Outcome, ExitKind | None] = {
    Outcome.RUNNING: None,
    Outcome.SUCCEEDED: ExitKind.EXITED,
    Outcome.PREEMPTED: ExitKind.PREEMPTED,
    Outcome.OOM: ExitKind.OOM,
    Outcome.FAILED: ExitKind.FAILED,
}
"""The exit kind each outcome reports (None: the pod has not ended)."""

_S = PodState
_O = Observation
_LIVE = (_S.NEW, _S.PENDING, _S.RUNNING, _S.TERMINATING)
_NOT_DELETING = (_S.NEW, _S.PENDING, _S.RUNNING)

_ROWS: tuple[tuple[tuple[PodState, ...], Observation, PodState, Outcome | None], ...] = (
    # from             observation          to              outcome
    ((_S.NEW, _S.PENDING), _O.PENDING, _S.PENDING, None),
    ((_S.NEW, _S.PENDING), _O.RUNNING, _S.RUNNING, Outcome.RUNNING),
    (_NOT_DELETING, _O.TERMINATING, _S.TERMINATING, None),
    (_LIVE, _O.EXITED_OK, _S.DONE, Outcome.SUCCEEDED),
    (_LIVE, _O.OOM_KILLED, _S.DONE, Outcome.OOM),
    (_LIVE, _O.EVICTED, _S.DONE, Outcome.PREEMPTED),
    (_LIVE, _O.KILLED, _S.DONE, Outcome.PREEMPTED),
    (_LIVE, _O.SIGTERM_DRAIN, _S.DONE, Outcome.PREEMPTED),
    (_LIVE, _O.NODE_LOST, _S.DONE, Outcome.PREEMPTED),
    (_LIVE, _O.VANISHED, _S.DONE, Outcome.PREEMPTED),
    (_NOT_DELETING, _O.SIGTERM, _S.DONE, Outcome.FAILED),
    ((_S.TERMINATING,), _O.SIGTERM, _S.DONE, Outcome.PREEMPTED),
    (_LIVE, _O.ERROR, _S.DONE, Outcome.FAILED),
)

TRANSITIONS: Mapping[tuple[PodState, Observation], tuple[PodState, Outcome | None]] = {
    (state, observation): (to, outcome)
    for states, observation, to, outcome in _ROWS
    for state in states
}
"""(state, observation) -> (next state, outcome); missing pairs are ignored. See the module
docstring for the table as prose."""

if len(TRANSITIONS) != sum(len(row[0]) for row in _ROWS):  # pragma: no cover - table check
    raise AssertionError("pod_states: a (state, observation) pair appears twice in _ROWS")


# -- reading a pod object -------------------------------------------------------------------


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def main_container_status(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The status of the pod's first container (ours have one: `ps` or `worker`)."""
    statuses = _get(pod, "status", "containerStatuses") or []
    containers = _get(pod, "spec", "containers") or []
    name = containers[0].get("name") if containers else None
    for status in statuses:
        if name is None or status.get("name") == name:
            return status
    return statuses[0] if statuses else None


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return _get(main_container_status(pod), "state", "terminated")


def _disrupted(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The DisruptionTarget condition (preemption, eviction, taint manager), if true."""
    for cond in _get(pod, "status", "conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return cond
    return None


def classify(event_type: str, pod: Mapping[str, Any]) -> Observation:
    """One watch event of a pod as an `Observation` (rules in the module docstring)."""
    phase = _get(pod, "status", "phase") or "Pending"
    reason = _get(pod, "status", "reason") or ""
    terminated = _terminated(pod)
    deleting = bool(_get(pod, "metadata", "deletionTimestamp")) or _disrupted(pod) is not None
    if terminated is None:
        if event_type == "DELETED" and phase not in ("Succeeded", "Failed"):
            return Observation.VANISHED
        if phase == "Succeeded":
            return Observation.EXITED_OK
        if reason == "Evicted":
            return Observation.EVICTED
        if phase == "Unknown" or reason == "NodeLost":
            return Observation.NODE_LOST
        if phase == "Failed":
            return Observation.ERROR
        if deleting:
            return Observation.TERMINATING
        return Observation.RUNNING if phase == "Running" else Observation.PENDING
    code = terminated.get("exitCode")
    if terminated.get("reason") == "OOMKilled":
        return Observation.OOM_KILLED
    if code == 0:
        return Observation.EXITED_OK
    if reason == "Evicted":
        return Observation.EVICTED
    if phase == "Unknown" or reason == "NodeLost":
        return Observation.NODE_LOST
    if code == 128 + signals.SIGKILL:
        return Observation.KILLED
    if code == 128 + signals.SIGTERM:
        return Observation.SIGTERM_DRAIN if deleting else Observation.SIGTERM
    return Observation.ERROR


def resource_version(pod: Mapping[str, Any]) -> str:
    return str(_get(pod, "metadata", "resourceVersion") or "")


def newer(candidate: str, last: str) -> bool:
    """Whether resourceVersion `candidate` comes after `last` ("" = nothing seen yet).

    Integer comparison when both parse (etcd revisions); otherwise only a different value
    counts as newer (Kubernetes calls resource versions opaque)."""
    if not last:
        return True
    if not candidate:
        return False
    if candidate.isdigit() and last.isdigit():
        return int(candidate) > int(last)
    return candidate != last


# -- decisions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What one event of one pod decided.

    `exit_code` / `signal` follow `InstanceExit`: a container exit code 128+N (137, 143) is
    reported as signal N with no exit code, as a local process killed by a signal is.
    `force_delete`: the pod object lingers on a lost node; the manager deletes it (grace 0)."""

    pod: str
    outcome: Outcome
    observation: Observation
    exit_code: int | None = None
    signal: int | None = None
    message: str = ""
    force_delete: bool = False
    log_tail: str = ""
    """The container's termination message: with `terminationMessagePolicy:
    FallbackToLogsOnError`, the last lines of its log when it failed."""

    @property
    def kind(self) -> ExitKind | None:
        """The exit kind this decision reports (None while the pod runs)."""
        return EXIT_KIND[self.outcome]

    @property
    def ended(self) -> bool:
        return self.outcome is not Outcome.RUNNING


def _exit_fields(pod: Mapping[str, Any]) -> tuple[int | None, int | None]:
    terminated = _terminated(pod)
    if terminated is None:
        return (0 if _get(pod, "status", "phase") == "Succeeded" else None), None
    code = terminated.get("exitCode")
    sig = terminated.get("signal")
    if isinstance(code, int) and 128 < code <= 128 + 64:
        return None, code - 128
    if isinstance(sig, int) and sig > 0:
        return None, sig
    return (code if isinstance(code, int) else None), None


def _memory_limit(pod: Mapping[str, Any]) -> str:
    containers = _get(pod, "spec", "containers") or []
    return str(_get(containers[0], "resources", "limits", "memory") or "") if containers else ""


def _message(observation: Observation, outcome: Outcome, pod: Mapping[str, Any]) -> str:
    name = _get(pod, "metadata", "name") or "?"
    terminated = _terminated(pod) or {}
    code = terminated.get("exitCode")
    detail = (terminated.get("message") or _get(pod, "status", "message") or "").strip()
    detail = detail.splitlines()[-1].strip() if detail else ""
    node = _get(pod, "spec", "nodeName") or ""
    on = f" on node {node}" if node else ""
    disruption = _disrupted(pod)
    if observation is Observation.OOM_KILLED:
        limit = _memory_limit(pod)
        limit_text = f"its memory limit ({limit})" if limit else "its memory limit"
        return (
            f"pod {name} was OOMKilled{on} (exit code {code}): the container used more than "
            f"{limit_text}; not to be relaunched, it would run out again: raise memory in "
            "--worker_resource_request/--worker_resource_limit (--ps_... for a parameter server)"
        )
    if observation is Observation.EVICTED:
        return f"pod {name} was evicted{on}" + (f": {detail}" if detail else "")
    if observation is Observation.NODE_LOST:
        return f"pod {name} lost its node{on} (phase Unknown / NodeLost)"
    if observation is Observation.VANISHED:
        why = f" ({disruption.get('reason')})" if disruption else ""
        phase = _get(pod, "status", "phase") or "Pending"
        return f"pod {name} was deleted while {phase}{on}{why}: preempted"
    if observation is Observation.KILLED:
        return f"pod {name} was killed by SIGKILL{on} (exit code 137, not OOMKilled): preempted"
    if observation is Observation.SIGTERM_DRAIN or (
        observation is Observation.SIGTERM and outcome is Outcome.PREEMPTED
    ):
        return f"pod {name} was stopped by SIGTERM{on} while being deleted (exit code 143)"
    if observation is Observation.SIGTERM:
        return f"pod {name} was stopped by SIGTERM{on} (exit code 143) with no deletion in sight"
    if observation is Observation.EXITED_OK:
        return f"pod {name} exited with code 0"
    if observation is Observation.RUNNING:
        return f"pod {name} is running{on}"
    reason = terminated.get("reason") or _get(pod, "status", "reason") or ""
    text = f"pod {name} failed{on}"
    if code is not None:
        text += f" with exit code {code}"
    if reason:
        text += f" ({reason})"
    return text + (f": {detail}" if detail else "")


@dataclass
class _Pod:
    state: PodState = PodState.NEW
    uid: str = ""
    resource_version: str = ""
    early: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    """Events that came before the pod's uid was known (replayed by `bind`)."""


_MAX_EARLY = 64


@dataclass
class PodTracker:
    """The state machine of every pod of one job, by pod name.

    `expect(name, uid)` registers a pod the manager creates (state NEW). Events apply only to
    the incarnation with that uid: a stale pod of the same name (left by an earlier master,
    being deleted) cannot end the new one. When the uid is not known yet (`expect` before the
    create call returns), events are held until `bind(name, uid)` and then replayed. Events of
    pods never expected, and events after a pod's end (state DONE), are ignored. `observe`
    applies one watch event and returns the `Decision` it produced, or None.
    Not thread-safe: one caller at a time.
    """

    _pods: dict[str, _Pod] = field(default_factory=dict)

    def expect(self, name: str, uid: str = "") -> None:
        self._pods[name] = _Pod(uid=uid)

    def bind(self, name: str, uid: str) -> list[Decision]:
        """The create call returned: `name` is the pod with `uid`; replay held events."""
        tracked = self._pods.get(name)
        if tracked is None or tracked.uid:
            return []
        tracked.uid = uid
        early, tracked.early = tracked.early, []
        decisions = [self.observe(t, pod) for t, pod in early]
        return [d for d in decisions if d is not None]

    def forget(self, name: str) -> None:
        self._pods.pop(name, None)

    def state(self, name: str) -> PodState | None:
        pod = self._pods.get(name)
        return pod.state if pod else None

    def live(self) -> list[str]:
        """Names of the expected pods that have not ended."""
        return [n for n, p in self._pods.items() if p.state is not PodState.DONE]

    def observe(self, event_type: str, pod: Mapping[str, Any]) -> Decision | None:
        """Apply one watch event (`ADDED`, `MODIFIED`, `DELETED`; other types are ignored)."""
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            return None
        name = _get(pod, "metadata", "name") or ""
        tracked = self._pods.get(name)
        if tracked is None or tracked.state is PodState.DONE:
            return None
        uid = _get(pod, "metadata", "uid") or ""
        if not tracked.uid:
            if len(tracked.early) < _MAX_EARLY:
                tracked.early.append((event_type, pod))
            return None
        if uid != tracked.uid:
            return None
        version = resource_version(pod)
        if not newer(version, tracked.resource_version):
            return None
        tracked.resource_version = version
        observation = classify(event_type, pod)
        step = TRANSITIONS.get((tracked.state, observation))
        if step is None:
            return None
        tracked.state, outcome = step
        if outcome is None:
            return None
        exit_code, sig = _exit_fields(pod)
        if observation is Observation.VANISHED:
            exit_code, sig = None, None
        return Decision(
            pod=name,
            outcome=outcome,
            observation=observation,
            exit_code=exit_code,
            signal=sig,
            message=_message(observation, outcome, pod),
            force_delete=observation is Observation.NODE_LOST,
            log_tail=str((_terminated(pod) or {}).get("message") or ""),
        )

    def vanished(self, expected: Iterable[str], listed: Iterable[str]) -> list[Decision]:
        """After a resync: pods in `expected` (created before the list was requested) that the
        list no longer holds were deleted while the watch was down: each one still live ends
        as preempted (VANISHED)."""
        present = set(listed)
        decisions = []
        for name in expected:
            tracked = self._pods.get(name)
            if name in present or tracked is None or tracked.state is PodState.DONE:
                continue
            if not tracked.uid:
                continue
            step = TRANSITIONS[(tracked.state, Observation.VANISHED)]
            tracked.state, outcome = step
            assert outcome is not None
            decisions.append(
                Decision(
                    pod=name,
                    outcome=outcome,
                    observation=Observation.VANISHED,
                    message=f"pod {name} was deleted while the watch was down (found on resync)",
                )
            )
        return decisions


# -- pod creation refused -----------------------------------------------------------------


class Refusal(enum.StrEnum):
    """How to treat an API error from creating an object."""

    RETRY = "retry"
    """Transient (quota exceeded, throttled, server error): retry with backoff."""
    CONFLICT = "conflict"
    """409: the name exists (a lost response to our own create, or a stale pod)."""
    FATAL = "fatal"
    """Retrying cannot help (invalid object, forbidden by RBAC, namespace not found)."""


def creation_refusal(status: int, message: str = "") -> Refusal:
    """Classify a failed create by HTTP status and the Status message.

    403 is transient only for a ResourceQuota ("exceeded quota"), which frees up when other
    pods end; any other 403 (RBAC, a terminating namespace) is fatal."""
    text = message.lower()
    if status == 409:
        return Refusal.CONFLICT
    if status == 403:
        return Refusal.RETRY if "exceeded quota" in text else Refusal.FATAL
    if status in (0, 429, 500, 502, 503, 504):
        return Refusal.RETRY
    return Refusal.FATAL


@dataclass
class CreationBackoff:
    """Exponential backoff with jitter for retrying one refused creation.

    The n-th retry (n = 0, 1, ...) waits `min(max_s, initial_s * factor**n)`, shortened by up
    to `jitter` of itself (`rand()` in [0, 1)) so that refused pods do not retry in lockstep.
    After `max_attempts` retries, or once the waits add up past `give_up_after_s`, `next_delay`
    returns None: give up. Pure: the caller sleeps and keeps the clock."""

    initial_s: float = 1.0
    factor: float = 2.0
    max_s: float = 60.0
    jitter: float = 0.2
    max_attempts: int | None = None
    give_up_after_s: float | None = 900.0
    rand: Callable[[], float] = random.random
    attempts: int = 0
    waited_s: float = 0.0

    def next_delay(self) -> float | None:
        """Seconds to wait before the next attempt, or None to give up."""
        if self.max_attempts is not None and self.attempts >= self.max_attempts:
            return None
        if self.give_up_after_s is not None and self.waited_s >= self.give_up_after_s:
            return None
        base = min(self.max_s, self.initial_s * self.factor**self.attempts)
        delay = base * (1.0 - self.jitter * self.rand())
        self.attempts += 1
        self.waited_s += delay
        return delay

    def reset(self) -> None:
        self.attempts = 0
        self.waited_s = 0.0
