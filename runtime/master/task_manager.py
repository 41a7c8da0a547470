"""The master's task bookkeeping: pure logic, no I/O, time passed in by the caller.

States of a task (a record range of one file, for one epoch):

    todo --get()--> doing --report_result(ok)--> done
                      |--report_result(error)--> todo (whole range), or job failed at the cap
                      |--recover_worker()------> todo (unfinished remainder only)
                      `--expired()/recover------> todo (remainder; the worker is restarted)
    todo --get_ahead()--> held ahead --get(held_ahead)--> doing
                              `--recover_worker()/stop_training()--> todo untouched / dropped

Progress reports (records done within the task, cumulative) are the truth for what was
trained, so a dead worker's finished records are never handed out again. A range that fails
more than `max_task_retries` times fails the job with a message naming it; nothing is dropped
silently. Epochs are planned lazily: epoch e+1's shuffled tasks are queued when epoch e's todo
queue runs dry, so workers never idle at an epoch boundary.

No-progress limits are derived from the progress reports seen (`task_timeout.py`). A job resumed
from a checkpoint starts from `Resumed` (what the checkpoint holds is not planned again), and
`progress_since(cursor)` gives what the master journals beside the checkpoints for that
(`progress_journal.py`).

A training worker may hold one training task *ahead* of the one it trains (`get_ahead`), so
that it reads the next shard and fills its input pipeline while the current task trains (a task
switch cost a DNN worker ~30 ms per 16 minibatches, most of it the new task's first minibatch
through an empty pipeline). A task held ahead is in `doing` but has not started: its
no-progress clock starts when the worker confirms it in its next `get(held_ahead=...)`, it is
put back at the head of the queue untouched (no failure, no requeue event) when the worker
dies or training stops, and evaluations queued meanwhile go before it. One is handed out only
while the queue has a training task at its head and one for every worker holding a task, so
no worker idles at the end of an epoch while another holds a task it has not started.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
import random
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from elasticdl.runtime.data.shards import Shard
from elasticdl.runtime.master.task_timeout import ProgressTimes, TimeoutConfig, no_progress_limit


class TaskType(enum.IntEnum):
    """Same numbers as elasticdl.proto TaskType."""

    TRAINING = 1
    EVALUATION = 2
    PREDICTION = 3


@dataclass
class Task:
    """A unit of work handed to one worker: records `[start, end)` of `file`.

    The worker visits the shard's records in the order of a permutation drawn from
    `shuffle_seed` (0: file order) and skips the first `skip` of them, which an earlier
    attempt finished. So a shard is shuffled within itself and its unfinished remainder is
    still exactly known: "the first k records of this order are done".
    """

    task_id: int
    shard: Shard
    type: TaskType
    epoch: int = 0
    model_version: int = -1
    lineage: int = 0
    """Id of the first task of this record range; retries of a remainder share it."""
    skip: int = 0
    shuffle_seed: int = 0

    def __post_init__(self) -> None:
        self.lineage = self.lineage or self.task_id

    @property
    def num_records(self) -> int:
        """Records this task still has to process."""
        return self.shard.num_records - self.skip


@dataclass
class _Running:
    task: Task
    worker_id: int
    started_at: float
    last_progress_at: float
    records_done: int = 0
    first: bool = False
    """The worker's first task: it includes tracing the worker's dataset_fn and step."""
    reports: int = 0
    """Progress reports received for this task."""
    ahead: bool = False
    """Held ahead of the worker's current task, not started (see the module docstring)."""


class _Doing:
    """The tasks being run or held ahead, by task id and by worker: what a worker's call looks
    up costs the same whatever the number of workers (nothing scans every running task)."""

    def __init__(self) -> None:
        self._by_task: dict[int, _Running] = {}
        self._by_worker: dict[int, dict[int, _Running]] = {}

    def add(self, running: _Running) -> None:
        self._by_task[running.task.task_id] = running
        self._by_worker.setdefault(running.worker_id, {})[running.task.task_id] = running

    def pop(self, task_id: int) -> _Running:
        running = self._by_task.pop(task_id)
        held = self._by_worker[running.worker_id]
        del held[task_id]
        if not held:
            del self._by_worker[running.worker_id]
        return running

    def get(self, task_id: int) -> _Running | None:
        return self._by_task.get(task_id)

    def of(self, worker_id: int) -> list[_Running]:
        """The worker's tasks, in the order it got them."""
        return list(self._by_worker.get(worker_id, {}).values())

    def values(self) -> list[_Running]:
        return list(self._by_task.values())

    def workers(self) -> set[int]:
        return set(self._by_worker)

    def num_workers(self) -> int:
        return len(self._by_worker)

    def __len__(self) -> int:
        return len(self._by_task)


@dataclass(frozen=True)
class Event:
    """Something that happened to the job, for the job report and the log."""

    kind: str
    at: float
    seconds: float = 0.0
    worker_id: int | None = None
    task_id: int | None = None
    detail: str = ""


@dataclass
class EpochStats:
    planned: int = 0
    trained: int = 0
    """Records trained, also by earlier runs of a resumed job (and again: see `redone`)."""
    redone: int = 0
    covered: int = 0
    """Records of a resumed job already in the checkpoint it started from (not trained again)."""

    @classmethod
    def of(cls, shards: Sequence[Shard], epoch: int, resumed: Resumed) -> EpochStats:
        """Epoch `epoch` as planned, with what a resumed job's earlier runs did counted in."""
        keys = [ShardKey(epoch, s.file, s.start, s.end) for s in shards]
        return cls(
            planned=sum(s.num_records for s in shards),
            trained=sum(resumed.trained.get(k, 0) for k in keys),
            covered=sum(resumed.covered.get(k, 0) for k in keys),
        )


class ShardKey(NamedTuple):
    """A record range of one epoch: the unit whose trained records are a prefix of its
    visiting order (remainders skip what earlier attempts did), so one count says which."""

    epoch: int
    file: str
    start: int
    end: int

    @staticmethod
    def of(task: Task) -> ShardKey:
        return ShardKey(task.epoch, task.shard.file, task.shard.start, task.shard.end)


@dataclass(frozen=True)
class Resumed:
    """Where a job resumed from a checkpoint starts (see `progress_journal.resume_point`)."""

    covered: Mapping[ShardKey, int] = field(default_factory=dict)
    """Records of each range (a prefix of its visiting order) in the checkpoint: not planned."""
    trained: Mapping[ShardKey, int] = field(default_factory=dict)
    """Records earlier runs trained (>= covered): those trained again count as redone."""
    first_task_id: int = 1
    """Task ids below it were used by earlier runs (their ids are in the checkpoints)."""


@dataclass(frozen=True)
class ProgressDelta:
    """Training progress since a cursor (`TaskManager.progress_since`), for the journal."""

    cursor: int
    """Pass it to the next `progress_since` call."""
    handouts: list[tuple[int, ShardKey, int]]
    """(task id, range, skip) of training tasks handed out."""
    trained: dict[ShardKey, int]
    """Ranges whose trained prefix (records of the visiting order) advanced: the new prefix."""

    def __bool__(self) -> bool:
        return bool(self.handouts or self.trained)


class _ProgressLog:
    """Training tasks handed out and trained prefixes of record ranges, in one sequence, so
    that `since(cursor)` gives what changed after a cursor (what the master journals)."""

    def __init__(self) -> None:
        self.seq = 0
        self._handouts: list[tuple[int, int, ShardKey, int]] = []
        self._prefixes: OrderedDict[ShardKey, tuple[int, int]] = OrderedDict()

    def handed_out(self, task: Task) -> None:
        self.seq += 1
        self._handouts.append((self.seq, task.task_id, ShardKey.of(task), task.skip))

    def trained(self, key: ShardKey, prefix: int) -> None:
        seen = self._prefixes.pop(key, None)
        self.seq += 1
        self._prefixes[key] = (self.seq, max(prefix, seen[1] if seen else 0))

    def since(self, cursor: int) -> ProgressDelta:
        first = bisect.bisect_right(self._handouts, cursor, key=lambda h: h[0])
        handouts = [(t, k, skip) for _, t, k, skip in self._handouts[first:]]
        trained: dict[ShardKey, int] = {}
        for key, (seq, prefix) in reversed(self._prefixes.items()):
            if seq <= cursor:
                break
            trained[key] = prefix
        return ProgressDelta(self.seq, handouts, dict(reversed(trained.items())))


def plan_epoch(
    shards: Sequence[Shard],
    epoch: int,
    shuffle: bool,
    seed: int,
    covered: Mapping[ShardKey, int] | None = None,
) -> list[tuple[Shard, int, int]]:
    """(shard, shuffle seed, skip) of epoch `epoch`'s tasks, in hand-out order.

    The order and seeds depend only on (shards, epoch, shuffle, seed), so a resumed job draws
    the same ones; a range's first `covered` records are skipped, a fully covered range has no
    task."""
    order = list(shards)
    rng = random.Random(seed * 1_000_003 + epoch)
    if shuffle:
        rng.shuffle(order)
    planned = []
    for shard in order:
        shuffle_seed = rng.getrandbits(62) + 1 if shuffle else 0
        done = (covered or {}).get(ShardKey(epoch, shard.file, shard.start, shard.end), 0)
        if done < shard.num_records:
            planned.append((shard, shuffle_seed, max(0, done)))
    return planned


class JobFailed(RuntimeError):
    """The job cannot finish; the message says which work failed and why."""


@dataclass
class TaskManagerConfig:
    records_per_task: int
    num_epochs: int = 1
    shuffle: bool = True
    seed: int = 0
    max_task_retries: int = 3
    task_timeout_s: float | None = None
    """A fixed no-progress limit for every task; None: derived from the progress seen, see
    `task_timeout.py` (a hung worker is then caught about `timeout_floor_s` after its last
    minibatch, a worker's first task gets `first_task_timeout_s` to trace until one has)."""
    timeout_floor_s: float = 15.0
    timeout_factor: float = 5.0
    first_task_floor_factor: float = 2.0
    first_task_timeout_s: float = 120.0

    @property
    def timeouts(self) -> TimeoutConfig:
        return TimeoutConfig(
            fixed_s=self.task_timeout_s,
            floor_s=self.timeout_floor_s,
            factor=self.timeout_factor,
            first_floor_factor=self.first_task_floor_factor,
            first_task_timeout_s=self.first_task_timeout_s,
        )


@dataclass
class _Failures:
    count: int = 0
    last_error: str = ""


class TaskManager:
    """Training (and later evaluation/prediction) tasks for a job; thread-unsafe by design.

    The gRPC servicer wraps every call in one lock; this class stays pure so its state
    machine is tested directly.
    """

    def __init__(
        self,
        shards: Sequence[Shard],
        config: TaskManagerConfig,
        task_type: TaskType = TaskType.TRAINING,
        now: float = 0.0,
        resumed: Resumed | None = None,
    ) -> None:
        """`resumed`: the job resumes from a checkpoint that already holds these records."""
        if config.num_epochs <= 0:
            raise ValueError(f"num_epochs must be >= 1, got {config.num_epochs}")
        self.config = config
        self.task_type = task_type
        self._shards = list(shards)
        self._todo: deque[Task] = deque()
        self._doing = _Doing()
        self._resumed = resumed or Resumed()
        self._next_id = self._resumed.first_task_id
        self._next_epoch = 0
        self._log = _ProgressLog()
        self._failures: dict[int, _Failures] = {}
        self.progress_times = ProgressTimes()
        self._workers_seen: set[int] = set()
        self._started_at = now
        self.events: list[Event] = []
        self.epochs: list[EpochStats] = []
        self.failure: str | None = None
        self.finished_tasks = 0
        self.training_stopped = ""
        """Why training ended before its last epoch (a model file's callback), or ""."""
        if not self._shards:
            raise ValueError("no records to process: the data has no records")
        self._plan_next_epoch()

    # -- planning ------------------------------------------------------------------------------

    def _take_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _plan_next_epoch(self) -> bool:
        """Queue the next epoch that has records left (a resumed job's may have none)."""
        config, resumed = self.config, self._resumed
        while self._next_epoch < config.num_epochs:
            epoch = self._next_epoch
            self._next_epoch += 1
            planned = plan_epoch(self._shards, epoch, config.shuffle, config.seed, resumed.covered)
            self._todo.extend(
                Task(self._take_id(), shard, self.task_type, epoch, skip=skip, shuffle_seed=seed)
                for shard, seed, skip in planned
            )
            self.epochs.append(EpochStats.of(self._shards, epoch, resumed))
            if planned:
                return True
        return False

    # -- the worker-facing calls ---------------------------------------------------------------

    def get(self, worker_id: int, now: float, held_ahead: int = 0) -> Task | None:
        """The next task for `worker_id`, or None when nothing is left to hand out now.

        `held_ahead`: the id of the task the worker holds ahead; it is the answer (its clock
        starts now) unless queued evaluations go first (it goes back behind them) or the
        master took it back meanwhile. A task held ahead that the worker does not name (the
        answer was lost on its way) goes back to the queue.
        """
        if self.failure is not None:
            return None
        if self.training_stopped:
            self._todo = deque(t for t in self._todo if t.type != TaskType.TRAINING)
        elif not any(t.type == TaskType.TRAINING for t in self._todo):
            self._plan_next_epoch()
        for running in [r for r in self._doing.of(worker_id) if r.ahead]:
            evaluations_first = bool(self._todo) and self._todo[0].type != TaskType.TRAINING
            if running.task.task_id != held_ahead or evaluations_first:
                self._put_back(running)  # not named: its answer never reached the worker
                continue
            running.ahead = False
            running.started_at = running.last_progress_at = now
            return running.task
        if not self._todo:
            return None
        task = self._todo.popleft()
        first = worker_id not in self._workers_seen
        self._workers_seen.add(worker_id)
        self._doing.add(_Running(task, worker_id, now, now, first=first))
        self._note_handout(task)
        return task

    def get_ahead(self, worker_id: int, now: float) -> Task | None:
        """A training task for `worker_id` to hold ahead of the one it trains, or None (see
        the module docstring for when one is handed out)."""
        if self.failure is not None or self.training_stopped:
            return None
        held = self._doing.of(worker_id)
        if (
            len(held) != 1
            or held[0].ahead
            or held[0].task.type != TaskType.TRAINING
            or not self._todo
            or self._todo[0].type != TaskType.TRAINING
            or len(self._todo) < self._doing.num_workers()
        ):
            return None
        task = self._todo.popleft()
        self._doing.add(_Running(task, worker_id, now, now, ahead=True))
        self._note_handout(task)
        return task

    def _note_handout(self, task: Task) -> None:
        if task.type == TaskType.TRAINING:
            self._log.handed_out(task)

    def _put_back(self, running: _Running) -> None:
        """An unstarted task held ahead goes back to the queue, behind queued evaluations."""
        self._doing.pop(running.task.task_id)
        first_training = next(
            (i for i, t in enumerate(self._todo) if t.type == TaskType.TRAINING), len(self._todo)
        )
        self._todo.insert(first_training, running.task)

    def report_progress(self, worker_id: int, task_id: int, records_done: int, now: float) -> int:
        """Record cumulative progress within a task; the task's reports so far, this one
        counted (0: the task is not this worker's)."""
        running = self._doing.get(task_id)
        if running is None or running.worker_id != worker_id:
            return 0
        if running.task.type == TaskType.TRAINING:
            waited = now - running.last_progress_at
            if running.reports:
                self.progress_times.saw_gap(waited)
            else:
                self.progress_times.saw_lead(waited, running.first)
        running.reports += 1
        done = max(0, min(records_done, running.task.num_records))
        if done > running.records_done:
            if running.task.type == TaskType.TRAINING:
                self._count_trained(running.task, running.records_done, done)
            running.records_done = done
        running.last_progress_at = now
        return running.reports

    def _count_trained(self, task: Task, old: int, new: int, redone: bool = False) -> None:
        """Records `old`..`new` of a training task were trained; those an earlier run of a
        resumed job had trained (beyond its checkpoint), or `redone`, were trained again."""
        key = ShardKey.of(task)
        stats = self.epochs[task.epoch]
        stats.trained += new - old
        if redone:
            stats.redone += new - old
        else:
            before = self._resumed.trained.get(key, 0)
            stats.redone += max(0, min(task.skip + new, before) - (task.skip + old))
        self._log.trained(key, task.skip + new)

    def progress_since(self, cursor: int = 0) -> ProgressDelta:
        """Training tasks handed out and ranges whose trained prefix advanced since `cursor`
        (0: since the start): what the master journals each pass, beside the checkpoints."""
        return self._log.since(cursor)

    def report_result(
        self, worker_id: int, task_id: int, error: str, now: float, records_done: int = -1
    ) -> None:
        """A worker finished a task (`error` empty) or gave up on it (`error` says why)."""
        running = self._doing.get(task_id)
        if running is None or running.worker_id != worker_id:
            return
        if not error:
            done = running.task.num_records if records_done < 0 else records_done
            self.report_progress(worker_id, task_id, done, now)
            self._doing.pop(task_id)
            if running.records_done < running.task.num_records:
                self._requeue(
                    running, now, cause="worker read fewer records than planned", count_failure=True
                )
                return
            self.finished_tasks += 1
            if running.task.type != TaskType.TRAINING:
                self.progress_times.saw_duration(running.task.type, now - running.started_at)
            return
        if records_done >= 0:
            self.report_progress(worker_id, task_id, records_done, now)
        self._doing.pop(task_id)
        self._requeue(running, now, cause=f"task error: {error}", count_failure=True, error=error)

    def recover_worker(
        self,
        worker_id: int,
        now: float,
        cause: str,
        detected_at: float | None = None,
        applied: dict[int, int] | None = None,
        count_failure: bool = True,
    ) -> list[Task]:
        """Put the unfinished remainder of a dead worker's tasks back in the todo queue.

        `applied` maps task id -> records whose gradients reached the parameter servers (from
        the PS), which may exceed the last progress report (reports come at most every
        `PROGRESS_EVERY_S` within a task, and the minibatch in flight may land): those records
        are in the model, so they count as trained and the remainder starts after them; none
        is trained twice. Without `applied` (the parameter servers could not be asked) the
        remainder starts at the last report, and what was applied since (up to
        `PROGRESS_EVERY_S` of minibatches) is trained again uncounted. A preempted worker (it
        exited cleanly on SIGTERM) does not count against the task's retry cap:
        `count_failure=False`.
        """
        requeued: list[Task] = []
        held = self._doing.of(worker_id)
        for running in sorted(held, key=lambda r: not r.ahead):  # the remainder ends up first
            if running.ahead:
                self._put_back(running)
                continue
            task_id = running.task.task_id
            self._doing.pop(task_id)
            reached = (applied or {}).get(task_id, 0)
            if running.task.type == TaskType.TRAINING and reached > running.records_done:
                reached = min(reached, running.task.num_records)
                self._count_trained(running.task, running.records_done, reached)
                running.records_done = reached
            task = self._requeue(
                running, now, cause=cause, count_failure=count_failure, since=detected_at
            )
            if task is not None:
                requeued.append(task)
        return requeued

    def expired(self, now: float) -> list[tuple[int, Task]]:
        """(worker id, task) pairs with no progress for longer than their task timeout."""
        return [
            (r.worker_id, r.task)
            for r in self._doing.values()
            if not r.ahead and now - r.last_progress_at > self._limit(r)
        ]

    def timeout_of(self, task_id: int) -> float:
        """The no-progress limit of running task `task_id` (that of a later training task that
        reported progress if it is not running)."""
        running = self._doing.get(task_id)
        if running is None:
            return self.task_timeout(TaskType.TRAINING, first=False, reported=True)
        return self._limit(running)

    def task_timeout(self, task_type: TaskType, first: bool, reported: bool) -> float:
        """Seconds without progress after which a task of `task_type` times out (`first`: a
        worker's first task; `reported`: it has reported progress), from what was seen so far."""
        return no_progress_limit(
            self.config.timeouts, self.progress_times, int(task_type), first, reported
        )

    def restart_clocks(self, now: float) -> None:
        """Every running task's no-progress clock starts again at `now`: after an outage that
        stalled every worker through no fault of theirs (a parameter server was down)."""
        for running in self._doing.values():
            running.last_progress_at = max(running.last_progress_at, now)

    def _limit(self, running: _Running) -> float:
        return self.task_timeout(running.task.type, running.first, running.reports > 0)

    # -- internals -----------------------------------------------------------------------------

    def _requeue(
        self,
        running: _Running,
        now: float,
        cause: str,
        count_failure: bool,
        error: str = "",
        since: float | None = None,
    ) -> Task | None:
        task = running.task
        done = running.records_done
        if done >= task.num_records:
            self.finished_tasks += 1
            return None
        failures = self._failures.setdefault(task.lineage, _Failures())
        if count_failure:
            failures.count += 1
            failures.last_error = error or cause
        if failures.count > self.config.max_task_retries:
            self.failure = (
                f"task {task.lineage} ({task.shard.file} records [{task.shard.start}, "
                f"{task.shard.end}), epoch {task.epoch}) failed {failures.count} times, more "
                f"than --max_task_retries={self.config.max_task_retries}; last error: "
                f"{failures.last_error}"
            )
            self.events.append(Event("job_failed", now, detail=self.failure, task_id=task.task_id))
            return None
        new = dataclasses.replace(task, task_id=self._take_id(), skip=task.skip + done)
        self._todo.appendleft(new)
        self.events.append(
            Event(
                "task_requeued",
                now,
                seconds=now - (since if since is not None else now),
                worker_id=running.worker_id,
                task_id=task.task_id,
                detail=f"{cause}; {new.num_records} record(s) of {task.shard.file} "
                f"[{task.shard.start}, {task.shard.end}) back as task {new.task_id}",
            )
        )
        return new

    def add_tasks(
        self, shards: Sequence[Shard], task_type: TaskType, model_version: int
    ) -> list[int]:
        """Queue evaluation (or prediction) tasks ahead of training; return their lineages.

        They carry `model_version` (the version they evaluate) and epoch -1: their records are
        not training records and do not enter the epoch accounting.
        """
        tasks = [
            Task(self._take_id(), shard, task_type, -1, model_version=model_version)
            for shard in shards
        ]
        self._todo.extendleft(reversed(tasks))
        return [t.lineage for t in tasks]

    def lineage_of(self, worker_id: int, task_id: int) -> int | None:
        """The lineage of a task `worker_id` is running, None if it is not running it."""
        task = self.running(worker_id, task_id)
        return task.lineage if task is not None else None

    def stop_training(self, reason: str, now: float) -> None:
        """End training before its last epoch: no training task is handed out from now on
        (a requeued remainder neither); tasks in progress finish, tasks held ahead are
        dropped. Evaluations still run."""
        if self.training_stopped:
            return
        self.training_stopped = reason
        self._next_epoch = self.config.num_epochs
        self._todo = deque(t for t in self._todo if t.type != TaskType.TRAINING)
        for task_id in [r.task.task_id for r in self._doing.values() if r.ahead]:
            self._doing.pop(task_id)
        self.events.append(Event("training_stopped", now, detail=reason))

    # -- job state -----------------------------------------------------------------------------

    @property
    def training_finished(self) -> bool:
        """All epochs planned and no training task left to do or in progress."""
        return (
            self.failure is None
            and self._next_epoch >= self.config.num_epochs
            and not any(t.type == TaskType.TRAINING for t in self._todo)
            and not any(r.task.type == TaskType.TRAINING for r in self._doing.values())
        )

    @property
    def finished(self) -> bool:
        """All epochs planned and every task done (False when the job failed)."""
        return (
            self.failure is None
            and not self._todo
            and not self._doing
            and self._next_epoch >= self.config.num_epochs
        )

    def doing(self, worker_id: int | None = None) -> list[Task]:
        running = self._doing.values() if worker_id is None else self._doing.of(worker_id)
        return [r.task for r in running]

    def running(self, worker_id: int, task_id: int) -> Task | None:
        """Task `task_id` if `worker_id` runs it or holds it ahead, else None."""
        running = self._doing.get(task_id)
        return running.task if running is not None and running.worker_id == worker_id else None

    def holders(self) -> set[int]:
        """The workers that hold a task now."""
        return self._doing.workers()

    @property
    def epoch(self) -> int:
        """The epoch of the work in progress (the last planned one)."""
        return max(0, self._next_epoch - 1)

    @property
    def records_planned(self) -> int:
        return sum(s.num_records for s in self._shards) * self.config.num_epochs

    @property
    def records_trained(self) -> int:
        return sum(e.trained for e in self.epochs)

    @property
    def records_redone(self) -> int:
        return sum(e.redone for e in self.epochs)

    @property
    def records_covered(self) -> int:
        """Records a resumed job found in its checkpoint (counted in `records_trained`)."""
        return sum(e.covered for e in self.epochs)
