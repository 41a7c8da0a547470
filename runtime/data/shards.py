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
