"""Whether a training job's loss diverged (issue 13 §5): a pure rule, tested as a table.

A job whose loss diverged may still end "succeeded" (every record was trained); its report
says so (`diverged`, a `loss_diverged` event) and so does its summary line. The rule, on the
workers' loss reports ordered by the model version they were computed on:

* the loss was NaN or infinite on some minibatches (their records are skipped, counted in
  `records.skipped_nonfinite_loss`): diverged;
* the mean of the last tenth of the reports is more than `FACTOR` (2) times the mean of the
  first tenth (and more than `MIN_RISE` above it): diverged. At least `MIN_POINTS` reports and a
  positive first mean are needed to judge; a tenth is at least one report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

FACTOR = 2.0
MIN_RISE = 1e-6
MIN_POINTS = 4


@dataclass(frozen=True)
class Divergence:
    reason: str
    first_loss: float | None
    final_loss: float | None


def _head_mean(points: Sequence[tuple[float, int]], reports: int) -> float:
    """The mean of the first `reports` reports of `points` ((loss, reports it stands for))."""
    total, left = 0.0, reports
    for loss, count in points:
        taken = min(count, left)
        total += loss * taken
        left -= taken
        if left == 0:
            break
    return total / (reports - left)


def divergence(
    losses: Sequence[float],
    nonfinite_records: int = 0,
    factor: float = FACTOR,
    counts: Sequence[int] | None = None,
) -> Divergence | None:
    """Why the loss diverged, or None. `losses`: finite loss reports, oldest model first;
    `nonfinite_records`: records whose minibatch had a NaN or infinite loss; `counts`: the
    reports each loss stands for (a long job's log merges old points: loss_history.py),
    default one each."""
    weights = counts if counts is not None else [1] * len(losses)
    finite = [(x, c) for x, c in zip(losses, weights, strict=True) if math.isfinite(x) and c > 0]
    reports = sum(c for _, c in finite)
    tenth = max(1, reports // 10)
    first = _head_mean(finite, tenth) if finite else None
    final = _head_mean(finite[::-1], tenth) if finite else None
    if nonfinite_records > 0:
        return Divergence(
            f"the loss was NaN or infinite on {nonfinite_records} record(s) "
            "(their minibatches were skipped)",
            first,
            final,
        )
    if reports < MIN_POINTS or first is None or final is None or first <= 0:
        return None  # too few reports, or a loss that is not positive: no ratio to judge
    if final > factor * first and final - first > MIN_RISE:
        return Divergence(
            f"the mean loss of the last {tenth} report(s), {final:.4g}, is more than "
            f"{factor:g} times that of the first {tenth}, {first:.4g}",
            first,
            final,
        )
    return None
