"""Per-column statistics gathered while a table streams by, in constant memory.

Numeric columns keep count, mean and variance (merged batch by batch with Chan et al.'s
parallel update, exact up to floating point), min and max. Text columns keep a HyperLogLog
sketch of their values (2^12 registers: about 1.6% standard error) for a distinct-count
estimate, plus value-length extremes. These go to `schema.json`, where the built-in table
models read them to normalize numbers and size hash buckets.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_HLL_BITS = 12
_HLL_REGISTERS = 1 << _HLL_BITS


@dataclass
class NumericStats:
    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    min: float = math.inf
    max: float = -math.inf

    def update(self, values: np.ndarray) -> None:
        if values.size == 0:
            return
        values = values.astype(np.float64, copy=False)
        n = int(values.size)
        mean = float(values.mean())
        m2 = float(((values - mean) ** 2).sum())
        total = self.count + n
        delta = mean - self.mean
        self.m2 += m2 + delta * delta * self.count * n / total
        self.mean += delta * n / total
        self.count = total
        self.min = min(self.min, float(values.min()))
        self.max = max(self.max, float(values.max()))

    def to_dict(self) -> dict[str, Any]:
        if not self.count:
            return {"count": 0}
        return {
            "count": self.count,
            "mean": self.mean,
            "std": math.sqrt(self.m2 / self.count),
            "min": self.min,
            "max": self.max,
        }


def _hash64(value: str | bytes) -> int:
    """A 64-bit hash that is the same in every process: the same table gives the same
    `schema.json` (Python's own `hash` of text is salted per process, so an estimate near a
    model's threshold, such as `ps_embedding_min_distinct`, would change from run to run)."""
    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


@dataclass
class TextStats:
    count: int = 0
    min_length: int = 0
    max_length: int = 0
    registers: np.ndarray = field(default_factory=lambda: np.zeros(_HLL_REGISTERS, np.uint8))

    def update(self, values: list[Any]) -> None:
        if not values:
            return
        lengths = [len(v) for v in values]
        self.min_length = min(lengths) if not self.count else min(self.min_length, min(lengths))
        self.max_length = max(self.max_length, max(lengths))
        self.count += len(values)
        hashes = np.fromiter((_hash64(v) for v in values), np.uint64, len(values))
        index = (hashes >> np.uint64(64 - _HLL_BITS)).astype(np.intp)
        rest = (hashes << np.uint64(_HLL_BITS)) | np.uint64(1 << (_HLL_BITS - 1))
        # rank = leading zeros of `rest` + 1; `rest` is never 0 thanks to the sentinel bit.
        bit_length = np.floor(np.log2(rest.astype(np.float64))).astype(np.int64) + 1
        rank = (64 - bit_length + 1).astype(np.uint8)
        np.maximum.at(self.registers, index, rank)

    def distinct_estimate(self) -> int:
        m = _HLL_REGISTERS
        alpha = 0.7213 / (1 + 1.079 / m)
        estimate = alpha * m * m / float(np.sum(np.exp2(-self.registers.astype(np.float64))))
        zeros = int(np.count_nonzero(self.registers == 0))
        if estimate <= 2.5 * m and zeros:
            estimate = m * math.log(m / zeros)
        return min(int(round(estimate)), self.count)

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "distinct_estimate": self.distinct_estimate() if self.count else 0,
            "min_length": self.min_length,
            "max_length": self.max_length,
        }
