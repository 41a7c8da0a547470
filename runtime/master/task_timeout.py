"""How long a task may go without progress before its worker is taken for hung: pure logic.

A training worker reports progress after a minibatch at most every 0.1 s
(`worker/progress.py`), or as seldom as the master asks when it serves many workers
(call_budget.py), so the time between two reports is that interval or one minibatch (a pull, a
step, a push), whichever is longer, and a hang shows as a missing report long before a whole
task's time. The limit is derived from what the job has seen, by situation:

- a training task that has reported progress: `factor` x the longest gap seen between two
  reports of any training task, or the longest interval the master asked for (`told`) if
  longer, at least `floor_s`;
- a training task handed out but not yet reported (reading its shard, building its input
  pipeline): also `factor` x the longest such lead seen;
- a worker's *first* task before its first report also builds the model and traces the input
  pipeline and the step (many seconds on a loaded machine): `factor` x the longest first lead
  seen, at least `first_floor_factor` x `floor_s`; before any first task has reported, nothing
  tells how long that takes: `first_task_timeout_s`;
- evaluation and prediction tasks report no progress: `factor` x the slowest finished task of
  the same type, at least the floor (x `first_floor_factor` for a worker's first task); before
  one finished, at least `first_task_timeout_s`.

`fixed_s` (an explicit --task_timeout) replaces all of this with one number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TRAINING = 1
"""TaskType.TRAINING (task_manager imports this module, not the other way round)."""


@dataclass
class TimeoutConfig:
    fixed_s: float | None = None
    """A fixed no-progress limit for every task; None: derived as the module says."""
    floor_s: float = 15.0
    factor: float = 5.0
    first_floor_factor: float = 2.0
    first_task_timeout_s: float = 120.0


@dataclass
class ProgressTimes:
    """The longest waits for progress seen so far (seconds; None: not seen yet)."""

    gap: float | None = None
    """Between two progress reports of a training task (or its last report and its result)."""
    lead: float | None = None
    """From handing out a training task (not a worker's first) to its first report."""
    first_lead: float | None = None
    """From handing out a worker's first training task to its first report."""
    durations: dict[int, float] = field(default_factory=dict)
    """Task type -> the longest finished task of that type that reports no progress."""
    told: float | None = None
    """The longest interval between progress reports the master asked workers for."""

    def saw_gap(self, seconds: float) -> None:
        self.gap = _longest(self.gap, seconds)

    def saw_told(self, seconds: float) -> None:
        self.told = _longest(self.told, seconds)

    def saw_lead(self, seconds: float, first: bool) -> None:
        if first:
            self.first_lead = _longest(self.first_lead, seconds)
        else:
            self.lead = _longest(self.lead, seconds)

    def saw_duration(self, task_type: int, seconds: float) -> None:
        self.durations[task_type] = _longest(self.durations.get(task_type), seconds)


def _longest(current: float | None, seconds: float) -> float:
    return seconds if current is None else max(current, seconds)


def no_progress_limit(
    config: TimeoutConfig, times: ProgressTimes, task_type: int, first: bool, reported: bool
) -> float:
    """Seconds a task may go without progress (see the module docstring).

    `first`: the worker's first task; `reported`: the task has reported progress already.
    """
    if config.fixed_s is not None:
        return config.fixed_s
    floor = config.floor_s
    first_floor = floor * config.first_floor_factor
    if task_type != TRAINING:
        slowest = times.durations.get(task_type)
        least = first_floor if first else floor
        if slowest is None:
            return max(least, config.first_task_timeout_s)
        return max(least, config.factor * slowest)
    seen = [times.gap, times.told]
    if not reported:
        seen.append(times.lead)
        if first:
            if times.first_lead is None:
                return max(first_floor, config.first_task_timeout_s)
            seen.append(times.first_lead)
            floor = first_floor
    longest = max((s for s in seen if s is not None), default=0.0)
    return max(floor, config.factor * longest)
