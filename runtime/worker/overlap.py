"""Whether an async worker overlaps its next push with its next minibatch (pure).

Overlapping hides one round trip per minibatch, but the gradient of minibatch n is then computed
on parameters that miss this worker's minibatch n-1: one more version of staleness. Alone, that
is all the staleness there is (every push 1 version behind). With other workers pushing, their
pushes land in a window twice as long as well, so staleness roughly doubles (two workers: about
3 versions instead of 1), and a short job ends far from where a serial async job does (the
seed's SQL TRAIN of regressor.DNN, 47 Adam steps on 2 workers: test mse 0.94-0.98 of the
label's variance instead of about 0.3). So a worker overlaps only while nobody else's push lands
between the computation of its gradients and their application: its last push's staleness,
less the version its own overlap adds, is 0. A worker that sees another's push goes serial
(staleness = the other workers' pushes, as before overlapping existed) and overlaps again after
`ALONE_PUSHES` serial pushes in a row that nobody else's push preceded: one such push proves
little (another worker holding its push for a minibatch looks the same), and switching back
and forth would put every other push of both workers several versions behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ALONE_PUSHES = 4


@dataclass
class OverlapRule:
    """`overlap`: whether the next minibatch overlaps; `observe` updates it from each answered
    push's staleness per shard (as the shards applied it) and whether that push was overlapped
    (computed while the one before it was in flight)."""

    overlap: bool = True
    alone: int = 0  # serial pushes in a row that nobody else's push preceded

    def observe(self, staleness: Sequence[int], overlapped: bool) -> bool:
        others = max(staleness, default=0) - (1 if overlapped else 0)
        if others > 0:
            self.overlap, self.alone = False, 0
        elif not self.overlap and not overlapped:
            self.alone += 1
            self.overlap = self.alone >= ALONE_PUSHES
        return self.overlap
