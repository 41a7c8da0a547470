"""Warm spare workers (`--spare_workers N`): a lost worker's place is taken at once.

A replacement worker spends seconds before it trains: its process starts, imports TensorFlow
(about 4 s of CPU), connects, builds and traces the model. A spare has done all of that ahead
of need. It is an ordinary worker process with its own id that the master answers with WAIT
(naming a few records to build and trace its model on) and counts nowhere: not among the
job's workers (--num_workers, resizing, --min_workers), not as holding work. When a worker is
lost and the job would relaunch it, the oldest spare is promoted instead (the servicer starts
handing it tasks, within its next WAIT poll) and a new spare is started in its place.

Spares start once training is under way (a task finished), so they do not compete with the
job's own workers for the CPU while those start. A spare that ends by itself while the job
runs is started again, up to `MAX_SPARE_LOSSES` times (then the job goes on without spares).

`spares_to_start` is the rule, as pure logic; `SparePool` applies it through the supervisor.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from elasticdl.runtime.master.events import SpareLaunched, SparePromoted
from elasticdl.runtime.master.exits import Role

if TYPE_CHECKING:
    from elasticdl.runtime.master.supervisor import Supervisor

MAX_SPARE_LOSSES = 3


def spares_to_start(
    wanted: int, standing: int, tasks_finished: int, finishing: bool, losses: int
) -> int:
    """How many spares to start now: up to `wanted` standing, once a task finished, never while
    the job is finishing, and none after `MAX_SPARE_LOSSES` spares ended by themselves."""
    if finishing or tasks_finished < 1 or losses >= MAX_SPARE_LOSSES:
        return 0
    return max(0, wanted - standing)


class SparePool:
    """The job's spare workers; the supervisor calls `on_pass` each pass, `promote` when it
    would relaunch a lost worker and `on_exit` for every worker exit."""

    def __init__(self, supervisor: Supervisor, wanted: int) -> None:
        self._sup = supervisor
        self._wanted = wanted
        self._standing: list[int] = []
        self._losses = 0

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(self._standing)

    def on_pass(self, tasks_finished: int, finishing: bool) -> None:
        if not self._wanted:
            return
        count = spares_to_start(
            self._wanted, len(self._standing), tasks_finished, finishing, self._losses
        )
        for _ in range(count):
            self._sup.launch_worker(SpareLaunched, standby=self._stand_by)

    def promote(self, replaces: int, lost_at: float, from_budget: bool) -> int | None:
        """The id of the spare that takes the lost worker's place now; None without one."""
        alive = set(self._sup.manager.alive(Role.WORKER))
        for worker_id in list(self._standing):
            if worker_id not in alive:
                continue
            self._standing.remove(worker_id)
            self._sup.tasks.set_standby(set(self._standing))
            now = time.monotonic()
            self._sup.events.add(
                SparePromoted(
                    now,
                    worker_id=worker_id,
                    replaces=replaces,
                    seconds=now - lost_at,
                    from_budget=from_budget,
                )
            )
            return worker_id
        return None

    def on_exit(self, worker_id: int, finishing: bool) -> bool:
        """Forget a spare that ended; whether `worker_id` was one."""
        if worker_id not in self._standing:
            return False
        self._standing.remove(worker_id)
        self._sup.tasks.set_standby(set(self._standing))
        if not finishing:
            self._losses += 1
        return True

    def _stand_by(self, worker_id: int) -> None:
        """Called with a spare's id before its process starts: it must never get a task."""
        self._standing.append(worker_id)
        self._sup.tasks.set_standby(set(self._standing))
