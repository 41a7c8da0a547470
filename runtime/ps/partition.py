"""Which parameter server holds what: a stable hash, never Python's hash().

Dense variables go to the shard `ps_of(name)` (crc32 of the stable name). Embedding rows go to
the shard `embedding_shard(id)`: the id through `mix64` (a SplitMix64 finalizer, vectorised over
int64 arrays) with a salt of its own, so the shard choice is independent of the bits the
tables' hash index uses on each shard. Both are stable across processes, runs and machines.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import numpy as np

SHARD_SALT = 0x5EED_0F_E1A5_71C5
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


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


def mix64(values: np.ndarray, salt: int = 0) -> np.ndarray:
    """SplitMix64's finalizer of `values + salt * golden` (uint64 array, same shape): a
    bijection whose every output bit depends on every input bit."""
    with np.errstate(over="ignore"):
        z = np.asarray(values).astype(np.uint64, copy=True)
        z += np.uint64(salt & 0xFFFF_FFFF_FFFF_FFFF) * _GOLDEN + _GOLDEN
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def embedding_shard(ids: np.ndarray, num_ps: int) -> np.ndarray:
    """Index of the PS shard holding each embedding id (int64 array of the same shape)."""
    if num_ps <= 0:
        raise ValueError(f"num_ps must be >= 1, got {num_ps}")
    ids = np.asarray(ids, dtype=np.int64)
    if num_ps == 1:
        return np.zeros(ids.shape, dtype=np.int64)
    return (mix64(ids, SHARD_SALT) % np.uint64(num_ps)).astype(np.int64)
