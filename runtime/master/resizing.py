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
class _ArmedStop:
    action: ChaosAction
    waiting: set[int]
    delivered: list[int] = field(default_factory=list)


class Resizer:
    def __init__(
        self, supervisor: Supervisor, chaos: list[ChaosAction], inbox: ScaleInbox | None
    ) -> None:
        self._sup = supervisor
        self._chaos = chaos
        self._inbox = inbox
        self._armed: dict[int, _ArmedStop] = {}
        """Worker id -> the due `stop` waiting for that worker's next task (chaos.py)."""
        self._armed_lock = threading.Lock()

    @property
    def stops_on_dispatch(self) -> bool:
        """True when the job's chaos has a worker `stop`: the servicer must call
        `on_dispatch` as it hands out each task."""
        return any(a.lands_on_dispatch for a in self._chaos)

    def on_pass(self, tasks_done: dict[int, int]) -> None:
        self._fire_chaos(tasks_done)
        if self._inbox is not None:
            self._apply_scale_requests(self._inbox)

    def on_dispatch(self, worker_id: int) -> None:
        """Called by the servicer, under its lock, as it hands `worker_id` a task: an armed
        `stop` for that worker lands now, before the worker has the task in hand."""
        with self._armed_lock:
            armed = self._armed.pop(worker_id, None)
            if armed is None:
                return
            sent = self._sup.send(
                Role.WORKER, worker_id, signal.SIGSTOP, Why.CHAOS, f"chaos {armed.action}"
            )
            armed.waiting.discard(worker_id)
            if sent:
                armed.delivered.append(worker_id)
            if not armed.waiting:
                self._fired(armed.action, Role.WORKER, armed.delivered, time.monotonic())

    def _fire_chaos(self, tasks_done: dict[int, int]) -> None:
        sup = self._sup
        elapsed = time.monotonic() - sup.t0
        for action in due_actions(self._chaos, elapsed, tasks_done):
            now = time.monotonic()
            if action.lands_on_dispatch:
                armed = _ArmedStop(action, set(action.group))
                with self._armed_lock:
                    self._armed.update({i: armed for i in action.group})
            elif action.action == "add":
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
