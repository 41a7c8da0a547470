"""The rule that says a job's loss diverged (divergence.py), as a table."""

from __future__ import annotations

import math

import pytest

from elasticdl.runtime.master.divergence import divergence
from elasticdl.runtime.master.events import EventLog, LossReported
from elasticdl.runtime.master.report import diverged_section, summary_line

FALLING = [1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2, 0.18, 0.15]
RISING = [0.5, 0.4, 0.6, 0.9, 1.5, 2.0, 3.0, 5.0, 8.0, 10.79]


@pytest.mark.parametrize(
    ("losses", "nonfinite", "diverged", "words"),
    [
        (FALLING, 0, False, ""),
        (FALLING * 3, 0, False, ""),  # noisy but not rising: the last tenth is not 2x the first
        (RISING, 0, True, "10.79, is more than 2 times that of the first 1, 0.5"),
        ([1.0, 1.5, 1.9, 1.99], 0, False, ""),  # rose, but less than 2x
        ([1.0, 1.5, 2.5, 3.0], 0, True, "more than 2 times"),
        ([1.0, 5.0, 9.0], 0, False, ""),  # too few reports to judge
        ([0.0, 0.0, 0.0, 1e-9], 0, False, ""),  # a rise below MIN_RISE
        ([-1.0, -0.9, -0.5, -0.4], 0, False, ""),  # a negative loss: no ratio
        (FALLING, 32, True, "NaN or infinite on 32 record(s)"),
        ([], 64, True, "NaN or infinite on 64 record(s)"),
        ([], 0, False, ""),
        ([1.0, math.inf, math.nan, 0.5, 0.4, 0.3], 0, False, ""),  # non-finite reports ignored
    ],
)
def test_when_the_loss_diverged(losses, nonfinite, diverged, words):
    found = divergence(losses, nonfinite)
    assert (found is not None) == diverged
    if found is not None:
        assert words in found.reason


def test_the_report_and_the_summary_line_say_diverged_once():
    log = EventLog()
    for version, loss in enumerate(reversed(RISING)):  # reported out of order: sorted by version
        log.add(LossReported(0.0, len(RISING) - 1 - version, loss))
    first = diverged_section(log, 0)
    assert first is not None and first["first_loss"] == 0.5 and first["final_loss"] == 10.79
    assert diverged_section(log, 0) == first
    assert len([e for e in log if e.kind == "loss_diverged"]) == 1
    report = {"job_name": "j", "status": "succeeded", "diverged": first}
    assert summary_line(report).endswith(f", DIVERGED: {first['reason']}")
