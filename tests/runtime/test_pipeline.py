"""The worker's task pipelines (runtime/worker/pipeline.py): every task's minibatches hold
exactly that task's records, in its order, although the iterator of a task from the third on
was made (on a background thread) while the task before it was still being read."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tensorflow as tf

from elasticdl.mode import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.worker.pipeline import TaskPipelines


def parallel_parse(dataset, mode, metadata):
    """Parallel maps and a prefetch of its own: tf.data stages that run ahead by themselves."""
    numbers = dataset.map(
        lambda r: tf.strings.to_number(r, tf.int64), num_parallel_calls=tf.data.AUTOTUNE
    )
    pairs = numbers.map(lambda n: ({"x": n}, n * 10), num_parallel_calls=4)
    return pairs.prefetch(tf.data.AUTOTUNE)


METADATA = DatasetMetadata(columns={"x": "int64"}, label="y")


def task_records(task: int, size: int) -> list[bytes]:
    return [str(task * 1000 + i).encode() for i in range(size)]


@pytest.mark.parametrize("pause_s", [0.0, 0.2])
def test_each_task_reads_its_own_records_in_order(pause_s):
    """`pause_s`: time for an iterator made ahead to start reading early, if it ever did."""
    pipelines = TaskPipelines(parallel_parse, minibatch_size=8)
    for task in range(6):
        size = 8 * (task % 3) + 5  # a short last minibatch, and tasks of different sizes
        records = task_records(task, size)
        batches = pipelines.batches(records, METADATA, Mode.TRAINING)
        time.sleep(pause_s)
        seen = [int(x) for features, _ in batches for x in features["x"].numpy().reshape(-1)]
        assert seen == [int(r) for r in records], f"task {task}"


def test_modes_keep_their_own_pipelines_and_iterators():
    pipelines = TaskPipelines(parallel_parse, minibatch_size=4)
    for task in range(4):
        for mode in (Mode.TRAINING, Mode.EVALUATION):
            records = task_records(task * 2 + (mode is Mode.EVALUATION), 6)
            labels = np.concatenate(
                [y.numpy() for _, y in pipelines.batches(records, METADATA, mode)]
            )
            assert labels.tolist() == [int(r) * 10 for r in records]


def test_a_task_left_half_read_does_not_leak_into_the_next():
    """A worker stopped by SIGTERM leaves its iterator mid-task; the next task starts clean."""
    pipelines = TaskPipelines(parallel_parse, minibatch_size=4)
    for task in range(4):
        records = task_records(task, 12)
        batches = pipelines.batches(records, METADATA, Mode.TRAINING)
        first, _ = next(batches)
        assert first["x"].numpy().reshape(-1).tolist() == [int(r) for r in records[:4]]
