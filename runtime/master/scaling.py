"""Elastic size: how many workers a running training job wants, and requests to change it.

A job starts with `--num_workers` workers: its *target*. It keeps going while at least
`--min_workers` of them are alive, and it can be resized while it runs (`elasticdl scale`),
through either channel:

* gRPC: `Master.scale_workers` on the master's address (the local engine; anything that can
  reach the master);
* Kubernetes: the annotation `elasticdl.org/num-workers` on the job's ConfigMap, which the
  master polls (`elasticdl scale JOB --workers N`, or `kubectl annotate`).

Both hand a `ScaleRequest` to the job's `ScaleInbox`; the job loop takes the requests between
two passes, checks them (`check_target`), moves the target and answers. Growing launches new
workers (never counted against the relaunch budget: they replace nobody); shrinking retires the
newest workers with SIGTERM (they finish their minibatch; their unfinished records go back to
the queue without counting as a failure). The pure part (`check_target`, `plan_scale`) does no
I/O and is tested directly.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

MAX_WORKERS = 1000
"""A sanity bound on one job's workers: a request above it is a typo more often than a plan."""


class ScaleError(ValueError):
    """A resize that cannot be applied; the message says why and what is allowed."""


class ScaleRefused(Exception):
    """The master answered a resize request with no (the message is its reason)."""


def check_target(
    workers: int,
    min_workers: int,
    max_workers: int = MAX_WORKERS,
    max_reason: str = "the limit for one job",
) -> None:
    """Raise ScaleError unless `workers` is a target the job can take: from `min_workers` to
    `max_workers`, the bound the master computed before it started (bounds.py: the tasks of
    an epoch, the memory of this machine), `max_reason` saying why."""
    allowed = f"ask for {min_workers} to {max_workers}"
    if workers < min_workers:
        raise ScaleError(f"below the job's --min_workers={min_workers} ({allowed})")
    if workers > max_workers:
        raise ScaleError(f"above {max_reason} ({allowed})")


@dataclass(frozen=True)
class ScalePlan:
    """What to do to reach a target: launch `launch` new workers, retire `retire` (ids)."""

    launch: int = 0
    retire: tuple[int, ...] = ()


def plan_scale(target: int, active: Sequence[int]) -> ScalePlan:
    """The steps from the `active` workers (alive, not retiring) to `target` of them.

    Shrinking retires the newest first: they were started last, hold the least progress, and
    on a cluster the newest are the likeliest to be still pending.
    """
    if len(active) < target:
        return ScalePlan(launch=target - len(active))
    surplus = len(active) - target
    return ScalePlan(retire=tuple(sorted(active, reverse=True)[:surplus]))


@dataclass
class ScaleRequest:
    """One request, answered by the job: `error` is "" when it was applied."""

    workers: int
    source: str
    message: str = ""
    error: str = ""
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    def answer(self, message: str = "", error: str = "") -> None:
        self.message, self.error = message, error
        self._done.set()

    def wait(self, timeout: float) -> bool:
        """True once the job has answered."""
        return self._done.wait(timeout)


class ScaleInbox:
    """Thread-safe hand-over of scale requests from their channels to the job loop.

    A job that cannot be resized (closed inbox, or a job that has ended) answers at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[ScaleRequest] = []
        self._closed_because = ""

    def submit(self, workers: int, source: str) -> ScaleRequest:
        request = ScaleRequest(workers, source)
        with self._lock:
            if not self._closed_because:
                self._pending.append(request)
                return request
            reason = self._closed_because
        request.answer(error=reason)
        return request

    def take(self) -> list[ScaleRequest]:
        with self._lock:
            taken, self._pending = self._pending, []
        return taken

    def close(self, reason: str) -> None:
        """Refuse every request from now on, and the ones not taken yet, with `reason`."""
        with self._lock:
            self._closed_because = reason
            left, self._pending = self._pending, []
        for request in left:
            request.answer(error=reason)
