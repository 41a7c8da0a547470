"""A task's records through the spec's `dataset_fn`, traced once per kind of data and mode.

Each task feeds its records (in the order the task gives) through a fresh iterator of a
pipeline built once: the records go in through a string variable that every iterator reads
anew, so `dataset_fn` is traced once, not once per task. Making an iterator costs 36-38 ms
for DeepFM's input pipeline (a third of a task switch, measured in a job), so from the second
task of a kind on, the next task's iterator is made on a background thread while this task
trains (not during the first, which traces the model). An iterator reads the variable at its
first minibatch, not when it is made (tests/runtime/test_pipeline.py checks it with
prefetching and parallel maps), so the one made ahead reads the next task's records.

When the worker holds its next task ahead (runtime/worker/task_ahead.py), `prepare` feeds that
task's records into the other of two feed slots and makes its first minibatch on a background
thread while the current task trains: the first minibatch through an empty pipeline (13-14 ms
of a DNN task switch of ~22 ms, measured in the worker loop) is then ready when the task starts.
Both slots' pipelines are built together, with the first task of a kind, so that the second
task is prepared too: built at the first switch instead, the second slot's pipeline and its
first iterator stalled the worker ~36 ms there (MNIST, 44 ms from the last minibatch to the
next task's first one, against 6-8 ms at later switches).

A `shuffle` inside `dataset_fn` is neutralized while the pipeline is built: progress counts
records from the start of the task's order, and a further shuffle would make "the first k
records are done" untrue (prediction needs the order kept too, to pair outputs with inputs).
The master shuffles tasks every epoch and gives each task its own permutation, so training
data is still shuffled.

tf.data's autotuning is off in these pipelines: its model thread made freeing a spent
iterator (once a task, at every task switch) take 75-80 ms in 1 iterator in 3 for DeepFM's
input pipeline, and 150 ms to 1.2 s inside a job; without it freeing takes under 5 ms and a
minibatch comes no slower (`AUTOTUNE` parallelism then stays at tf.data's default).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import tensorflow as tf

from elasticdl.mode import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata


@contextlib.contextmanager
def in_task_order() -> Iterator[None]:
    """Build a pipeline with `Dataset.shuffle` as a no-op (see the module docstring)."""
    original = tf.data.Dataset.shuffle
    tf.data.Dataset.shuffle = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    try:
        yield
    finally:
        tf.data.Dataset.shuffle = original  # type: ignore[method-assign]


class TaskPipelines:
    """Minibatches of a task's records, one traced pipeline per (columns, label, mode) and
    feed slot.

    Two feed slots (string variables, each with its own pipelines) alternate from task to
    task, so the next task can be fed while this one's iterator still reads the other: an
    iterator made ahead (the module docstring) is made for the slot the next task will use, and
    `prepare` fills that slot up to the next task's first minibatch.
    """

    def __init__(self, dataset_fn: Callable[[Any, Mode, Any], Any], minibatch_size: int) -> None:
        self._dataset_fn = dataset_fn
        self._minibatch_size = minibatch_size
        if hasattr(dataset_fn, "records_per_call"):  # input_fn(records): one call a minibatch
            dataset_fn.records_per_call = minibatch_size  # type: ignore[attr-defined]
        self._feeds: list[Any] = []
        self._pipelines: dict[tuple[Any, ...], Any] = {}
        self._seen: set[tuple[Any, ...]] = set()
        self._made_ahead: dict[tuple[Any, ...], Future[Any]] = {}
        self._maker: ThreadPoolExecutor | None = None
        self._slot = 1  # the slot of the iterator handed out last
        self._prepared: tuple[list[bytes], tuple[Any, ...], int, Iterator[Any]] | None = None

    def batches(
        self, records: list[bytes], metadata: DatasetMetadata, mode: Mode = Mode.TRAINING
    ) -> Iterator[Any]:
        key = (tuple(metadata.columns.items()), metadata.label, mode)
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared[0] is records and prepared[1] == key:
            iterator, slot = prepared[3], prepared[2]
        else:  # none, or one for a task this worker did not get after all: dropped
            slot = self._slot ^ 1
            iterator = self._fed(key, slot, self._pipeline(key, slot, metadata), records)
        self._slot = slot
        if key in self._seen:
            other = self._pipeline(key, slot ^ 1, metadata)
            self._made_ahead[(key, slot ^ 1)] = self._maker_thread().submit(iter, other)
        self._seen.add(key)
        return iterator

    def prepare(
        self, records: list[bytes], metadata: DatasetMetadata, mode: Mode = Mode.TRAINING
    ) -> bool:
        """Feed the next task's `records` into the free slot and make its first minibatch,
        blocking (a worker calls it on a background thread while the current task trains);
        the next `batches` call with these very records hands out that iterator. False (nothing
        prepared) before the first task of this kind began: pipelines are built (traced) on the
        training thread only."""
        key = (tuple(metadata.columns.items()), metadata.label, mode)
        slot = self._slot ^ 1
        pipeline = self._pipelines.get((key, slot))
        if pipeline is None:
            return False
        iterator = self._fed(key, slot, pipeline, records)
        self._prepared = (records, key, slot, _primed(iterator))
        return True

    def _fed(self, key: tuple[Any, ...], slot: int, pipeline: Any, records: list[bytes]) -> Any:
        """An iterator of `pipeline` that reads `records` (fed into `slot`)."""
        self._feeds[slot].assign(tf.constant(records, dtype=tf.string))
        ahead = self._made_ahead.pop((key, slot), None)
        return iter(pipeline) if ahead is None else ahead.result()

    def _pipeline(self, key: tuple[Any, ...], slot: int, metadata: DatasetMetadata) -> Any:
        """The pipeline of `key` in `slot`, building both slots' the first time."""
        if (key, slot) not in self._pipelines:
            for each in (slot, slot ^ 1):
                self._pipelines[(key, each)] = self._build(key, each, metadata)
        return self._pipelines[(key, slot)]

    def _build(self, key: tuple[Any, ...], slot: int, metadata: DatasetMetadata) -> Any:
        while len(self._feeds) <= slot:
            # Dataset.from_generator would also do, but in its process TensorFlow's oneDNN
            # convolutions ran about twice as slow (bench/RESULTS.md).
            self._feeds.append(
                tf.Variable(
                    tf.constant([], dtype=tf.string), shape=tf.TensorShape([None]), trainable=False
                )
            )
        feed = self._feeds[slot]
        source = tf.data.Dataset.range(1).flat_map(
            lambda _: tf.data.Dataset.from_tensor_slices(feed.read_value())
        )
        with in_task_order():
            dataset = self._dataset_fn(source, key[2], metadata)
        options = tf.data.Options()
        options.autotune.enabled = False
        return dataset.batch(self._minibatch_size).prefetch(1).with_options(options)

    def _maker_thread(self) -> ThreadPoolExecutor:
        if self._maker is None:
            self._maker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pipeline")
        return self._maker


def _primed(iterator: Iterator[Any]) -> Iterator[Any]:
    """`iterator` with its first item taken now (the caller's thread waits for it)."""
    try:
        first = next(iterator)
    except StopIteration:
        return iter(())
    return itertools.chain((first,), iterator)


def evaluation_states(
    pipelines: TaskPipelines,
    predict: Callable[[Any], Any],
    eval_metrics: Any,
    records: list[bytes],
    metadata: DatasetMetadata,
) -> dict[str, Any]:
    """Additive metric state of `predict` on `records` (see runtime/metrics.py)."""
    from elasticdl.runtime.metrics import MetricAccumulator

    accumulator = MetricAccumulator(eval_metrics)
    for features, labels in pipelines.batches(records, metadata, Mode.EVALUATION):
        accumulator.update(labels, predict(features))
    return accumulator.states()
