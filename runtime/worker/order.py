"""The order in which a worker visits the records of a task (shared with the master's tests)."""

from __future__ import annotations

import numpy as np


def visiting_order(num_records: int, shuffle_seed: int) -> np.ndarray:
    """Indexes 0..num_records-1 in visiting order: a seeded permutation, or file order for 0."""
    if shuffle_seed == 0:
        return np.arange(num_records)
    return np.random.default_rng(shuffle_seed).permutation(num_records)
