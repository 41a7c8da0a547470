"""Whether a training job's loss says the model learned what it could: a pure rule, tested as a
table.

A job can end "succeeded" with a model that learned nothing (a loss that never fell: a learning
rate far off, features that carry nothing) or one stopped while it was still learning fast (the
seed's one-epoch TRAIN predicted salaries 20-40 % low). Neither is a failure, and neither may
pass in silence: the report (`learning`) and the summary line say so, with the flag or SQL WITH
key that would help. The rule, on the workers' finite loss reports ordered by model version,
each with the epoch it was computed in:

* **not learning**: the mean of the last tenth of the reports is no lower than `NOT_FALLING`
  (95 %) of the mean of the first tenth. Not judged for a job resumed from a checkpoint (a
  trained model's loss has nothing left to lose).
* **still learning**: in the last epoch, the mean loss of its last quarter of reports is below
  `STEEP` (90 %) of the mean of the quarter before it: the loss still fell by more than a tenth
  in a quarter of an epoch. With fewer than `MIN_POINTS` reports in the last epoch, its mean is
  compared with the epoch before it (below `STEEP_EPOCH`, 80 %, of it).

At least `MIN_POINTS` reports are needed to judge anything; a job whose loss diverged
(divergence.py) gets that verdict instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

NOT_FALLING = 0.95
STEEP = 0.9
STEEP_EPOCH = 0.8
MIN_POINTS = 8

MORE_EPOCHS = "train longer: more epochs (--num_epochs; WITH train.epoch=N in SQL)"
OTHER_RATE = (
    "try another learning rate (learning_rate in --params; WITH learning_rate=... in SQL) "
    "and check that the features carry information about the label"
)


@dataclass(frozen=True)
class Learning:
    verdict: str
    """"not_learning" or "still_learning"."""
    reason: str
    hint: str


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def learning(points: Sequence[tuple[int, float]], resumed: bool = False) -> Learning | None:
    """The verdict on `points` ((epoch, loss) per loss report, oldest model first; epoch -1:
    not known), or None when the loss fell and had levelled off (or too little to judge)."""
    losses = [loss for _, loss in points if math.isfinite(loss)]
    if len(losses) < MIN_POINTS:
        return None
    tenth = max(1, len(losses) // 10)
    first, final = _mean(losses[:tenth]), _mean(losses[-tenth:])
    if not resumed and first > 0 and final >= NOT_FALLING * first:
        return Learning(
            "not_learning",
            f"the loss did not fall: {first:.4g} over the first {tenth} report(s), {final:.4g} "
            f"over the last {tenth}",
            OTHER_RATE,
        )
    epochs = sorted({e for e, loss in points if e >= 0 and math.isfinite(loss)})
    if not epochs:
        return None
    last = [loss for e, loss in points if e == epochs[-1] and math.isfinite(loss)]
    if len(last) >= MIN_POINTS:
        quarter = len(last) // 4
        before, end = _mean(last[-2 * quarter : -quarter]), _mean(last[-quarter:])
        if before > 0 and end < STEEP * before:
            return Learning(
                "still_learning",
                f"the loss was still falling fast when training ended: {before:.4g} to "
                f"{end:.4g} over the last quarter of the last epoch",
                MORE_EPOCHS,
            )
        return None
    if len(epochs) < 2:
        return None
    previous = [loss for e, loss in points if e == epochs[-2] and math.isfinite(loss)]
    before, end = _mean(previous), _mean(last)
    if before > 0 and end < STEEP_EPOCH * before:
        return Learning(
            "still_learning",
            f"the loss was still falling fast when training ended: {before:.4g} in the "
            f"epoch before the last, {end:.4g} in the last",
            MORE_EPOCHS,
        )
    return None
