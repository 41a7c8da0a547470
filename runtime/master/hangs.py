"""The supervisor's liveness checks: kill a hung role, wait for a slow one, and say which.

Parameter servers that answer no liveness probe past a deadline that grows with the machine's
load (ps_health.py) and workers whose task made no progress past the task timeout
(task_timeout.py) are judged by liveness.py before anything is killed: a hung one (stopped, or
making no progress although it could) is killed, its exit relaunches it (exits.py); a slow one
(runnable, or using CPU) is waited for, and said once, on the console and in the report (an
`instance_slow` event). A parameter server with no checkpoint to restore from holds the only
copy of its parameters: the line says the job waits for it. A worker that stays silent while
it uses CPU for `WORKER_PATIENCE` deadlines is hung after all (an endless loop in user code).

Every role the master kills or finds hung is named on the console as it happens.
"""

from __future__ import annotations

import logging
import signal
from typing import TYPE_CHECKING

from elasticdl.runtime.master.events import InstanceSlow, PSUnresponsive, TaskTimeout
from elasticdl.runtime.master.exits import Role, Why
from elasticdl.runtime.master.instances import InstanceManager
from elasticdl.runtime.master.liveness import Samples, Verdict, judge, load_factor
from elasticdl.runtime.master.ps_health import TIMEOUT_S

if TYPE_CHECKING:
    from elasticdl.runtime.master.supervisor import Supervisor
    from elasticdl.runtime.master.task_state import Expired

log = logging.getLogger("elasticdl.master")

WORKER_PATIENCE = 4.0
UNSEEN_PATIENCE = 5.0
"""A parameter server the master cannot see (a pod) and that has no checkpoint to restore
from: silence it waits out, in deadlines, before it takes it for hung."""


class Hangs:
    """Which roles are hung, for one supervisor; see the module docstring."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._sup = supervisor
        manager = supervisor.manager
        self._visible = type(manager).sample is not InstanceManager.sample
        self.samples = Samples(lambda key, now: manager.sample(*key, now))  # type: ignore[misc]
        self.load = load_factor
        self.hung_ps: dict[int, float] = {}
        """PS id -> when it went silent, for a PS killed as hung (until its exit)."""
        self.timed_out: dict[int, tuple[float, str]] = {}
        """Worker id -> (when, why) the master killed it for its task (until its exit)."""
        self._silent_since: dict[int, float] = {}
        self._said_slow: dict[tuple[Role, int], float] = {}

    def observe(self, now: float) -> None:
        """Sample every process the master can see (a sample a role's silence is judged from
        must come from before it went silent)."""
        if not self._visible:
            return
        for role in (Role.PS, Role.WORKER):
            for index in self._sup.manager.alive(role):
                self.samples.take((role, index), now)

    def check_ps(self, now: float) -> None:
        """Kill the parameter servers that are hung; say the slow ones once."""
        sup = self._sup
        for ps_id, since in sup.plugin.unresponsive_ps(now):
            if ps_id in self.hung_ps or ps_id not in sup.manager.alive(Role.PS):
                continue
            key = (Role.PS, ps_id)
            current = self.samples.take(key, now)
            base = TIMEOUT_S
            if current is None and sup.plugin.latest_checkpoint() is None:
                base *= UNSEEN_PATIENCE
            found = judge(now - since, base, self.load(), self.samples.at(key, since), current)
            if found.verdict is Verdict.SLOW and self._said_slow.get(key) != since:
                why = "; the job waits"
                if sup.plugin.latest_checkpoint() is None:
                    why += ": it holds the only copy of its parameters (no checkpoint to restore)"
                self._say_slow(key, since, now, found.reason + why)
            elif found.verdict is Verdict.HUNG:
                self.hung_ps[ps_id] = since
                sup.events.add(PSUnresponsive(now, ps_id, now - since))
                log.warning("parameter server %d is hung (%s): killing it", ps_id, found.reason)
                sup.send(Role.PS, ps_id, signal.SIGKILL, Why.HUNG, f"hung: {found.reason}")

    def check_workers(self, expired: list[Expired], now: float) -> None:
        """Kill the workers whose task is hung; say the slow ones once."""
        silent = {e.worker_id for e in expired}
        self._silent_since = {w: t for w, t in self._silent_since.items() if w in silent}
        for e in expired:
            if e.worker_id not in self.timed_out:
                self._check_worker(e.worker_id, e.task_id, e.timeout_s, now)

    def _check_worker(self, worker_id: int, task_id: int, timeout_s: float, now: float) -> None:
        since = self._silent_since.setdefault(worker_id, now - timeout_s)
        key = (Role.WORKER, worker_id)
        found = judge(
            now - since,
            timeout_s,
            self.load(),
            self.samples.at(key, since),
            self.samples.take(key, now),
            what=f"made no progress on task {task_id}",
            patience=WORKER_PATIENCE,
        )
        if found.verdict is Verdict.SLOW:
            self._say_slow(key, since, now, found.reason + "; the job waits")
            return
        if found.verdict is not Verdict.HUNG:
            return
        sup = self._sup
        sup.events.add(TaskTimeout(now, worker_id, task_id, timeout_s))
        cause = (
            f"hung: no progress on task {task_id} for more than the task timeout "
            f"({timeout_s:.1f} s): {found.reason}; killed by the master with SIGKILL"
        )
        log.warning("worker %d is hung (%s): killing it", worker_id, found.reason)
        self.timed_out[worker_id] = (now, cause)
        sup.retired.discard(worker_id)
        sup.send(Role.WORKER, worker_id, signal.SIGKILL, Why.TIMEOUT, "task timeout")

    def _say_slow(self, key: tuple[Role, int], since: float, now: float, reason: str) -> None:
        if self._said_slow.get(key) == since:
            return
        self._said_slow[key] = since
        role, index = key
        self._sup.events.add(InstanceSlow(now, str(role), index, now - since, reason))
        name = "parameter server" if role is Role.PS else "worker"
        log.warning("%s %d is slow, not hung: %s", name, index, reason)
