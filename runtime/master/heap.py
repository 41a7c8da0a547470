"""The master's heap and Python's cycle collector: full collections short at any size.

A full collection walks every container object the process tracks, holding the GIL: in a
master serving 1,000 workers (its modules, the task plan, the event log) one took 100-140 ms,
and every gRPC call in flight waited for it (bench/master_scale.py). So, while a job runs, what
the master has held for a while is frozen (`gc.freeze`: left out of collections; freed as
usual when its last reference goes, only a reference cycle among frozen objects waits): at
the start, after one collection, and then every `every_s` seconds; a collection then walks
only what came since. At the end everything is unfrozen and collectable again.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FREEZE_EVERY_S = 30.0


class QuietHeap:
    """`start()` once the master serves, `tick()` each pass of the job loop, `stop()` at the
    end (safe to call more than once)."""

    def __init__(
        self, every_s: float = FREEZE_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._every_s = every_s
        self._clock = clock
        self._frozen_at: float | None = None

    def start(self) -> None:
        gc.collect()
        gc.freeze()
        self._frozen_at = self._clock()

    def tick(self) -> None:
        if self._frozen_at is not None and self._clock() - self._frozen_at >= self._every_s:
            gc.freeze()
            self._frozen_at = self._clock()

    def stop(self) -> None:
        if self._frozen_at is not None:
            gc.unfreeze()
            self._frozen_at = None
