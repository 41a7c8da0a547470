"""`serving_again`: a recovery waits for its relaunched PS in slices, and stops waiting when that
PS was relaunched again (whose own wait reports), instead of holding the job's end for the
whole PS_SERVING_TIMEOUT_S."""

from __future__ import annotations

import time

import pytest

from elasticdl.runtime.master import supervisor
from elasticdl.runtime.master.supervisor import JobPlugin, serving_again


class SlowToServe(JobPlugin):
    """`wait_serving` as the health probes do it: waits out its timeout, then TimeoutError;
    serves from `serves_at` (seconds after creation) on."""

    def __init__(self, serves_at: float = float("inf")) -> None:
        self.started = time.monotonic()
        self.serves_at = serves_at
        self.waits: list[float] = []

    def wait_serving(self, ps_id: int, address: str, timeout: float) -> float:
        self.waits.append(timeout)
        until = self.started + self.serves_at
        if until <= time.monotonic() + timeout:
            time.sleep(max(0.0, until - time.monotonic()))
            return 0.0
        time.sleep(timeout)
        raise TimeoutError(f"parameter server {address} did not answer within {timeout:g} s")


@pytest.fixture(autouse=True)
def short_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "AWAIT_SLICE_S", 0.05)


def test_a_ps_that_serves_after_some_slices() -> None:
    plugin = SlowToServe(serves_at=0.2)
    assert serving_again(plugin, 0, "127.0.0.1:1", lambda: True)
    assert len(plugin.waits) >= 3 and max(plugin.waits) <= 0.05


def test_the_wait_ends_once_the_ps_was_relaunched_again() -> None:
    plugin = SlowToServe()
    relaunched_at = time.monotonic() + 0.2
    started = time.monotonic()
    assert not serving_again(plugin, 0, "127.0.0.1:1", lambda: time.monotonic() < relaunched_at)
    assert time.monotonic() - started < 1.0  # not PS_SERVING_TIMEOUT_S (120 s)


def test_a_ps_that_never_serves_is_waited_for_until_the_timeout(monkeypatch) -> None:
    monkeypatch.setattr(supervisor, "PS_SERVING_TIMEOUT_S", 0.3)
    plugin = SlowToServe()
    started = time.monotonic()
    assert not serving_again(plugin, 0, "127.0.0.1:1", lambda: True)
    assert 0.25 <= time.monotonic() - started < 1.0
