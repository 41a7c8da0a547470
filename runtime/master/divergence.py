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


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def divergence(
    losses: Sequence[float], nonfinite_records: int = 0, factor: float = FACTOR
) -> Divergence | None:
    """Why the loss diverged, or None. `losses`: finite loss reports, oldest model first;
    `nonfinite_records`: records whose minibatch had a NaN or infinite loss."""
    finite = [x for x in losses if math.isfinite(x)]
    tenth = max(1, len(finite) // 10)
    first = _mean(finite[:tenth]) if finite else None
    final = _mean(finite[-tenth:]) if finite else None
    if nonfinite_records > 0:
        return Divergence(
            f"the loss was NaN or infinite on {nonfinite_records} record(s) "
            "(their minibatches were skipped)",
            first,
            final,
        )
    if len(finite) < MIN_POINTS or first is None or final is None or first <= 0:
        return None  # too few reports, or a loss that is not positive: no ratio to judge
    if final > factor * first and final - first > MIN_RISE:
        return Divergence(
            f"the mean loss of the last {tenth} report(s), {final:.4g}, is more than "
            f"{factor:g} times that of the first {tenth}, {first:.4g}",
            first,
            final,
        )
    return None
