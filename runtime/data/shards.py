"""Task planning: cut record files into `(file, start, end)` shards of a fixed size.

Pure logic: it takes file names and record counts (read from RecordIO indexes by the caller)
and never touches storage, so the master can plan, re-plan per epoch and be tested directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Shard:
    """Records `[start, end)` of `file`."""

    file: str
    start: int
    end: int

    @property
    def num_records(self) -> int:
        return self.end - self.start


def plan_shards(files: Iterable[tuple[str, int]], records_per_task: int) -> list[Shard]:
    """Split each `(file, num_records)` into shards of at most `records_per_task` records.

    Shards never cross files; the last shard of a file may be shorter. Empty files yield no
    shard. The order follows `files`, then record order, so plans are reproducible.
    """
    if records_per_task <= 0:
        raise ValueError(
            f"records_per_task must be a positive integer, got {records_per_task}; "
            "pass e.g. --records_per_task 1024"
        )
    shards: list[Shard] = []
    for name, count in files:
        if count < 0:
            raise ValueError(f"{name}: negative record count {count}")
        for start in range(0, count, records_per_task):
            shards.append(Shard(name, start, min(start + records_per_task, count)))
    return shards


TASKS_PER_WORKER = 2
"""Tasks an epoch should have per worker: one to train and one to hold ahead (a worker holds
its next task while it trains, task_manager.py), so that no worker waits for work while tasks
are left."""


def task_size(
    files: Iterable[tuple[str, int]], records_per_task: int, num_workers: int, minibatch_size: int
) -> int:
    """The records per task to plan with: `records_per_task`, unless an epoch would then have
    fewer than TASKS_PER_WORKER tasks per worker; then smaller, so that it has that many,
    a whole number of minibatches but at least one (a task of less than a minibatch would make
    the workers call the master more than they train). Data of fewer minibatches than that
    gives each worker what there is."""
    counts = [count for _, count in files]
    size = max(1, minibatch_size)
    wanted = TASKS_PER_WORKER * max(1, num_workers)

    def tasks(per_task: int) -> int:
        return sum(-(-count // per_task) for count in counts if count > 0)

    if records_per_task <= size or not any(counts) or tasks(records_per_task) >= wanted:
        return records_per_task
    low, high = 1, records_per_task // size  # in minibatches: tasks(low * size) is the most
    while low < high:  # the largest size that still gives `wanted` tasks
        middle = (low + high + 1) // 2
        if tasks(middle * size) >= wanted:
            low = middle
        else:
            high = middle - 1
    return low * size
