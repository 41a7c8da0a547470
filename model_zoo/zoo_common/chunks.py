"""Records parsed a chunk at a time, then handed on one by one.

A zoo `dataset_fn` gets single records and hands back single records (the worker batches them
to its minibatch size), and the natural way to write that, a `map` of `parse_single_example`,
is what a minibatch mostly cost: for `regressor.DNN` (8 numeric columns, minibatch 256) the
input pipeline alone used 9.5 ms of CPU a minibatch, more than the worker's step, against
1.3 ms with one `parse_example` per chunk of 512 records; the MNIST records (784 floats,
minibatch 64) 2.9 -> 1.0 ms (a task's pipeline through the worker's `TaskPipelines`, one
intra-op thread, bench/RESULTS.md). `unbatch` keeps the records' order, which the worker's
progress counting relies on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

PARSE_CHUNK = 512
"""Records per parse: CTR records cost 78-81 ms of CPU per 4,096 in chunks of 128, 67-71 ms in
chunks of 512, no better at 1,024."""


def parse_in_chunks(
    dataset: tf.data.Dataset, parse: Callable[[tf.Tensor], Any], chunk: int = PARSE_CHUNK
) -> tf.data.Dataset:
    """`parse` (records [n] -> structures of [n, ...] tensors) over `chunk` records at a time,
    unbatched again: the same elements, in the same order, as a per-record parser's."""
    parsed = dataset.batch(chunk).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return parsed.unbatch()
