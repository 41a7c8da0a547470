"""Slow or hung (liveness.py): the rule as a table, then real processes read from /proc."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from elasticdl.runtime.master.liveness import (
    Sample,
    Samples,
    Verdict,
    deadline,
    judge,
    read_sample,
)

BASE = 6.0


def s(at: float, state: str, cpu: float, pid: int = 7) -> Sample:
    return Sample(at, state, cpu, pid)


# (silent_s, load, since, now, patience, verdict, words)
CASES = [
    (5.0, 0.5, s(0, "S", 1.0), s(5, "T", 1.0), None, Verdict.ALIVE, ""),  # not yet
    (6.5, 3.0, s(0, "S", 1.0), s(6.5, "T", 1.0), None, Verdict.HUNG, "stopped (state T)"),
    (6.5, 0.4, s(0, "S", 1.0), s(6.5, "S", 1.0), None, Verdict.HUNG, "no progress"),
    (6.5, 0.4, s(0, "S", 1.0), s(6.5, "S", 1.05), None, Verdict.HUNG, "0.05 s of CPU"),
    (6.5, 3.0, s(0, "S", 1.0), s(6.5, "S", 1.0), None, Verdict.ALIVE, ""),  # load: 18 s
    (19.0, 3.0, s(0, "S", 1.0), s(19, "S", 1.0), None, Verdict.HUNG, "no progress"),
    (19.0, 3.0, s(0, "S", 1.0), s(19, "S", 4.0), None, Verdict.SLOW, "is working"),
    (19.0, 3.0, s(0, "R", 1.0), s(19, "R", 1.0), None, Verdict.SLOW, "waiting for a CPU"),
    (600.0, 3.0, s(0, "R", 1.0), s(600, "R", 90), None, Verdict.SLOW, "load 3.0/core"),
    (600.0, 1.0, s(0, "R", 1.0), s(600, "R", 90), 4.0, Verdict.HUNG, "an endless loop?"),
    (10.0, 0.1, s(0, "D", 1.0), s(10, "D", 1.3), None, Verdict.SLOW, "is working"),
    (10.0, 0.1, s(8, "S", 1.0), s(10, "S", 1.0), None, Verdict.ALIVE, ""),  # watched 2 s only
    (10.0, 0.1, s(0, "S", 1.0, pid=1), s(10, "S", 1.0), None, Verdict.ALIVE, ""),  # relaunched
    (10.0, 0.1, s(0, "S", 1.0), s(10, "Z", 1.0), None, Verdict.ALIVE, ""),  # ended: its exit
    (5.0, 0.1, None, None, None, Verdict.ALIVE, ""),  # a pod: probes only
    (6.5, 0.1, None, None, None, Verdict.HUNG, "deadline 6.0 s"),
    (6.5, 2.0, None, None, None, Verdict.ALIVE, ""),  # a pod on a loaded node: 12 s
]


@pytest.mark.parametrize(("silent", "load", "since", "now", "patience", "verdict", "words"), CASES)
def test_slow_or_hung(silent, load, since, now, patience, verdict, words):
    found = judge(silent, BASE, load, since, now, patience=patience)
    assert found.verdict is verdict, found
    assert words in found.reason


def test_the_deadline_grows_with_the_load_and_never_shrinks():
    assert deadline(6.0, 0.3) == 6.0 and deadline(6.0, 2.5) == 15.0


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def _watch(pid: int, seconds: float) -> tuple[Sample, Sample]:
    samples = Samples(lambda key, at: read_sample(pid, at))
    first = samples.take("x", time.monotonic())
    time.sleep(seconds)
    last = samples.take("x", time.monotonic())
    assert first is not None and last is not None
    assert samples.at("x", first.at) == first
    return first, last


def test_real_processes_stopped_busy_and_asleep():
    """The base timeout is the watch here (1 s): a stopped process is hung, a busy one slow, a
    sleeping one (a deadlock, as seen from outside) hung."""
    busy, asleep = _child("while True: pass"), _child("import time; time.sleep(60)")
    try:
        time.sleep(0.3)
        first, last = _watch(busy.pid, 1.5)
        found = judge(1.6, 1.0, 0.0, first, last)
        assert found.verdict is Verdict.SLOW, (first, last)
        first, last = _watch(asleep.pid, 1.5)
        assert last.state == "S" and judge(1.6, 1.0, 0.0, first, last).verdict is Verdict.HUNG
        busy.send_signal(signal.SIGSTOP)
        time.sleep(0.2)
        first, last = _watch(busy.pid, 1.2)
        assert last.state == "T"
        assert judge(1.3, 1.0, 5.0, first, last).verdict is Verdict.HUNG, "stopped: load or not"
    finally:
        for child in (busy, asleep):
            child.kill()
            child.wait()
    assert read_sample(busy.pid, 0.0) is None, "a reaped process cannot be seen"
