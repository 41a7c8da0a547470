"""What a training job plugs into the supervisor: PS progress and recovery, evaluation, views.

* a lost worker's true progress is what its gradients did to the PS (`applied_progress`);
* every PS is probed for liveness (ps_health.py): one that answers no probe is reported to
  the supervisor, which kills and relaunches it; a relaunched PS restores the newest valid
  checkpoint, and its downtime lasts until it answers a probe again;
* the data plan's progress is journaled beside the checkpoints each pass
  (progress_journal.py), so a resumed job trains only what its checkpoint lacks;
* failed checkpoint writes, which the PS report in their probe answers, become
  `checkpoint_failed` events; checkpoint_health.py decides whether they fail the job (during
  the run, and once more at the end after the PS finished their queued writes);
* evaluation rounds start every --evaluation_steps model versions and once at the end; the
  job is done when every training task and the final evaluation are;
* each pass moves task events and loss reports into the log and refreshes the progress
  display and TensorBoard (report.LiveViews), and keeps full garbage collections short
  (heap.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from elasticdl.runtime.master import checkpoint_health
from elasticdl.runtime.master.events import (
    CheckpointFailed,
    EvaluationDone,
    EvaluationStarted,
    EventLog,
)
from elasticdl.runtime.master.heap import QuietHeap
from elasticdl.runtime.master.progress_journal import ProgressJournal
from elasticdl.runtime.master.ps_health import PSHealthMonitor
from elasticdl.runtime.master.report import LiveViews
from elasticdl.runtime.master.supervisor import JobPlugin
from elasticdl.runtime.master.task_manager import JobFailed
from elasticdl.runtime.master.task_state import TaskState

if TYPE_CHECKING:
    from elasticdl.runtime.master.supervisor import Supervisor

log = logging.getLogger("elasticdl.master")


class Evaluations:
    """Starts evaluation rounds (every `steps` versions, and once at the end) and turns the
    completed ones into `EvaluationDone` events."""

    def __init__(
        self, shards: list[Any], metrics: Any, steps: int, first_version: int, events: EventLog
    ) -> None:
        self._shards = shards
        self._metrics = metrics
        self._steps = steps
        self._next = first_version
        self._final_started = False
        self._events = events
        self.stopper: Any = None
        """A model file's EarlyStopping (runtime/callbacks.EarlyStopper), or None."""

    def on_pass(self, tasks: TaskState) -> None:
        from elasticdl.runtime.metrics import compute

        if not self._shards:
            return
        version = tasks.model_version()
        if self._steps and not self._final_started and version >= self._next:
            self._start(tasks, version)
            self._next = (version // self._steps + 1) * self._steps
        for round_, state in tasks.completed_evaluations():
            metrics = compute(self._metrics, state)
            now = time.monotonic()
            self._events.add(EvaluationDone(now, round_.version, metrics, now - round_.started_at))
            log.info("evaluation at model version %d: %s", round_.version, metrics)
            reason = self.stopper.observe(metrics) if self.stopper is not None else None
            if reason and not self._final_started:
                log.info("%s: training stops at model version %d", reason, round_.version)
                tasks.stop_training(reason, now)

    def done(self, tasks: TaskState) -> bool:
        """Training is over and so is the final evaluation (started here, once)."""
        if not tasks.finished():
            return False
        if self._shards and not self._final_started:
            self._final_started = True
            self._start(tasks, tasks.model_version())
            return False
        return tasks.evaluations_pending() == 0

    def _start(self, tasks: TaskState, version: int) -> None:
        now = time.monotonic()
        count = tasks.start_evaluation(self._shards, version, now)
        self._events.add(EvaluationStarted(now, version, count))


class TrainingPlugin(JobPlugin):
    def __init__(
        self,
        events: EventLog,
        evaluations: Evaluations,
        views: LiveViews,
        checkpoint_dir: str,
        ps_client: Any,
        health: PSHealthMonitor,
        num_ps: int,
        journal: ProgressJournal | None,
        heap: QuietHeap | None = None,
    ) -> None:
        self._events = events
        self._heap = heap
        self._evaluations = evaluations
        self._views = views
        self._checkpoint_dir = checkpoint_dir
        self._ps_client = ps_client
        self._health = health
        self._journal = journal
        self._cursor = 0
        self._num_ps = num_ps
        self._serving: set[int] = set()
        """PS known to have served since their (re)start: a probe answered, a relaunch seen
        serving, or (first starts) the model version advanced, which takes every PS's push."""
        self._first_start = set(range(num_ps))
        self._writes_seen: dict[tuple[int, int], int] = {}
        """(PS id, incarnation) -> failed checkpoint writes already in the event log."""

    def journal_progress(self, tasks: TaskState) -> None:
        """Append the progress since the last call to the journal beside the checkpoints."""
        if self._journal is None:
            return
        delta = tasks.progress_since(self._cursor)
        self._journal.append(delta)
        self._cursor = delta.cursor

    def applied_progress(self, task_ids: Sequence[int]) -> dict[int, int]:
        return dict(self._ps_client.applied_progress(list(task_ids)))

    def done(self, tasks: TaskState) -> bool:
        return self._evaluations.done(tasks)

    def on_pass(self, supervisor: Supervisor) -> None:
        tasks = supervisor.tasks
        if self._first_start and tasks.model_version() > 0:
            for ps_id in self._first_start:
                self._health.served(ps_id)
            self._serving |= self._first_start
            self._first_start.clear()
        self._evaluations.on_pass(tasks)
        self._check_checkpoints(self._health.checkpoint_writes(), at_end=False)
        self.journal_progress(tasks)
        tasks.drain_events(self._events)
        self._views.update(tasks.snapshot(), len(supervisor.workers_alive()))
        if self._heap is not None:
            self._heap.tick()

    def final_checkpoint_check(self, flush_s: float = 30.0) -> None:
        """At the end: let every PS finish its queued checkpoint writes (up to `flush_s`),
        then record and judge how they went (JobFailed by checkpoint_health's rule)."""
        if not self._checkpoint_dir:
            return
        from elasticdl.runtime.master.ps_health import writes_of
        from elasticdl.runtime.ps.client import PSError

        try:
            answers = self._ps_client.checkpoint_health(flush_s)
        except PSError as err:  # the probes' answers stand
            log.warning("could not ask the parameter servers about checkpoints: %s", err)
            answers = []
        writes = {
            ps_id: (self._health.generation(ps_id), writes_of(health))
            for ps_id, health in enumerate(answers)
            if health.enabled
        }
        self._check_checkpoints(writes, at_end=True)

    def _check_checkpoints(
        self, writes: dict[int, tuple[int, checkpoint_health.ShardWrites]], at_end: bool
    ) -> None:
        now = time.monotonic()
        for ps_id, (generation, shard) in sorted(writes.items()):
            seen = self._writes_seen.get((ps_id, generation), 0)
            if shard.failed > seen:
                self._writes_seen[(ps_id, generation)] = shard.failed
                self._events.add(
                    CheckpointFailed(
                        now,
                        ps_id,
                        shard.last_failed_version,
                        shard.last_error,
                        shard.failed - seen,
                        shard.failed_in_a_row,
                    )
                )
                log.warning("parameter server %d: %s", ps_id, shard.last_error)
        reason = checkpoint_health.verdict({i: w for i, (_, w) in writes.items()}, at_end)
        if reason is not None:
            raise JobFailed(reason)

    def latest_checkpoint(self) -> int | None:
        from elasticdl.runtime.ps import checkpoint

        directory = self._checkpoint_dir
        try:
            return checkpoint.latest_valid_version(directory) if directory else None
        except Exception as err:  # noqa: BLE001 - the report is informative, not vital
            log.warning("could not list checkpoints in %s: %s", directory, err)
            return None

    def ps_started(self, ps_id: int, address: str) -> None:
        self._serving.discard(ps_id)
        self._first_start.discard(ps_id)
        self._health.set_address(ps_id, address)
        self._ps_client.set_address(ps_id, address)

    def restored(self, ps_id: int) -> tuple[int, dict[str, int]] | None:
        try:
            (told,) = self._ps_client.restored_embedding_rows(shards=[ps_id])
        except Exception as err:  # noqa: BLE001 - the report is informative, not vital
            log.warning("parameter server %d did not say what it restored: %s", ps_id, err)
            return None
        return told

    def unresponsive_ps(self, now: float) -> list[tuple[int, float]]:
        """PS that served since their start (see `_serving`) and then stopped answering probes.
        One that never served is left alone: it may still be starting (a pod waiting for a node
        or an image); if it dies, its exit is handled like any other."""
        for ps_id in range(self._num_ps):
            if self._health.status(ps_id, now) == "alive":
                self._serving.add(ps_id)
        hung = [i for i in self._health.unresponsive(now) if i in self._serving]
        return [(i, self._health.down_since(i) or now) for i in hung]

    def wait_serving(self, ps_id: int, address: str, timeout: float) -> float:
        generation = self._health.generation(ps_id)
        seconds = self._health.wait_serving(address, timeout)
        self._health.served(ps_id, generation)
        self._serving.add(ps_id)
        return seconds
