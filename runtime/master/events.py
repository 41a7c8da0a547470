"""The job's event log: typed events, each with a time (and a duration where one applies).

The supervisor, the task state (task manager adapter), PS recovery, checkpoints and
evaluation append events here; `job_report.json`, the summary line, the progress display and
TensorBoard are views of this log (report.py). One instance's end is one `InstanceLost`,
written once its consequences (tasks requeued, relaunched as) are known.

Times are `time.monotonic()` seconds; `as_dict(t0)` gives them relative to the job's start
(`at_s`), as the report shows them. `KIND` names the event in the report's `events` list.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar


@dataclass(frozen=True)
class Event:
    at: float
    KIND: ClassVar[str] = "event"
    LISTED: ClassVar[bool] = True
    """Whether the event appears in the report's `events` list (loss points do not)."""

    @property
    def kind(self) -> str:
        return self.KIND

    def as_dict(self, t0: float) -> dict[str, Any]:
        found: dict[str, Any] = {"kind": self.kind, "at_s": round(self.at - t0, 3)}
        for f in dataclasses.fields(self):
            if f.name == "at":
                continue
            value = getattr(self, f.name)
            if f.name.endswith("_at") and isinstance(value, float):
                value = round(value - t0, 3)
            elif isinstance(value, float):
                value = round(value, 4)
            elif isinstance(value, tuple):
                value = list(value)
            found[f.name] = value
        return found


# -- instances ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerLaunched(Event):
    """A worker started: at the job's start, or to grow the job."""

    worker_id: int = 0
    KIND: ClassVar[str] = "worker_launched"
    LISTED: ClassVar[bool] = False


@dataclass(frozen=True)
class WorkerRelaunched(WorkerLaunched):
    """A worker started in place of one that ended."""

    replaces: int = 0
    seconds: float = 0.0
    """From the end of the one it replaces to this one's start."""
    launch_s: float = 0.0
    from_budget: bool = True
    """Counted against --max_worker_relaunches (a preempted worker's is free)."""
    KIND: ClassVar[str] = "worker_relaunched"
    LISTED: ClassVar[bool] = True


@dataclass(frozen=True)
class WorkerAdded(WorkerLaunched):
    """A worker started by a chaos `add` action."""

    chaos: str = ""
    KIND: ClassVar[str] = "worker_added"
    LISTED: ClassVar[bool] = True


@dataclass(frozen=True)
class SpareLaunched(WorkerLaunched):
    """A spare worker started: idle until promoted (runtime/master/spares.py)."""

    KIND: ClassVar[str] = "spare_launched"
    LISTED: ClassVar[bool] = True


@dataclass(frozen=True)
class SparePromoted(Event):
    """A spare took a lost worker's place (instead of a relaunch)."""

    worker_id: int = 0
    replaces: int = 0
    seconds: float = 0.0
    """From the end of the one it replaces to the promotion."""
    from_budget: bool = True
    """Counted against --max_worker_relaunches, as the relaunch it stands for would be."""
    KIND: ClassVar[str] = "spare_promoted"
    LISTED: ClassVar[bool] = True


@dataclass(frozen=True)
class WorkerTraining(Event):
    """A worker's first progress report: it trains (how soon a lost worker's place is filled)."""

    worker_id: int = 0
    KIND: ClassVar[str] = "worker_training"
    LISTED: ClassVar[bool] = False


@dataclass(frozen=True)
class InstanceLost(Event):
    """A worker or PS ended while the job ran: how, why, and what the job did about it.

    `at` is when it ended; `detected_at` when the master knew it was lost (a hang: the
    timeout, before the kill). `requeue_s`: from detection to its tasks being back in the
    queue (None when it held none)."""

    role: str = "worker"
    id: int = 0
    exit_kind: str = ""
    exit_code: int | None = None
    signal: int | None = None
    cause: str = ""
    detail: str = ""
    action: str = ""
    detected_at: float = 0.0
    requeue_s: float | None = None
    tasks_requeued: int = 0
    records_requeued: int = 0
    relaunched_as: int | None = None
    failure: bool = False
    KIND: ClassVar[str] = "instance_lost"

    @property
    def kind(self) -> str:
        return f"{self.role}_exit"


@dataclass(frozen=True)
class RelaunchRefused(Event):
    worker_id: int = 0
    reason: str = ""
    KIND: ClassVar[str] = "relaunch_refused"


@dataclass(frozen=True)
class NotRelaunched(Event):
    worker_id: int = 0
    reason: str = ""
    KIND: ClassVar[str] = "not_relaunched"


@dataclass(frozen=True)
class TaskTimeout(Event):
    worker_id: int = 0
    task_id: int = 0
    timeout_s: float = 0.0
    KIND: ClassVar[str] = "task_timeout"


@dataclass(frozen=True)
class PSUnresponsive(Event):
    """A PS answered no liveness probe for longer than its timeout: killed and relaunched."""

    ps_id: int = 0
    silent_s: float = 0.0
    KIND: ClassVar[str] = "ps_unresponsive"


@dataclass(frozen=True)
class InstanceSlow(Event):
    """A PS that answered no liveness probe, or a worker whose task made no progress, was found
    slow, not hung (runnable, or using CPU: liveness.py): the job waits for it."""

    role: str = "ps"
    id: int = 0
    silent_s: float = 0.0
    reason: str = ""
    KIND: ClassVar[str] = "instance_slow"


@dataclass(frozen=True)
class PSRecovered(Event):
    """A relaunched PS serves again. `seconds` is the real downtime: from the old one's end
    (or, hung, its detection) until the new one answered."""

    ps_id: int = 0
    seconds: float = 0.0
    spawn_s: float = 0.0
    restored_version: int | None = None
    model_version_before: int = 0
    restored_rows: dict[str, int] | None = None
    """Embedding rows per table the new PS restored (as it says itself; None: not asked or
    it did not answer)."""
    KIND: ClassVar[str] = "ps_relaunched"


# -- the job --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChaosFired(Event):
    action: str = ""
    delivered: bool = True
    to: tuple[str, ...] = ()
    KIND: ClassVar[str] = "chaos"


@dataclass(frozen=True)
class ChaosSkipped(Event):
    chaos: str = ""
    reason: str = ""
    KIND: ClassVar[str] = "chaos_skipped"


@dataclass(frozen=True)
class WorkerRemoved(Event):
    worker_id: int = 0
    chaos: str = ""
    KIND: ClassVar[str] = "worker_removed"


@dataclass(frozen=True)
class Scaled(Event):
    """A resize request, accepted or refused (`elasticdl scale`)."""

    workers: int = 0
    source: str = ""
    accepted: bool = True
    message: str = ""
    launched: tuple[int, ...] = ()
    retired: tuple[int, ...] = ()
    KIND: ClassVar[str] = "scale"


@dataclass(frozen=True)
class TaskEvent(Event):
    """A task manager event (requeue, failure, timeout ...), as it reported it."""

    name: str = ""
    seconds: float = 0.0
    worker_id: int | None = None
    task_id: int | None = None
    detail: str = ""
    KIND: ClassVar[str] = "task"
    LISTED: ClassVar[bool] = False

    @property
    def kind(self) -> str:
        return self.name


@dataclass(frozen=True)
class LossReported(Event):
    model_version: int = 0
    loss: float = 0.0
    epoch: int = -1
    """The epoch of the task the loss was computed in (-1: not known)."""
    KIND: ClassVar[str] = "loss"
    LISTED: ClassVar[bool] = False


@dataclass(frozen=True)
class EvaluationStarted(Event):
    model_version: int = 0
    tasks: int = 0
    KIND: ClassVar[str] = "evaluation_started"


@dataclass(frozen=True)
class EvaluationDone(Event):
    model_version: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    KIND: ClassVar[str] = "evaluation_done"


@dataclass(frozen=True)
class CheckpointFound(Event):
    """A valid checkpoint the PS wrote, as the master found it."""

    version: int = 0
    path: str = ""
    KIND: ClassVar[str] = "checkpoint"
    LISTED: ClassVar[bool] = False


@dataclass(frozen=True)
class CheckpointFailed(Event):
    """A PS could not write checkpoint `version` (seen by the master; checkpoint_health.py)."""

    ps_id: int = 0
    version: int = 0
    error: str = ""
    failed: int = 1
    """Failed writes this event stands for (the master may see several at once)."""
    failed_in_a_row: int = 0
    KIND: ClassVar[str] = "checkpoint_failed"


@dataclass(frozen=True)
class LossDiverged(Event):
    """The job's loss diverged (divergence.py): said in the report and the summary line."""

    reason: str = ""
    first_loss: float | None = None
    final_loss: float | None = None
    KIND: ClassVar[str] = "loss_diverged"


@dataclass(frozen=True)
class JobStopped(Event):
    """The master was asked to stop (SIGTERM/SIGINT): workers told to finish, report written."""

    signal: str = ""
    KIND: ClassVar[str] = "job_stopped"


E = TypeVar("E", bound=Event)


class EventLog:
    """Append-only, thread-safe list of events (the supervisor and helper threads append)."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._listeners: list[Callable[[Event], None]] = []

    def listen(self, listener: Callable[[Event], None]) -> None:
        """Call `listener(event)` for every event added from now on (console.py)."""
        self._listeners.append(listener)

    def add(self, event: E) -> E:
        with self._lock:
            self._events.append(event)
        for listener in self._listeners:
            listener(event)
        return event

    def __iter__(self) -> Iterator[Event]:
        with self._lock:
            return iter(list(self._events))

    def __len__(self) -> int:
        return len(self._events)

    def of(self, *types: type[E]) -> list[E]:
        """The events of the given types, in order (subclasses included)."""
        return [e for e in self if isinstance(e, types)]  # type: ignore[misc]

    def since(self, index: int, *types: type[E]) -> tuple[list[E], int]:
        """Events of `types` appended at or after position `index`, and the next position."""
        with self._lock:
            new = self._events[index:]
            end = len(self._events)
        return [e for e in new if isinstance(e, types)], end  # type: ignore[misc]
