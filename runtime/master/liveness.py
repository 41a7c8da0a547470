"""Slow or hung: what the master looks at before it kills a role that stopped answering.

A parameter server that answers no liveness probe, or a worker whose task makes no progress,
used to be killed once a fixed time had passed. On a loaded machine (other jobs on the same 2
cores) a starved process is late, not hung: a PS was killed as "hung" after 7 s and, with no
checkpoint, the job was lost. So a role is *hung* only when it is

* stopped (SIGSTOP, a debugger: /proc state T or t) past the base timeout, or
* making no progress although it could: sleeping (/proc state S or D) and using less than
  `MIN_CPU_SHARE` of a core since it went silent, past a deadline that grows with the
  machine's load (`deadline`: the base timeout times the 1-minute load average per core, at
  least 1).

A silent role that is runnable (state R: waiting for a CPU) or using CPU is *slow*: never
killed for it, and said once on the console and in the report (`instance_slow` event). Where
the master cannot see the process (a pod), silence past the load-scaled deadline is all it has.

Pure: `judge` takes the samples; `read_sample` and `load_factor` are the thin I/O (Linux /proc,
`os.getloadavg`), and `Samples` keeps a bounded history of each role's samples.
"""

from __future__ import annotations

import collections
import enum
import os
from collections.abc import Callable
from dataclasses import dataclass

MIN_CPU_SHARE = 0.02
"""Below this share of one core over its silence, a sleeping process makes no progress (a
deadlocked gRPC server still polls a little)."""
SAMPLE_EVERY_S = 0.5
KEPT = 512
"""Samples kept per role: at one per SAMPLE_EVERY_S, over four minutes of history."""
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Sample:
    """One look at a process: when, its /proc state letter and its CPU seconds so far."""

    at: float
    state: str
    cpu_s: float
    pid: int = 0


class Verdict(enum.StrEnum):
    ALIVE = "alive"
    """Not silent long enough to judge."""
    SLOW = "slow"
    HUNG = "hung"


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str = ""
    """For SLOW and HUNG: why, as a phrase after "parameter server 0 is slow/hung: "."""


def deadline(base_s: float, load: float) -> float:
    """The silence after which a role that is not stopped may be judged: `base_s` times the
    machine's load per core (`load_factor`), at least `base_s`."""
    return base_s * max(1.0, load)


def judge(
    silent_s: float,
    base_s: float,
    load: float,
    since: Sample | None,
    now: Sample | None,
    what: str = "answered no liveness probe",
    patience: float | None = None,
) -> Judgement:
    """Slow or hung, for a role silent for `silent_s` seconds (see the module docstring).

    `since`/`now`: samples of its process from when it went silent and now (None: the process
    cannot be seen, a pod); `what`: the silence, in words. `patience`: a slow role silent for
    more than `patience` deadlines is hung after all (a worker in an endless loop); None: a
    slow role is never hung (a parameter server)."""
    limit = deadline(base_s, load)
    silence = f"{what} for {silent_s:.1f} s"
    if now is None or since is None:
        if silent_s >= limit:
            return Judgement(Verdict.HUNG, f"{silence} (deadline {limit:.1f} s, load {load:.1f})")
        return Judgement(Verdict.ALIVE)
    if now.state in ("T", "t"):
        if silent_s >= base_s:
            return Judgement(Verdict.HUNG, f"stopped (state {now.state}): {silence}")
        return Judgement(Verdict.ALIVE)
    if now.state in ("Z", "X"):
        return Judgement(Verdict.ALIVE)  # it ended: its exit says how
    window = now.at - since.at
    if silent_s < limit or window < base_s / 2 or now.pid != since.pid:
        return Judgement(Verdict.ALIVE)  # not silent long enough, or not watched long enough
    share = max(0.0, now.cpu_s - since.cpu_s) / window
    used = f"{now.cpu_s - since.cpu_s:.2f} s of CPU in {window:.1f} s"
    if now.state == "R" or share >= MIN_CPU_SHARE:
        state = "runnable, waiting for a CPU" if now.state == "R" else "working"
        if patience is not None and silent_s >= patience * limit:
            return Judgement(Verdict.HUNG, f"{silence} although {state} ({used}): an endless loop?")
        return Judgement(
            Verdict.SLOW, f"{silence} but is {state} ({used}; machine load {load:.1f}/core)"
        )
    return Judgement(Verdict.HUNG, f"no progress: {silence} and used {used} (state {now.state})")


def read_sample(pid: int, at: float) -> Sample | None:
    """The process's state and CPU time from /proc (None: gone, or no /proc here)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode(errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after "(comm) ": the name may hold spaces
    try:
        return Sample(at, fields[0], (int(fields[11]) + int(fields[12])) / _TICKS, pid)
    except (IndexError, ValueError):
        return None


def load_factor() -> float:
    """The machine's 1-minute load average per core (0.0 where it is not known)."""
    try:
        return os.getloadavg()[0] / max(1, os.cpu_count() or 1)
    except OSError:
        return 0.0


class Samples:
    """A bounded history of samples per role, taken at most every SAMPLE_EVERY_S seconds.

    `sampler(key, now)` reads one (None: the process cannot be seen)."""

    def __init__(self, sampler: Callable[[object, float], Sample | None]) -> None:
        self._sampler = sampler
        self._seen: dict[object, collections.deque[Sample]] = {}

    def take(self, key: object, now: float) -> Sample | None:
        """A fresh sample of `key` (the newest one if it was taken less than SAMPLE_EVERY_S
        ago); None when the process cannot be seen."""
        kept = self._seen.get(key)
        if kept and now - kept[-1].at < SAMPLE_EVERY_S:
            return kept[-1]
        sample = self._sampler(key, now)
        if sample is None:
            return None
        if kept is None or sample.pid != kept[-1].pid:  # a new process (relaunched)
            kept = self._seen[key] = collections.deque(maxlen=KEPT)
        kept.append(sample)
        return sample

    def at(self, key: object, when: float) -> Sample | None:
        """The newest sample of `key` taken at or before `when` (else the oldest kept)."""
        kept = self._seen.get(key)
        if not kept:
            return None
        found = kept[0]
        for sample in kept:
            if sample.at > when:
                break
            found = sample
        return found

    def forget(self, key: object) -> None:
        self._seen.pop(key, None)
