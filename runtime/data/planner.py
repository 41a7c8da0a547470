"""Plan tasks for record files behind URLs: list them, count their records, cut shards.

The I/O half of task planning (`shards.plan_shards` is the pure half). Counting reads only
RecordIO chunk headers, so planning a large data set costs one small read per chunk.
"""

from __future__ import annotations

from typing import Any

from elasticdl.runtime.data.files import expand_data_urls
from elasticdl.runtime.data.recordio import read_index
from elasticdl.runtime.data.shards import Shard, plan_shards


def count_files(
    data: str | list[str], storage_options: dict[str, Any] | None = None
) -> list[tuple[str, int]]:
    """`(url, num_records)` for every RecordIO file matching `data`."""
    urls = expand_data_urls(data, storage_options)
    return [(url, read_index(url, storage_options=storage_options).num_records) for url in urls]


def plan_tasks(
    data: str | list[str], records_per_task: int, storage_options: dict[str, Any] | None = None
) -> list[Shard]:
    """Shards of at most `records_per_task` records over every file matching `data`."""
    return plan_shards(count_files(data, storage_options), records_per_task)
