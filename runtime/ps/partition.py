"""Which parameter server holds a variable: a stable hash of its name, never Python's hash()."""

from __future__ import annotations

import zlib
from collections.abc import Iterable


def ps_of(name: str, num_ps: int) -> int:
    """Index of the PS shard holding variable `name` (stable across processes and runs)."""
    if num_ps <= 0:
        raise ValueError(f"num_ps must be >= 1, got {num_ps}")
    return zlib.crc32(name.encode("utf-8")) % num_ps


def partition(names: Iterable[str], num_ps: int) -> list[list[str]]:
    """Names grouped by PS shard, in input order within each shard."""
    shards: list[list[str]] = [[] for _ in range(num_ps)]
    for name in names:
        shards[ps_of(name, num_ps)].append(name)
    return shards
