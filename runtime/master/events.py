"""The job's event log: typed events, each with a time (and a duration where one applies).

The supervisor, the task state (task manager adapter), PS recovery, checkpoints and
evaluation append events here (loss reports go to a bounded history: loss_history.py);
`job_report.json`, the summary line, the progress display and TensorBoard are views of this
log (report.py). One instance's end is one `InstanceLost`,
written once its consequences (tasks requeued, relaunched as) are known.

Times are `time.monotonic()` seconds; `as_dict(t0)` gives them relative to the job's start
(`at_s`), as the report shows them. `KIND` names the event in the report's `events` list.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from elasticdl.runtime.master.loss_history import EpochLoss, LossHistory


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
    count: int = 1
    """Reports this point stands for (the log merges old points: loss_history.py)."""
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
    """Append-only, thread-safe log of events (the supervisor and helper threads append).

    Every event gets the next sequence number; `since(cursor)` gives what came at or after a
    cursor. Loss reports, hundreds a second with many workers, go to a bounded `LossHistory`
    (loss_history.py: exact sums per epoch, the points themselves up to a cap, the latest in a
    ring); everything else stays as it came, indexed by class so that `of(...)` reads only
    the events asked for."""

    def __init__(self, losses: LossHistory | None = None) -> None:
        self._events: list[tuple[int, Event]] = []
        self._by_class: dict[type[Event], list[tuple[int, Event]]] = {}
        self._next = 0
        self.losses = losses or LossHistory()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[Event], None]] = []

    def listen(self, listener: Callable[[Event], None]) -> None:
        """Call `listener(event)` for every event added from now on (console.py)."""
        self._listeners.append(listener)

    def add(self, event: E) -> E:
        with self._lock:
            seq = self._next
            self._next += 1
            if isinstance(event, LossReported):
                self.losses.add(seq, event)
            else:
                self._events.append((seq, event))
                self._by_class.setdefault(type(event), []).append((seq, event))
        for listener in self._listeners:
            listener(event)
        return event

    def __iter__(self) -> Iterator[Event]:
        """Every event in order, then the loss points kept."""
        with self._lock:
            found = [e for _, e in self._events] + list(self.losses.points())
        return iter(found)

    def __len__(self) -> int:
        """Events ever added (loss reports included)."""
        return self._next

    def listed(self) -> list[Event]:
        """The events the report lists (`LISTED`), in order (no loss point is listed)."""
        with self._lock:
            return [e for _, e in self._events if e.LISTED]

    def of(self, *types: type[E]) -> list[E]:
        """The events of the given types, in order (subclasses included); the loss points
        kept come last (LossHistory.points: merged points stand for several reports)."""
        with self._lock:
            lists = [found for cls, found in self._by_class.items() if issubclass(cls, types)]
            merged = [e for _, e in heapq.merge(*lists, key=lambda pair: pair[0])]
            if any(issubclass(LossReported, t) for t in types):
                merged += self.losses.points()
        return merged  # type: ignore[return-value]

    def since(self, cursor: int, *types: type[E]) -> tuple[list[E], int]:
        """Events of `types` added at or after sequence number `cursor`, in order, and the
        next cursor (loss points from the history's ring of the latest: loss_history.py)."""
        with self._lock:
            first = bisect.bisect_left(self._events, cursor, key=lambda pair: pair[0])
            new = [(seq, e) for seq, e in self._events[first:] if isinstance(e, types)]
            if any(issubclass(LossReported, t) for t in types):
                new = list(heapq.merge(new, self.losses.since(cursor), key=lambda p: p[0]))
            end = self._next
        return [e for _, e in new], end  # type: ignore[misc]

    def epoch_loss(self, epoch: int) -> EpochLoss | None:
        """The finite losses reported in `epoch` (exact, however many): a copy, or None."""
        with self._lock:
            found = self.losses.epochs.get(epoch)
            return dataclasses.replace(found) if found is not None else None

    def epoch_losses(self) -> dict[int, EpochLoss]:
        """Per epoch, the finite losses reported (exact, however many): a copy."""
        with self._lock:
            return {epoch: dataclasses.replace(e) for epoch, e in self.losses.epochs.items()}
