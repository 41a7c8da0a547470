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


def test_a_prepared_task_is_handed_out_with_its_own_records():
    """`prepare` fills the free slot while the current task's iterator is still being read."""
    pipelines = TaskPipelines(parallel_parse, minibatch_size=4)
    assert not pipelines.prepare(task_records(0, 10), METADATA)  # nothing built yet
    current = pipelines.batches(task_records(0, 10), METADATA, Mode.TRAINING)
    for task in range(1, 6):
        records = task_records(task, 10)
        first, _ = next(current)  # the current task has begun, as in a worker
        if task != 3:  # (task 3: not prepared, made when it starts)
            following = task_records(task, 10)
            assert pipelines.prepare(following, METADATA)  # from the first task on
            records = following  # the same object: the prepared iterator is handed out
        rest = [int(x) for features, _ in current for x in features["x"].numpy().reshape(-1)]
        assert len(rest) == 6
        current = pipelines.batches(records, METADATA, Mode.TRAINING)
    seen = [int(x) for features, _ in current for x in features["x"].numpy().reshape(-1)]
    assert seen == [int(r) for r in task_records(5, 10)]


def test_a_prepared_task_the_worker_did_not_get_is_dropped():
    pipelines = TaskPipelines(parallel_parse, minibatch_size=4)
    for task in range(2):
        list(pipelines.batches(task_records(task, 8), METADATA, Mode.TRAINING))
    assert pipelines.prepare(task_records(7, 8), METADATA)
    evaluated = task_records(8, 8)  # the master answered with an evaluation instead
    labels = [y.numpy() for _, y in pipelines.batches(evaluated, METADATA, Mode.EVALUATION)]
    assert np.concatenate(labels).tolist() == [int(r) * 10 for r in evaluated]
    other = task_records(9, 8)
    seen = [int(x) for f, _ in pipelines.batches(other, METADATA) for x in f["x"].numpy()]
    assert seen == [int(r) for r in other]
