"""How fast the Kubernetes instance manager calls the API server.

A job of 1,000 workers creates 1,000 pods at its start (and a preemption wave deletes and
replaces a hundred at once); an API server answers a client that floods it with 429 (Too Many
Requests, API Priority and Fairness) or fails (5xx). So, as client-go does:

* `TokenBucket`: every pod creation and deletion takes a token; tokens come at `qps` a second
  and at most `burst` are saved (client-go's `flowcontrol.NewTokenBucketRateLimiter`). The
  defaults are kube-controller-manager's own (`--kube-api-qps 20`, `--kube-api-burst 30`): the
  rate the controllers that create pods for Jobs and ReplicaSets use. client-go's bare defaults
  (5 a second, burst 10) would take 200 s to create 1,000 pods.
* `Pushback`: after a 429 or a 5xx (or no answer at all) every creation waits, not only the
  one refused: as long as the answer's `Retry-After` says, else exponentially longer (1, 2,
  4 ... 30 s, with jitter) while refusals go on; an accepted call resets it. The refused pod
  is retried after its own backoff as well (pod_states.CreationBackoff).

Both are pure (the clock passed in); `ApiPace` puts them behind a lock for the manager's
threads and does the waiting.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from elasticdl.runtime.k8s.pod_states import CreationBackoff

log = logging.getLogger("elasticdl.k8s")

API_QPS = 20.0
API_BURST = 30
PUSHBACK_STATUSES = frozenset({0, 429, 500, 502, 503, 504})
"""HTTP statuses that make every creation wait (0: no answer: connection refused, timeout)."""


@dataclass
class TokenBucket:
    """`qps` tokens a second, at most `burst` saved; the bucket starts full."""

    qps: float = API_QPS
    burst: int = API_BURST
    _tokens: float = field(default=0.0, init=False)
    _last: float | None = field(default=None, init=False)

    def reserve(self, now: float) -> float:
        """Take a token; the seconds to wait before the call it pays for (0: at once)."""
        if self._last is None:
            self._tokens = float(self.burst)
        else:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps


def _no_give_up() -> CreationBackoff:
    return CreationBackoff(initial_s=1.0, factor=2.0, max_s=30.0, give_up_after_s=None)


@dataclass
class Pushback:
    """When the next call may go, after the API server pushed back (see the module)."""

    backoff: CreationBackoff = field(default_factory=_no_give_up)
    until: float = 0.0

    def refused(self, now: float, status: int, retry_after_s: float | None = None) -> float:
        """A call was answered with `status`; the seconds every call now waits (0: the
        status is not the server's pushback)."""
        if status not in PUSHBACK_STATUSES:
            return 0.0
        delay = retry_after_s if retry_after_s is not None else self.backoff.next_delay()
        delay = max(0.0, delay or 0.0)
        self.until = max(self.until, now + delay)
        return delay

    def accepted(self) -> None:
        self.backoff.reset()

    def wait(self, now: float) -> float:
        return max(0.0, self.until - now)


def retry_after(headers: object) -> float | None:
    """The `Retry-After` seconds of an answer's headers (None: absent or not a number)."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    value = get("Retry-After") or get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


class ApiPace:
    """The manager's pace (thread-safe): `before_create()` / `before_delete()` wait their
    turn; `accepted()` and `refused(...)` say how a creation went."""

    def __init__(
        self,
        qps: float = API_QPS,
        burst: int = API_BURST,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._bucket = TokenBucket(qps, burst)
        self._pushback = Pushback()
        self._lock = threading.Lock()
        self._clock = clock
        self._sleep = sleep

    def before_create(self) -> None:
        """Wait while the API server pushes back, then for a token."""
        while True:
            with self._lock:
                wait = self._pushback.wait(self._clock())
            if wait <= 0:
                break
            self._sleep(wait)
        self.before_delete()

    def before_delete(self) -> None:
        """Wait for a token."""
        with self._lock:
            wait = self._bucket.reserve(self._clock())
        if wait > 0:
            self._sleep(wait)

    def accepted(self) -> None:
        with self._lock:
            self._pushback.accepted()

    def refused(self, status: int, headers: object, message: str = "") -> float:
        """A creation was refused with `status` (`headers`: the answer's): the seconds every
        creation now waits (0: not the server pushing back; else logged)."""
        with self._lock:
            held = self._pushback.refused(self._clock(), status, retry_after(headers))
        if held:
            log.warning(
                "the API server pushed back (HTTP %s: %s): no pod is created for %.1f s",
                status,
                message,
                held,
            )
        return held
