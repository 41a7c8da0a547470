"""The master's task state as the supervisor and the job plug-ins see it.

The gRPC servicer owns the `TaskManager`, the worker statistics and the evaluation rounds
behind one lock; `TaskState` is the one place outside the servicer that takes that lock. Each
method is one consistent read or one change, so the supervisor never holds the lock, reads
the servicer's fields or mixes the two. It is also the task manager's adapter to the event
log: `drain_events` moves what the task manager and the workers reported since the last call
into the log as typed events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from elasticdl.runtime.data.shards import Shard
from elasticdl.runtime.master.call_budget import Pace
from elasticdl.runtime.master.events import EventLog, LossReported, TaskEvent, WorkerTraining
from elasticdl.runtime.master.servicer import MasterServicer
from elasticdl.runtime.master.task_manager import (
    ProgressDelta,
    Task,
    TaskType,
)


@dataclass(frozen=True)
class Expired:
    worker_id: int
    task_id: int
    timeout_s: float


@dataclass(frozen=True)
class Snapshot:
    """What the progress display and the end of the job read, at one instant."""

    records_planned: int
    records_trained: int
    records_redone: int
    epoch: int
    loss: float
    model_version: int
    finished: bool
    failure: str | None


class TaskState:
    def __init__(self, servicer: MasterServicer) -> None:
        self._servicer = servicer
        self._tasks = servicer.tasks
        self._stats = servicer.stats
        self._lock = servicer.lock
        self._events_seen = 0

    # -- what the supervisor needs ---------------------------------------------------------------

    def failure(self) -> str | None:
        with self._lock:
            return self._tasks.failure

    def finished(self) -> bool:
        with self._lock:
            return self._tasks.finished

    def expired(self, now: float) -> list[Expired]:
        with self._lock:
            return [
                Expired(w, t.task_id, self._tasks.timeout_of(t.task_id))
                for w, t in self._tasks.expired(now)
            ]

    def tasks_done(self) -> dict[int, int]:
        """Tasks finished per worker id (chaos triggers)."""
        with self._lock:
            return dict(self._stats.tasks_done)

    def holders(self) -> set[int]:
        """Workers holding a task now (`elasticdl status`)."""
        with self._lock:
            return self._tasks.holders()

    def on_dispatch(self, hook: Callable[[int, dict[int, int]], None]) -> None:
        """Call `hook(worker_id, tasks_done)` as each task is handed out, under the servicer's
        lock (chaos actions land there: resizing.py)."""
        with self._lock:
            self._servicer.dispatch_hook = hook

    def pace(self, workers: int, now: float) -> Pace:
        """How often workers may call, derived again for `workers` live workers (the job loop
        asks each pass; the servicer's meter decides when a window has passed)."""
        with self._lock:
            return self._servicer.pace(workers, now)

    def set_standby(self, worker_ids: set[int]) -> None:
        """The spare workers now: they are answered WAIT until they leave this set."""
        with self._lock:
            self._servicer.standby = set(worker_ids)

    def doing(self, worker_id: int) -> list[Task]:
        with self._lock:
            return self._tasks.doing(worker_id)

    def recover_worker(
        self,
        worker_id: int,
        now: float,
        cause: str,
        detected_at: float,
        applied: dict[int, int],
        count_failure: bool,
    ) -> tuple[list[Task], str | None]:
        """Requeue the unfinished remainder of a lost worker's tasks; (requeued, job failure)."""
        with self._lock:
            requeued = self._tasks.recover_worker(
                worker_id,
                now,
                cause=cause,
                detected_at=detected_at,
                applied=applied,
                count_failure=count_failure,
            )
            return requeued, self._tasks.failure

    def snapshot(self) -> Snapshot:
        with self._lock:
            t = self._tasks
            return Snapshot(
                t.records_planned,
                t.records_trained,
                t.records_redone,
                t.epoch,
                self._stats.last_loss,
                self._stats.model_version,
                t.finished,
                t.failure,
            )

    def release_workers(self) -> None:
        self._servicer.release_workers()

    def restart_clocks(self, now: float) -> None:
        """Running tasks' no-progress clocks start again: every worker was stalled by an
        outage that was not theirs (a parameter server was down)."""
        with self._lock:
            self._tasks.restart_clocks(now)

    def progress_since(self, cursor: int) -> ProgressDelta:
        """Training progress since `cursor`, for the progress journal."""
        with self._lock:
            return self._tasks.progress_since(cursor)

    def stop_training(self, reason: str, now: float) -> None:
        """No more training tasks (a model file's EarlyStopping or MaxStepsStopping)."""
        with self._lock:
            self._tasks.stop_training(reason, now)

    # -- evaluation ------------------------------------------------------------------------------

    def model_version(self) -> int:
        with self._lock:
            return self._stats.model_version

    def start_evaluation(self, shards: Sequence[Shard], version: int, now: float) -> int:
        """Queue evaluation tasks of model `version` ahead of training; their number."""
        with self._lock:
            lineages = self._tasks.add_tasks(shards, TaskType.EVALUATION, version)
            self._servicer.evaluations.start(version, lineages, now)
            return len(lineages)

    def completed_evaluations(self) -> list[tuple[Any, dict[str, Any]]]:
        """Evaluation rounds complete since the last call: (round, merged metric state)."""
        with self._lock:
            return self._servicer.evaluations.pop_complete()

    def evaluations_pending(self) -> int:
        with self._lock:
            return self._servicer.evaluations.pending

    # -- the event log and the report --------------------------------------------------------

    def drain_events(self, log: EventLog) -> None:
        """Move the task manager's new events and the workers' new loss reports into `log`
        (the servicer keeps none of them once moved)."""
        with self._lock:
            new = self._tasks.events[self._events_seen :]
            self._events_seen += len(new)
            losses, self._stats.losses = self._stats.losses, []
            training, self._stats.started = self._stats.started, []
        for e in new:
            log.add(TaskEvent(e.at, e.kind, e.seconds, e.worker_id, e.task_id, e.detail))
        for worker_id, at in training:
            log.add(WorkerTraining(at, worker_id))
        for point in losses:
            log.add(LossReported(time.monotonic(), point.version, point.loss, point.epoch))

    def counts(self) -> dict[str, Any]:
        """The task and record counts of the report (records, epochs, tasks)."""
        with self._lock:
            t, s = self._tasks, self._stats
            return {
                "records": {
                    "planned": t.records_planned,
                    "trained": t.records_trained,
                    "redone": t.records_redone,
                    "covered": t.records_covered,
                    "skipped_nonfinite_loss": s.nonfinite_records,
                },
                "epochs": [{"epoch": i, **asdict(e)} for i, e in enumerate(t.epochs)],
                "tasks_finished": t.finished_tasks,
                "by_worker": {str(k): v for k, v in s.tasks_done.items()},
                "model_version": s.model_version,
                "last_loss": s.last_loss,
            }
