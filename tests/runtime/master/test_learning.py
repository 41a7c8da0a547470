"""The rule that says a model was not learning, or still learning when training ended
(learning.py), as a table; and where it shows: the report and the summary line."""

from __future__ import annotations

import math

import pytest

from elasticdl.runtime.master.events import EventLog, LossReported
from elasticdl.runtime.master.learning import learning
from elasticdl.runtime.master.report import learning_section, summary_line


def epochs(*curves: list[float]) -> list[tuple[int, float]]:
    return [(e, loss) for e, curve in enumerate(curves) for loss in curve]


def falling_to(end: float, n: int = 32, start: float = 2.0) -> list[float]:
    """A loss that falls from `start` and levels off at `end` (noise-free)."""
    return [end + (start - end) * math.exp(-i / 3) for i in range(n)]


STEEP = [2.0 - 1.5 * i / 32 for i in range(32)]  # still falling linearly at the end
FLAT = [1.02, 1.01, 1.03, 1.02] * 8

CASES = [
    (epochs(falling_to(0.1)), False, None, ""),  # learned, levelled off
    (epochs(STEEP), False, "still_learning", "over the last quarter of the last epoch"),
    (epochs(falling_to(0.3), STEEP[16:]), False, "still_learning", "last quarter"),
    (epochs(FLAT), False, "not_learning", "did not fall: 1.02 over the first 3 report(s)"),
    (epochs(FLAT), True, None, ""),  # resumed from a trained checkpoint: nothing to lose
    (epochs([3, 2.5, 2, 1.8], [1.4, 1.3, 1.2, 1.1]), False, "still_learning", "in the last"),
    (epochs([1.7, 1.6, 1.5, 1.5], [1.5, 1.6, 1.5, 1.5]), False, None, ""),  # few, levelled
    (epochs([2.0, 1.0, 0.5]), False, None, ""),  # too few reports to judge
    ([(-1, x) for x in STEEP], False, None, ""),  # no epochs known: only "not learning"
    ([(-1, x) for x in FLAT], False, "not_learning", "did not fall"),
    (epochs([math.nan] * 4 + falling_to(0.1)), False, None, ""),  # non-finite ignored
]


@pytest.mark.parametrize(("points", "resumed", "verdict", "words"), CASES)
def test_when_a_model_was_not_or_still_learning(points, resumed, verdict, words):
    found = learning(points, resumed)
    assert (found.verdict if found else None) == verdict, found
    if found is not None:
        assert words in found.reason
        flag = "--num_epochs" if verdict == "still_learning" else "learning_rate"
        assert flag in found.hint and "WITH" in found.hint


def test_the_report_and_the_summary_line_say_it():
    log = EventLog()
    for version, loss in enumerate(STEEP):
        log.add(LossReported(float(version), version, loss, 0))
    section = learning_section(log, resumed=False, diverged=False)
    assert section is not None and section["verdict"] == "still_learning"
    assert learning_section(log, resumed=False, diverged=True) is None
    line = summary_line({"job_name": "j", "status": "succeeded", "learning": section})
    assert ", STILL LEARNING: the loss was still falling fast" in line
    assert "(train longer: more epochs (--num_epochs; WITH train.epoch=N in SQL))" in line
