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


def odd_numbers_only(dataset, mode, metadata):
    """Drops records: a task's minibatch count is not its record count over the batch size."""
    numbers = dataset.map(lambda r: tf.strings.to_number(r, tf.int64))
    return numbers.filter(lambda n: n % 2 == 1).map(lambda n: ({"x": n}, n * 10))


def test_one_iterator_reads_every_task_of_a_slot_even_filtered_and_empty_ones():
    """Tasks end where their own records end, whatever `dataset_fn` keeps of them."""
    pipelines = TaskPipelines(odd_numbers_only, minibatch_size=4)
    sizes = [9, 0, 12, 1, 2, 7, 8, 0, 5, 4]  # "0": a task with no record left after the filter
    for task, size in enumerate(sizes):
        records = [str(task * 1000 + 2 * i + (size > 0)).encode() for i in range(max(size, 3))]
        expected = [int(r) for r in records if int(r) % 2 == 1]
        seen = [
            int(x)
            for features, _ in pipelines.batches(records, METADATA, Mode.TRAINING)
            for x in features["x"].numpy()
        ]
        assert seen == expected, f"task {task}"
    assert pipelines.iterators_made == 2  # one a feed slot, for all ten tasks


def test_a_task_left_half_read_costs_its_slot_a_fresh_iterator():
    pipelines = TaskPipelines(parallel_parse, minibatch_size=4)
    for task in range(4):
        list(pipelines.batches(task_records(task, 9), METADATA, Mode.TRAINING))
    assert pipelines.iterators_made == 2
    next(pipelines.batches(task_records(4, 12), METADATA, Mode.TRAINING))  # left half read
    list(pipelines.batches(task_records(5, 12), METADATA, Mode.TRAINING))  # the other slot
    records = task_records(6, 12)  # the half-read slot again
    seen = [int(x) for f, _ in pipelines.batches(records, METADATA) for x in f["x"].numpy()]
    assert seen == [int(r) for r in records]
    assert pipelines.iterators_made == 3


def test_an_abandoned_task_read_to_its_end_later_leaves_the_slot_to_its_new_iterator():
    pipelines = TaskPipelines(parallel_parse, minibatch_size=4)
    list(pipelines.batches(task_records(0, 8), METADATA, Mode.TRAINING))
    list(pipelines.batches(task_records(1, 8), METADATA, Mode.TRAINING))
    abandoned = pipelines.batches(task_records(2, 8), METADATA, Mode.TRAINING)
    next(abandoned)
    list(pipelines.batches(task_records(3, 8), METADATA, Mode.TRAINING))
    current = pipelines.batches(task_records(4, 8), METADATA, Mode.TRAINING)  # a fresh one
    next(current)  # and left half read too
    list(abandoned)  # its old iterator read to the end: says nothing of the slot's new one
    list(pipelines.batches(task_records(5, 8), METADATA, Mode.TRAINING))
    records = task_records(6, 8)  # task 4's slot
    seen = [int(x) for f, _ in pipelines.batches(records, METADATA) for x in f["x"].numpy()]
    assert seen == [int(r) for r in records]


def ragged_parse(dataset, mode, metadata):
    """Minibatches of ragged tensors: no end-of-task minibatch of no rows can be made of them."""
    numbers = dataset.map(lambda r: tf.strings.to_number(r, tf.int64))
    return numbers.map(lambda n: ({"x": tf.RaggedTensor.from_tensor([[n]])}, n * 10))


def test_ragged_minibatches_get_an_iterator_a_task_and_their_own_records():
    pipelines = TaskPipelines(ragged_parse, minibatch_size=4)
    for task in range(5):
        records = task_records(task, 6 + task)
        labels = [y.numpy() for _, y in pipelines.batches(records, METADATA, Mode.TRAINING)]
        assert np.concatenate(labels).tolist() == [int(r) * 10 for r in records], f"task {task}"
    assert pipelines.iterators_made == 6  # one a task, and the next one's made ahead


def eager_only_parse(dataset, mode, metadata):
    """Reads a tensor's value while building (eager only): it cannot run in a tf.data function."""
    offset = int(tf.constant(5).numpy())
    return dataset.map(lambda r: tf.strings.to_number(r, tf.int64) + offset).map(
        lambda n: ({"x": n}, n * 10)
    )


def test_a_dataset_fn_that_needs_eager_execution_still_reads_each_task():
    pipelines = TaskPipelines(eager_only_parse, minibatch_size=4)
    for task in range(3):
        records = task_records(task, 7)
        seen = [int(x) for f, _ in pipelines.batches(records, METADATA) for x in f["x"].numpy()]
        assert seen == [int(r) + 5 for r in records], f"task {task}"
    assert pipelines.iterators_made == 4  # one a task (made eagerly, as before), one ahead
