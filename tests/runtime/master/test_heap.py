"""The master's heap (runtime/master/heap.py): what it held is left out of collections while
the job runs, and collectable again at its end."""

from __future__ import annotations

import gc


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_held_objects_are_frozen_at_the_start_and_every_period_then_unfrozen() -> None:
    from elasticdl.runtime.master.heap import QuietHeap

    clock = Clock()
    heap = QuietHeap(every_s=30.0, clock=clock)
    heap.tick()  # not started: nothing
    assert gc.get_freeze_count() == 0
    heap.start()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        held = [[i] for i in range(1000)]  # the job's new long-lived containers
        clock.now = 29.0
        heap.tick()
        assert gc.get_freeze_count() == frozen  # not yet
        clock.now = 30.0
        heap.tick()
        assert gc.get_freeze_count() >= frozen + len(held)
    finally:
        heap.stop()
    assert gc.get_freeze_count() == 0
    heap.stop()  # twice is fine
