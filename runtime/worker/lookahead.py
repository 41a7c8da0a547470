"""Minibatches of a sparse model prepared one ahead: while minibatch n trains, minibatch
n+1's rows are on their way from the parameter servers.

Why: profiled (DeepFM, 26 tables of 200k rows, batch 512, 1 worker + 1 PS), a minibatch
spent 9 ms waiting for its rows, in series with a 13 ms step. Prepared ahead, the pull waits
on the PS while the step computes.

Contract: `batches()` yields the pipeline's minibatches unchanged, in order. Before it yields
minibatch n, when `ahead()` says so, it calls `prepare(features of n+1)` in the caller's
thread (the ids pass: TensorFlow work stays on one thread, since with one inter-op thread two
threads' functions stalled each other, halving the rate) and runs what that returns (the
rows pull: gRPC and numpy) on the executor. The trainer asks `take(features)` for what was
prepared for exactly those features (the same object), or gets None and prepares them
itself. A preparation that failed (a PS down) is None too: the caller's own attempt raises
what it must.

The trainer looks ahead only in async mode while this worker pushes alone (`overlap.py`): the
rows of n+1 are pulled before the gradients of n (and maybe n-1) are applied, so they may miss
this worker's last two minibatches, the bounded staleness of an async PS. Sync mode never
looks ahead: a sync job with one worker still trains exactly like one process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any


class Lookahead:
    """One minibatch prepared ahead (see the module docstring)."""

    def __init__(self, prepare: Callable[[Any], Callable[[], Any]], executor: Executor) -> None:
        self._prepare = prepare
        self._executor = executor
        self._ready: tuple[Any, Future[Any]] | None = None

    def batches(self, batches: Iterator[Any], ahead: Callable[[], bool]) -> Iterator[Any]:
        """The minibatches of `batches`, each next one prepared while the caller trains the
        current one, whenever `ahead()`."""
        current, prepared = next(batches, None), None
        while current is not None:
            following = next(batches, None)
            started = None
            if following is not None and ahead():
                started = self._executor.submit(self._prepare(following[0]))
            self._ready = None if prepared is None else (current[0], prepared)
            yield current
            current, prepared = following, started

    def take(self, features: Any) -> Any:
        """What was prepared for `features` (None: nothing, other features, or it failed)."""
        ready, self._ready = self._ready, None
        if ready is None or ready[0] is not features:
            return None
        try:
            return ready[1].result()
        except Exception:  # the caller prepares them again, and raises what it must
            return None
