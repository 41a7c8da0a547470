"""One supervisor for every job kind: launch, watch, relaunch and retire PS and workers.

`Supervisor.watch()` is the job's loop. Each pass it reacts at once to instance exits (refine
the exit kind with what the master knows, `exits.decide` what to do, requeue the unfinished
remainder of a lost worker's tasks, relaunch), kills the workers and parameter servers that are
hung, not merely slow (hangs.py: a hung PS is the PS's failure, not its workers'; a slow one is
waited for), fires chaos actions and resize requests (resizing.py), fails the
job once fewer than --min_workers workers are alive, and lets the job kind's plug-in do its
part (evaluation, progress, TensorBoard). Everything it sees and does goes to the event log.

Training and inference differ only in the `JobPlugin` they give: where a lost worker's
applied progress comes from (the PS), what "done" means (training: every task and the final
evaluation), how a PS is restored (its checkpoint) and what to do each pass.

The master remembers every signal it sent itself (chaos, a task timeout, a hang, retiring a
worker), so an exit is attributed to the right cause: an instance killed by SIGKILL that it
did not send is reported as killed from outside the job (most often the OOM killer).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from elasticdl.runtime.master.chaos import ChaosAction
from elasticdl.runtime.master.events import (
    EventLog,
    InstanceLost,
    NotRelaunched,
    PSRecovered,
    RelaunchRefused,
    WorkerLaunched,
    WorkerRelaunched,
)
from elasticdl.runtime.master.exits import (
    PORT_RETRIES,
    PORT_TAKEN_EXIT,
    Action,
    ExitKind,
    Phase,
    Role,
    Situation,
    Why,
    cause_of,
    decide,
    last_line,
    refine,
)
from elasticdl.runtime.master.hangs import Hangs
from elasticdl.runtime.master.instances import InstanceExit, InstanceManager
from elasticdl.runtime.master.resizing import Resizer
from elasticdl.runtime.master.scaling import ScaleInbox
from elasticdl.runtime.master.spares import SparePool
from elasticdl.runtime.master.task_manager import JobFailed
from elasticdl.runtime.master.task_state import TaskState

log = logging.getLogger("elasticdl.master")

LOOP_S = 0.1
EXIT_GRACE_S = 0.5
"""How long a pass that finds too few workers alive waits for their exits to be reported."""
PS_SERVING_TIMEOUT_S = 120.0
"""How long a relaunched PS may take to serve again before the job fails."""
AWAIT_SLICE_S = 1.0
"""A recovery's wait for a relaunched PS asks in slices this long whether it still matters."""


def serving_again(plugin: JobPlugin, ps_id: int, address: str, latest: Callable[[], bool]) -> bool:
    """Whether relaunched PS `ps_id` serves at `address` within PS_SERVING_TIMEOUT_S. The
    wait ends early (False) once `latest()` is false, the PS relaunched again: that relaunch's
    own wait reports, and this one would hold the job's end and keep the workers' timeouts off
    (`Supervisor._ps_down`) for nothing."""
    deadline = time.monotonic() + PS_SERVING_TIMEOUT_S
    while True:
        left = deadline - time.monotonic()
        try:
            plugin.wait_serving(ps_id, address, max(0.0, min(AWAIT_SLICE_S, left)))
            return True
        except TimeoutError as err:
            if not latest():
                return False
            if left > AWAIT_SLICE_S:
                continue
            log.warning("parameter server %d did not serve again: %s", ps_id, err)
            return False
        except Exception as err:  # noqa: BLE001 - reported; its exit, if any, follows
            log.warning("parameter server %d did not serve again: %s", ps_id, err)
            return False


class StopRequested(Exception):
    """The master was asked to stop (SIGTERM/SIGINT): the job ends with status "stopped"."""


class JobPlugin:
    """What a job kind plugs into the supervisor; the defaults suit a job without PS."""

    def applied_progress(self, task_ids: Sequence[int]) -> dict[int, int]:
        """Records of each task whose updates reached the PS (a lost worker's true progress)."""
        return {}

    def done(self, tasks: TaskState) -> bool:
        """Whether the job's work is over (called each pass)."""
        return tasks.finished()

    def on_pass(self, supervisor: Supervisor) -> None:
        """Once per pass of the loop (evaluation scheduling, progress, TensorBoard)."""

    def latest_checkpoint(self) -> int | None:
        """The version a relaunched PS restores (None: it starts from scratch)."""
        return None

    def wait_serving(self, ps_id: int, address: str, timeout: float) -> float:
        """Block until the PS at `address` serves; the seconds waited (raise on timeout)."""
        return 0.0

    def ps_started(self, ps_id: int, address: str) -> None:
        """PS `ps_id` was (re)started at `address`, maybe a new one (liveness probes start
        over; the master's own calls go there)."""

    def restored(self, ps_id: int) -> tuple[int, dict[str, int]] | None:
        """What serving PS `ps_id` restored at its start, as it says: (checkpoint version, -1
        for none; embedding rows per table). None: unknown."""
        return None

    def unresponsive_ps(self, now: float) -> list[tuple[int, float]]:
        """(PS id, when it stopped answering) of parameter servers that answer no probe."""
        return []


@dataclass
class SupervisorConfig:
    num_workers: int
    min_workers: int = 1
    max_worker_relaunches: int = 3
    num_ps: int = 0
    max_ps_relaunches: int = 0
    checkpointed: bool = False
    """Parameter servers write checkpoints: a lost one can be restored."""
    chaos: list[ChaosAction] = field(default_factory=list)
    worker_bound: tuple[int, str] | None = None
    """The most workers `elasticdl scale` may ask for, and why (runtime/master/bounds.py)."""
    spare_workers: int = 0
    """Warm spares kept started to take a lost worker's place (runtime/master/spares.py)."""


class Supervisor:
    def __init__(
        self,
        config: SupervisorConfig,
        manager: InstanceManager,
        tasks: TaskState,
        events: EventLog,
        plugin: JobPlugin,
        scale_inbox: ScaleInbox | None = None,
        t0: float | None = None,
    ) -> None:
        self.config = config
        self.manager = manager
        self.tasks = tasks
        self.events = events
        self.plugin = plugin
        self.t0 = time.monotonic() if t0 is None else t0
        self.ps_addrs: list[str] = []
        self.target = config.num_workers
        """How many workers the job wants now: --num_workers, then resize requests."""
        self.retired: set[int] = set()
        self._next_worker_id = 0
        self._relaunches = 0
        self._ps_relaunches = 0
        self._sent: dict[tuple[Role, int], tuple[Why, str]] = {}
        self.hangs = Hangs(self)
        self._ports_taken: dict[int, int] = {}
        """Per PS: its exits in a row for a port that was taken (exits.PORT_RETRIES)."""
        self._ps_starts: dict[int, int] = {}
        """Per PS: its relaunches so far; a recovery waits only for the latest one."""
        self._last_refusal = ""
        self._stop = threading.Event()
        self._stop_reason = ""
        self._stopping = False
        """Set once the job stops: no exit is relaunched any more."""
        self._recoveries: list[threading.Thread] = []
        self.resizer = Resizer(self, config.chaos, scale_inbox)
        self.spares = SparePool(self, config.spare_workers)
        if self.resizer.acts_on_dispatch:
            tasks.on_dispatch(self.resizer.on_dispatch)

    # -- launching -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the parameter servers, then --num_workers workers."""
        self.ps_addrs = [self.manager.start_ps(i) for i in range(self.config.num_ps)]
        for _ in range(self.config.num_workers):
            self.launch_worker()

    def launch_worker(
        self,
        event: Callable[..., WorkerLaunched] = WorkerLaunched,
        standby: Callable[[int], None] | None = None,
        **detail: object,
    ) -> int:
        """Start a worker; `standby(id)` is called before its process starts (a spare)."""
        worker_id = self._next_worker_id
        self._next_worker_id += 1
        if standby is not None:
            standby(worker_id)
        started = time.monotonic()
        self.manager.start_worker(worker_id, self.ps_addrs)
        if event is WorkerRelaunched:
            detail["launch_s"] = time.monotonic() - started
        self.events.add(event(started, worker_id=worker_id, **detail))
        return worker_id

    def send(self, role: Role, index: int, sig: int, why: Why, words: str) -> bool:
        """Signal an instance, remembering why (its exit is then attributed to the master)."""
        self._sent[(role, index)] = (why, words)
        if self.manager.signal(role, index, sig):
            return True
        self._sent.pop((role, index), None)
        return False

    def retire(self, worker_id: int, why: str) -> None:
        """Ask a worker to leave: SIGTERM, it finishes its minibatch (a pod: deleted)."""
        self.retired.add(worker_id)
        self.send(Role.WORKER, worker_id, signal.SIGTERM, Why.RETIRE, why)

    def active_workers(self) -> list[int]:
        """Workers alive and not on their way out (spares are not the job's workers yet)."""
        leaving = self.retired | self.spares.ids
        return [w for w in self.manager.alive(Role.WORKER) if w not in leaving]

    def workers_alive(self) -> list[int]:
        """Workers alive, those on their way out included, spares not."""
        spares = self.spares.ids
        return [w for w in self.manager.alive(Role.WORKER) if w not in spares]

    # -- the loop ------------------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        """Ask the loop to end at its next pass (safe from a signal handler or a thread)."""
        self._stop_reason = reason
        self._stop.set()

    def watch(self) -> None:
        """Run until the plug-in says the job is done; raise JobFailed or StopRequested.
        However it ends, chaos actions that did not land are reported skipped."""
        try:
            while True:
                if self._stop.is_set():
                    raise StopRequested(self._stop_reason)
                for exit_ in self.manager.exits(timeout=LOOP_S):
                    self.on_exit(exit_)
                self.hangs.observe(time.monotonic())
                self.hangs.check_ps(time.monotonic())
                self.plugin.on_pass(self)
                failure = self.tasks.failure()
                if failure is not None:
                    raise JobFailed(failure)
                if self.plugin.done(self.tasks):
                    break
                self.tasks.pace(len(self.workers_alive()), time.monotonic())
                if not self._ps_down():
                    now = time.monotonic()
                    self.hangs.check_workers(self.tasks.expired(now), now)
                done = self.tasks.tasks_done()
                self.resizer.on_pass(done)
                finishing = self._stopping or self.tasks.finished()
                self.spares.on_pass(sum(done.values()), finishing=finishing)
                self._check_min_workers()
        finally:
            self.resizer.at_end(self.tasks.tasks_done())
        self.finish_recoveries()

    def _check_min_workers(self) -> None:
        if len(self.workers_alive()) >= self.config.min_workers:
            return
        # Workers that ended since this pass began (chaos may kill them all at once) are
        # relaunched first: only workers gone for good fail the job.
        for exit_ in self.manager.exits(timeout=EXIT_GRACE_S):
            self.on_exit(exit_)
        alive = len(self.workers_alive())
        if alive < self.config.min_workers:
            raise JobFailed(self._too_few_workers(alive))

    def _too_few_workers(self, alive: int) -> str:
        if alive == 0:
            text = "all workers are gone"
        else:
            text = (
                f"only {alive} worker(s) alive, fewer than --min_workers={self.config.min_workers}"
            )
        if self._last_refusal:
            text += f" and {self._last_refusal}"
        failed = [e for e in self.events.of(InstanceLost) if e.role == "worker" and e.failure]
        if not failed:
            return text
        last = failed[-1]
        if len(failed) > 1 and all(f.cause == last.cause for f in failed):
            return f"{text}: {len(failed)} worker failures, each {last.cause}"
        return f"{text}: {len(failed)} worker failure(s), the last: worker {last.id} {last.cause}"

    def _ps_down(self) -> bool:
        """A PS is being replaced: workers stall through no fault of theirs (no timeouts)."""
        return bool(self.hangs.hung_ps) or any(t.is_alive() for t in self._recoveries)

    # -- exits ---------------------------------------------------------------------------------

    def on_exit(self, exit_: InstanceExit) -> None:
        why, words = self._sent.pop((exit_.role, exit_.index), (None, ""))
        if exit_.role is Role.PS:
            self._on_ps_exit(exit_, why, words)
        else:
            self._on_worker_exit(exit_, why, words)

    def _phase(self, finished: bool) -> Phase:
        """The job's phase when an instance ended (`finished`: every task was done then; a
        worker that ends holding the last task's remainder finds the job running, and is
        replaced like any other)."""
        return Phase.FINISHING if self._stopping or finished else Phase.RUNNING

    def _on_worker_exit(self, exit_: InstanceExit, why: Why | None, words: str) -> None:
        index = exit_.index
        unfinished = self.tasks.doing(index)
        finished = self.tasks.finished()
        kind = refine(exit_.kind, why, work_left=not finished)
        tail = last_line(exit_.log_tail)
        detected_at, cause = exit_.at, ""
        if kind is ExitKind.TIMED_OUT and index in self.hangs.timed_out:
            detected_at, cause = self.hangs.timed_out.pop(index)
        cause = cause or cause_of(kind, exit_.exit_code, exit_.signal, words, exit_.message, tail)
        detail = exit_.describe() + (f": {tail}" if tail and kind is ExitKind.FAILED else "")
        lost = dict(
            role="worker",
            id=index,
            exit_kind=str(kind),
            exit_code=exit_.exit_code,
            signal=exit_.signal,
            cause=cause,
            detail=detail,
            detected_at=detected_at,
            failure=kind.is_failure,
        )
        if self.spares.on_exit(index, finishing=self._stopping or finished):
            self.retired.discard(index)  # a spare holds no task and stands for no worker
            self.events.add(InstanceLost(exit_.at, action=str(Action.RETIRE), **lost))
            return
        job_failure = None
        if unfinished:
            applied: dict[int, int] = {}
            try:
                applied = self.plugin.applied_progress([t.task_id for t in unfinished])
            except Exception as err:  # noqa: BLE001 - PS gone: fall back to reported progress
                log.warning("could not ask the PS for applied progress: %s", err)
            requeued, job_failure = self.tasks.recover_worker(
                index,
                time.monotonic(),
                cause=f"worker {index} {cause if kind.is_failure else kind}",
                detected_at=detected_at,
                applied=applied,
                count_failure=kind.is_failure,
            )
            lost.update(
                requeue_s=time.monotonic() - detected_at,
                tasks_requeued=len(requeued),
                records_requeued=sum(t.num_records for t in requeued),
            )
        if job_failure is not None:
            self.events.add(InstanceLost(exit_.at, action=str(Action.IGNORE), **lost))
            raise JobFailed(job_failure)
        phase = self._phase(finished)
        budget = self.config.max_worker_relaunches
        situation = Situation(
            phase=phase,
            budget_left=budget - self._relaunches,
            below_target=len(self.active_workers()) < self.target,
        )
        decision = decide(kind, Role.WORKER, situation, budget)
        if decision.action is Action.RETIRE and decision.reason:
            reason = f"the job has its {self.target} worker(s)"
            self.events.add(NotRelaunched(time.monotonic(), index, reason))
        elif decision.action is Action.REFUSE:
            self._last_refusal = decision.reason
            if kind is ExitKind.OOM:
                self._last_refusal = f"worker {index} {decision.reason}" + (
                    f": {exit_.message}" if exit_.message else ""
                )
            reason = f"{decision.reason}; worker {index} {cause}"
            self.events.add(RelaunchRefused(time.monotonic(), index, reason))
        elif decision.relaunch:
            from_budget = decision.action is Action.RELAUNCH_BUDGET
            self._relaunches += from_budget
            promoted = self.spares.promote(index, exit_.at, from_budget)
            lost["relaunched_as"] = promoted
            if promoted is None:
                lost["relaunched_as"] = self.launch_worker(
                    WorkerRelaunched,
                    replaces=index,
                    seconds=time.monotonic() - exit_.at,
                    from_budget=from_budget,
                )
        self.retired.discard(index)
        self.events.add(InstanceLost(exit_.at, action=str(decision.action), **lost))

    def _on_ps_exit(self, exit_: InstanceExit, why: Why | None, words: str) -> None:
        index = exit_.index
        kind = refine(exit_.kind, why, work_left=True)
        detected_at = self.hangs.hung_ps.pop(index, exit_.at)
        tail = last_line(exit_.log_tail)
        cause = cause_of(kind, exit_.exit_code, exit_.signal, words, exit_.message, tail)
        phase = self._phase(self.tasks.finished())
        budget = self.config.max_ps_relaunches
        port_taken = exit_.exit_code == PORT_TAKEN_EXIT
        taken_before = self._ports_taken.get(index, 0) if port_taken else 0
        situation = Situation(
            phase=phase,
            budget_left=budget - self._ps_relaunches,
            checkpointed=self.config.checkpointed,
            port_taken=port_taken,
            port_retries_left=PORT_RETRIES - taken_before,
        )
        decision = decide(kind, Role.PS, situation, budget)
        self._ports_taken[index] = taken_before + 1 if port_taken else 0
        self.events.add(
            InstanceLost(
                exit_.at,
                role="ps",
                id=index,
                exit_kind=str(kind),
                exit_code=exit_.exit_code,
                signal=exit_.signal,
                cause=cause,
                detail=exit_.describe() + (f": {tail}" if tail else ""),
                action=str(decision.action),
                detected_at=detected_at,
                failure=phase is Phase.RUNNING,
            )
        )
        if decision.action is Action.FAIL_JOB:
            raise JobFailed(f"parameter server {index} {cause}: {decision.reason}")
        if not decision.relaunch:
            return
        if decision.action is Action.RELAUNCH_BUDGET:
            self._ps_relaunches += 1
        restored = self.plugin.latest_checkpoint()
        version_before = self.tasks.model_version()
        started = time.monotonic()
        address = self.manager.start_ps(index)
        spawn_s = time.monotonic() - started
        self.ps_addrs[index] = address  # new workers start with it; running ones ask for it
        self.plugin.ps_started(index, address)
        start = self._ps_starts[index] = self._ps_starts.get(index, 0) + 1
        thread = threading.Thread(
            target=self._await_ps,
            args=(index, address, detected_at, spawn_s, restored, version_before, start),
            name=f"ps{index}-recovery",
            daemon=True,
        )
        thread.start()
        self._recoveries.append(thread)

    def _await_ps(
        self,
        ps_id: int,
        address: str,
        down_since: float,
        spawn_s: float,
        restored: int | None,
        version_before: int,
        start: int,
    ) -> None:
        """Wait until a relaunched PS serves; its downtime is from `down_since` to then (see
        `serving_again`: `start`, this relaunch's number, must stay the PS's latest)."""
        if not serving_again(
            self.plugin, ps_id, address, lambda: self._ps_starts.get(ps_id) == start
        ):
            return
        now = time.monotonic()
        self.tasks.restart_clocks(now)
        told = self.plugin.restored(ps_id)
        rows = None
        if told is not None:
            version, rows = told
            restored = version if version >= 0 else None
        self.events.add(
            PSRecovered(now, ps_id, now - down_since, spawn_s, restored, version_before, rows)
        )

    def finish_recoveries(self, timeout: float = PS_SERVING_TIMEOUT_S) -> None:
        """Wait for the PS recoveries in flight (their events belong in the report)."""
        deadline = time.monotonic() + timeout
        for thread in self._recoveries:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._recoveries = [t for t in self._recoveries if t.is_alive()]

    # -- the end -------------------------------------------------------------------------------

    def stop_workers(
        self, leave_s: float, why: Why = Why.FINISHED, sig: int = signal.SIGKILL
    ) -> None:
        """Let workers leave by themselves for `leave_s`, then send `sig` to the rest."""
        deadline = time.monotonic() + leave_s
        while self.manager.alive(Role.WORKER) and time.monotonic() < deadline:
            time.sleep(0.02)
        for worker_id in self.manager.alive(Role.WORKER):
            self.send(Role.WORKER, worker_id, sig, why, "job finished")

    def drain_workers(self, timeout: float) -> None:
        """Tell every worker to finish its minibatch and leave (SIGTERM); wait up to
        `timeout` for them (a stopped job keeps what they reported)."""
        self._stopping = True
        for worker_id in self.manager.alive(Role.WORKER):
            self.retire(worker_id, "the job stops")
        deadline = time.monotonic() + timeout
        while self.manager.alive(Role.WORKER) and time.monotonic() < deadline:
            self._record_exits(0.05)
        self._record_exits(EXIT_GRACE_S)  # an instance leaves `alive` before its exit is queued

    def _record_exits(self, timeout: float) -> None:
        for exit_ in self.manager.exits(timeout=timeout):
            if exit_.role is Role.WORKER:
                self.on_exit(exit_)


@contextmanager
def stop_on_signals(supervisor: Supervisor) -> Iterator[None]:
    """While a job runs in the main thread, SIGTERM and SIGINT ask its supervisor to stop."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(number: int, _frame: object) -> None:
        supervisor.request_stop(signal.Signals(number).name)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
