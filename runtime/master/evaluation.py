"""Evaluation rounds: which tasks make up the evaluation of a model version, and their merge.

Pure bookkeeping. A round is the set of evaluation tasks (by lineage, so a retried task
counts once) started for one model version; workers report each task's additive metric state
when the task ends; a round is complete when every lineage has reported. A retried task that
reports twice (its worker died after reporting) overwrites its first state: nothing is
counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from elasticdl.runtime.metrics import merge


@dataclass
class Round:
    version: int
    started_at: float
    lineages: set[int]
    states: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return set(self.states) >= self.lineages


class EvaluationRounds:
    def __init__(self) -> None:
        self._rounds: list[Round] = []
        self._by_lineage: dict[int, Round] = {}

    def start(self, version: int, lineages: list[int], now: float) -> Round:
        round_ = Round(version, now, set(lineages))
        self._rounds.append(round_)
        for lineage in lineages:
            self._by_lineage[lineage] = round_
        return round_

    def report(self, lineage: int, state: dict[str, np.ndarray]) -> None:
        round_ = self._by_lineage.get(lineage)
        if round_ is not None:
            round_.states[lineage] = state

    def pop_complete(self) -> list[tuple[Round, dict[str, np.ndarray]]]:
        """Completed rounds with their merged state, in the order they were started.

        A round that completes before an older one waits for it, so the evaluation history
        is always in model-version order.
        """
        done: list[Round] = []
        while self._rounds and self._rounds[0].complete:
            done.append(self._rounds.pop(0))
        return [(r, merge(r.states.values())) for r in done]

    @property
    def pending(self) -> int:
        return len(self._rounds)
