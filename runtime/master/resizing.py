"""Changes to a running job's workers that come from outside its exits: chaos and resizing.

`Resizer.on_pass` fires the chaos actions that are due (chaos.py: signal instances, add or
remove a worker; a worker `stop` is armed and lands in `on_dispatch`) and applies the resize
requests in the inbox (scaling.py: grow, or retire the newest workers), through the
supervisor, which launches, signals and retires. Every action is an event in the job's log.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from elasticdl.runtime.master.chaos import ChaosAction, due_actions
from elasticdl.runtime.master.events import (
    ChaosFired,
    ChaosSkipped,
    Scaled,
    WorkerAdded,
    WorkerLaunched,
    WorkerRemoved,
)
from elasticdl.runtime.master.exits import Role, Why
from elasticdl.runtime.master.scaling import (
    ScaleError,
    ScaleInbox,
    ScaleRequest,
    check_target,
    plan_scale,
)

if TYPE_CHECKING:
    from elasticdl.runtime.master.supervisor import Supervisor

_SIGNALS = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "stop": signal.SIGSTOP}


@dataclass
class _Armed:
    """A due action waiting for tasks to be handed out: to each of `waiting` (a worker stop)
    or, when `waiting` is None, to any worker (a PS signal)."""

    action: ChaosAction
    waiting: set[int] | None
    delivered: list[int] = field(default_factory=list)


class Resizer:
    def __init__(
        self, supervisor: Supervisor, chaos: list[ChaosAction], inbox: ScaleInbox | None
    ) -> None:
        self._sup = supervisor
        self._chaos = [a for a in chaos if not a.lands_on_dispatch]
        self._on_dispatch = [a for a in chaos if a.lands_on_dispatch]
        """Actions checked and fired in `on_dispatch`, not in the loop (chaos.py)."""
        self._inbox = inbox
        self._armed: list[_Armed] = []
        self._armed_lock = threading.Lock()

    @property
    def acts_on_dispatch(self) -> bool:
        """True when the job's chaos has an action that lands as a task is handed out: the
        servicer must call `on_dispatch` then."""
        return bool(self._on_dispatch)

    def on_pass(self, tasks_done: dict[int, int]) -> None:
        self._fire_chaos(tasks_done)
        if self._inbox is not None:
            self._apply_scale_requests(self._inbox)

    def on_dispatch(self, worker_id: int, tasks_done: dict[int, int]) -> None:
        """Called by the servicer, under its lock, as `worker_id` starts a task (`tasks_done`:
        per worker, the tasks finished so far, the one reported in the same call included):
        the dispatch actions that became due are armed, and those for this worker or for any
        worker land now, before the task is in hand."""
        with self._armed_lock:
            self._arm_due_locked(tasks_done)
            for armed in list(self._armed):
                if armed.waiting is None:
                    role, targets = Role.PS, armed.action.group
                elif worker_id in armed.waiting:
                    role, targets = Role.WORKER, (worker_id,)
                    armed.waiting.discard(worker_id)
                else:
                    continue
                sig = _SIGNALS[armed.action.action]
                words = f"chaos {armed.action}"
                armed.delivered += [
                    i for i in targets if self._sup.send(role, i, sig, Why.CHAOS, words)
                ]
                if not armed.waiting:
                    self._armed.remove(armed)
                    self._fired(armed.action, role, armed.delivered, time.monotonic())

    def at_end(self, tasks_done: dict[int, int]) -> None:
        """The job ended: each action that did not land everywhere is reported skipped, once,
        with why (its trigger never came, or no task started after it came)."""
        with self._armed_lock:
            self._arm_due_locked(tasks_done)
            now = time.monotonic()
            for armed in self._armed:
                if armed.waiting is None:
                    who = "a worker"
                else:
                    who = ", ".join(f"worker{i}" for i in armed.action.group if i in armed.waiting)
                why = f"the job ended before {who} started a task after it came due"
                if armed.delivered:
                    why += f" (sent to {', '.join(f'worker{i}' for i in armed.delivered)})"
                self._sup.events.add(ChaosSkipped(now, str(armed.action), why))
            self._armed.clear()
            for action in self._chaos + self._on_dispatch:
                if not action.fired:
                    action.fired = True
                    why = "the job ended before it came due"
                    self._sup.events.add(ChaosSkipped(now, str(action), why))

    def _arm_due_locked(self, tasks_done: dict[int, int]) -> None:
        """Arm the dispatch actions that came due: a worker stop waits for each named worker,
        a PS signal for any worker."""
        elapsed = time.monotonic() - self._sup.t0
        for action in due_actions(self._on_dispatch, elapsed, tasks_done):
            waiting = set(action.group) if action.role == "worker" else None
            self._armed.append(_Armed(action, waiting))

    def _fire_chaos(self, tasks_done: dict[int, int]) -> None:
        sup = self._sup
        elapsed = time.monotonic() - sup.t0
        for action in due_actions(self._chaos, elapsed, tasks_done):
            now = time.monotonic()
            if action.action == "add":
                sup.target += 1
                sup.launch_worker(WorkerAdded, chaos=str(action))
            elif action.action == "remove":
                active = sup.active_workers()
                if sup.target - 1 < sup.config.min_workers:
                    why = f"the job is at --min_workers={sup.config.min_workers}"
                    sup.events.add(ChaosSkipped(now, str(action), why))
                elif active:
                    sup.target -= 1
                    sup.retire(active[-1], f"chaos {action}")
                    sup.events.add(WorkerRemoved(now, active[-1], str(action)))
            else:
                role = Role.PS if action.role == "ps" else Role.WORKER
                delivered = [
                    index
                    for index in action.group
                    if sup.send(role, index, _SIGNALS[action.action], Why.CHAOS, f"chaos {action}")
                ]
                self._fired(action, role, delivered, now)

    def _fired(self, action: ChaosAction, role: Role, delivered: list[int], now: float) -> None:
        self._sup.events.add(
            ChaosFired(
                now,
                str(action),
                delivered=len(delivered) == len(action.group),
                to=tuple(f"{role}{i}" for i in delivered),
            )
        )

    def _apply_scale_requests(self, inbox: ScaleInbox) -> None:
        taken = inbox.take()
        try:
            for request in taken:
                self._apply(request)
        finally:
            for request in taken:
                if not request.wait(0):
                    request.answer(error="the master failed while applying it; see its log")

    def _apply(self, request: ScaleRequest) -> None:
        sup = self._sup
        try:
            check_target(request.workers, sup.config.min_workers, *(sup.config.worker_bound or ()))
        except ScaleError as err:
            self._answer(request, error=f"cannot scale to {request.workers} worker(s): {err}")
            return
        before = sup.target
        sup.target = request.workers
        plan = plan_scale(request.workers, sup.active_workers())
        launched = [sup.launch_worker(WorkerLaunched) for _ in range(plan.launch)]
        for victim in plan.retire:
            sup.retire(victim, f"job scaled to {request.workers} worker(s)")
        if launched:
            done = f"started worker(s) {', '.join(map(str, launched))}"
        elif plan.retire:
            done = f"retiring worker(s) {', '.join(map(str, plan.retire))}"
        else:
            done = "nothing to do"
        message = f"scaled from {before} to {request.workers} worker(s): {done}"
        self._answer(request, message, launched=tuple(launched), retired=tuple(plan.retire))

    def _answer(
        self,
        request: ScaleRequest,
        message: str = "",
        error: str = "",
        launched: tuple[int, ...] = (),
        retired: tuple[int, ...] = (),
    ) -> None:
        self._sup.events.add(
            Scaled(
                time.monotonic(),
                request.workers,
                request.source,
                accepted=not error,
                message=error or message,
                launched=launched,
                retired=retired,
            )
        )
        request.answer(message, error)
