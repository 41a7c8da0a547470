"""The workers' loss reports, kept in bounded memory whatever the job's size and length.

1,000 workers report a few hundred losses a second; a long job would keep millions. The event
log hands them here (events.EventLog) and its views read:

* `epochs`: per epoch, the sum and count of the finite losses and the model versions they
  span: exact for ever (the history's epoch means, `elasticdl status`, the progress display);
* `points()`: the reports themselves up to `max_points`; past that, neighbours (in the order
  they came, within one epoch) are merged pairwise, each kept point standing for `count`
  reports (its loss their mean, its version the later one's), so the series keeps its shape
  at half the resolution (the divergence rule weighs each point by its count);
* `since(cursor)`: the points added after a sequence number, from a ring of the latest
  `recent` (what TensorBoard's feed reads each pass; a reader a whole ring behind misses the
  oldest, counted in `late_reads`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from elasticdl.runtime.master.events import LossReported

MAX_POINTS = 4_000
RECENT = 4_096


@dataclass
class EpochLoss:
    """The finite losses reported in one epoch."""

    total: float = 0.0
    count: int = 0
    first_version: int = 0
    last_version: int = 0

    @property
    def mean(self) -> float:
        return self.total / self.count


class LossHistory:
    """Bounded: O(epochs + max_points + recent) whatever the reports (see the module)."""

    def __init__(self, max_points: int = MAX_POINTS, recent: int = RECENT) -> None:
        self.max_points = max(2, max_points)
        self.epochs: dict[int, EpochLoss] = {}
        self._points: list[LossReported] = []
        self._recent: deque[tuple[int, LossReported]] = deque(maxlen=max(1, recent))
        self.reports = 0
        """Every report added, kept as a point of its own or not."""
        self.late_reads = 0
        """Reads of `since` that missed points the ring had dropped."""
        self._evicted_seq = -1

    def add(self, seq: int, point: LossReported) -> None:
        """One report (`seq`: its place in the event log's sequence)."""
        self.reports += point.count
        if len(self._recent) == self._recent.maxlen:
            self._evicted_seq = self._recent[0][0]
        self._recent.append((seq, point))
        if point.epoch >= 0 and math.isfinite(point.loss):
            found = self.epochs.get(point.epoch)
            if found is None:
                found = self.epochs[point.epoch] = EpochLoss(
                    first_version=point.model_version, last_version=point.model_version
                )
            found.total += point.loss * point.count
            found.count += point.count
            found.first_version = min(found.first_version, point.model_version)
            found.last_version = max(found.last_version, point.model_version)
        self._points.append(point)
        if len(self._points) > self.max_points:
            self._points = _halved(self._points)

    def points(self) -> list[LossReported]:
        return list(self._points)

    def since(self, cursor: int) -> list[tuple[int, LossReported]]:
        """(seq, point) of the points added at or after `cursor` that the ring still holds
        (a reader a whole ring behind misses the oldest: counted in `late_reads`)."""
        if self._recent and self._recent[0][0] > cursor and self._evicted_seq >= cursor:
            self.late_reads += 1
        return [(seq, p) for seq, p in self._recent if seq >= cursor]


def _halved(points: list[LossReported]) -> list[LossReported]:
    """Neighbours of the same epoch merged pairwise (a point of another epoch stays)."""
    merged: list[LossReported] = []
    i = 0
    while i < len(points):
        first = points[i]
        if i + 1 < len(points) and points[i + 1].epoch == first.epoch:
            second = points[i + 1]
            count = first.count + second.count
            merged.append(
                replace(
                    second,
                    loss=(first.loss * first.count + second.loss * second.count) / count,
                    model_version=max(first.model_version, second.model_version),
                    count=count,
                )
            )
            i += 2
        else:
            merged.append(first)
            i += 1
    return merged
