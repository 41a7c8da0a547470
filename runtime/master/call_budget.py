"""How often workers call the master: a budget of calls a second, shared by the live workers.

A worker calls the master three times a task (the next task asked ahead, the task's first
minibatch reported, its result with the next task), with progress reports within a task, and,
told to WAIT, again after a while. At 0.1 s between reports and 0.2 s between WAITs (the
worker's defaults), 1,000 workers would send ~10,000 calls a second; a call costs the master
~0.8 ms of a core (measured with 1,000 simulated workers, bench/master_scale.py). So every task
the master hands out names how often its worker may call (`Task.progress_every_s`,
`Task.wait_s`), derived from the live workers and the budget:

    progress calls/s = max(progress_share x budget, budget - other calls/s)
    progress_every_s = live workers / progress calls/s,  within [MIN_PROGRESS_S, MAX_PROGRESS_S]
    wait_s           = live workers / (wait_share x budget), within [MIN_WAIT_S, MAX_WAIT_S]

"Other calls" (the three a task, WAITs, metrics) follow the task rate, which the interval
cannot change: they are measured (`CallMeter`) and the periodic progress reports get what is
left, at least `progress_share` of the budget. So the total stays within the budget while the
task calls leave room (with 6-s tasks, up to ~900 workers), and above that is the task calls
plus `progress_share` of the budget: longer tasks are then what keeps the master's load down
(3 calls a task: 1,000 workers on 6-s tasks make 500 calls a second). WAITs share
`wait_share` of the budget (at a job's end every worker waits). A job of up to 30 workers keeps
both of the worker's defaults, up to 60 its 0.1 s between reports.

Coarser reports cost no accuracy: the exact trained count of a lost worker's task comes from
the parameter servers (`TaskManager.recover_worker` with what they applied), not from its last
report, and the no-progress timeout counts the interval the master named
(`ProgressTimes.saw_told`). Reports then only feed the progress display and the loss curves,
a little later.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_PROGRESS_S = 0.1
"""The worker's own default (runtime/worker/progress.py PROGRESS_EVERY_S)."""
MAX_PROGRESS_S = 30.0
MIN_WAIT_S = 0.2
"""The worker's own default between two WAITs."""
MAX_WAIT_S = 10.0


@dataclass(frozen=True)
class CallBudget:
    calls_per_s: float = 600.0
    """Calls a second the master budgets for (~half a core at ~0.8 ms a call)."""
    progress_share: float = 0.25
    """The part of the budget progress reports get at least, whatever the other calls."""
    wait_share: float = 0.25
    """The part of the budget workers told to WAIT may use asking again: at the end of a job
    every worker waits (1,000 asking every 1.7 s took the master's whole budget at once)."""


@dataclass(frozen=True)
class Pace:
    """What the master tells its workers (seconds)."""

    progress_every_s: float = MIN_PROGRESS_S
    wait_s: float = MIN_WAIT_S


def _within(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


def pace(budget: CallBudget, workers: int, other_calls_per_s: float) -> Pace:
    """The intervals for `workers` live workers when the calls that are not progress reports
    come at `other_calls_per_s` (see the module docstring)."""
    progress_calls = max(
        budget.progress_share * budget.calls_per_s, budget.calls_per_s - other_calls_per_s
    )
    workers = max(0, workers)
    return Pace(
        progress_every_s=round(
            _within(workers / progress_calls, MIN_PROGRESS_S, MAX_PROGRESS_S), 3
        ),
        wait_s=round(
            _within(workers / (budget.wait_share * budget.calls_per_s), MIN_WAIT_S, MAX_WAIT_S), 3
        ),
    )


class CallMeter:
    """Counts the master's calls that are not periodic progress reports (a task's first report
    is one a task, whatever the pace) and gives their rate, smoothed
    over the last windows (an exponential mean: one busy second does not swing the pace).
    Not thread-safe: the servicer counts under its lock."""

    def __init__(self, window_s: float = 1.0, smoothing: float = 0.5) -> None:
        self.window_s = window_s
        self._smoothing = smoothing
        self._count = 0
        self._since: float | None = None
        self._windows = 0
        self.rate = 0.0
        """Other calls a second, smoothed."""

    def count(self) -> None:
        self._count += 1

    def rate_at(self, now: float) -> float | None:
        """The smoothed rate once a window has passed since the last one (None before)."""
        if self._since is None:
            self._since, self._count = now, 0
            return None
        elapsed = now - self._since
        if elapsed < self.window_s:
            return None
        observed = self._count / elapsed
        if self._windows:
            self.rate += self._smoothing * (observed - self.rate)
        else:
            self.rate = observed
        self._windows += 1
        self._since, self._count = now, 0
        return self.rate
