"""A task's records through the spec's `dataset_fn`, traced once per kind of data and mode.

Each task's records (in the order the task gives) go in through a string variable that the
pipeline reads anew for every task, so `dataset_fn` is traced once, not once per task.

One iterator reads every task of a feed slot: the pipeline is
`range(...).flat_map(lambda _: dataset_fn(the variable's records).batch(B).prefetch(1) + end)`,
where `end` is a minibatch of no rows marking the task's end (a real minibatch has at least
one). Each `flat_map` element opens when the minibatch after the previous task's end is asked
for, and reads the variable then, so a task fed before that reads its own records. Making an
iterator costs ~7 ms of CPU for regressor.DNN's pipeline (36-38 ms for DeepFM's; C++: function
instantiation and tf.data's rewrites) and made one per task, on a background thread, it slowed
a DNN task's first five minibatches 1.5-4x on 2 cores (bench/RESULTS.md). Where no such end can
be made (an element that is not plain tensors: ragged or sparse; a `dataset_fn` that needs
eager execution, which `flat_map`'s function does not give it), or a task was left half read,
a slot gets a fresh iterator (from the second task of a kind on, made on a background
thread while this task trains). Either way (tests/runtime/test_pipeline.py checks it, with
prefetching and parallel maps) a task's minibatches hold exactly its records.

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
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import tensorflow as tf

from elasticdl.mode import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata

_log = logging.getLogger("elasticdl.worker")


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
        self._iterators_made = 0

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
        other = self._pipeline(key, slot ^ 1, metadata)
        if key in self._seen and not isinstance(other, _TaskReader):
            self._made_ahead[(key, slot ^ 1)] = self._maker_thread().submit(iter, other)
            self._iterators_made += 1
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
        if isinstance(pipeline, _TaskReader):
            return pipeline.task()
        ahead = self._made_ahead.pop((key, slot), None)
        if ahead is not None:
            return ahead.result()
        self._iterators_made += 1
        return iter(pipeline)

    @property
    def iterators_made(self) -> int:
        """Iterators made so far, over every pipeline (a reader's first counts one)."""
        readers = [p for p in self._pipelines.values() if isinstance(p, _TaskReader)]
        return self._iterators_made + sum(reader.iterators_made for reader in readers)

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
        options = tf.data.Options()
        options.autotune.enabled = False
        options.experimental_optimization.inject_prefetch = False  # none past a task's end

        @tf.autograph.experimental.do_not_convert  # else autograph converts all dataset_fn calls
        def task(_: Any) -> Any:
            source = tf.data.Dataset.from_tensor_slices(feed.read_value())
            batches = self._dataset_fn(source, key[2], metadata).batch(self._minibatch_size)
            return batches.prefetch(1).concatenate(_end_of(batches.element_spec))

        with in_task_order():
            try:
                tasks = tf.data.Dataset.range(TASKS_A_READER).flat_map(task)
            except Exception as error:  # noqa: BLE001 - a real error is raised again below
                # _NoEnd, or a dataset_fn that needs eager execution (a `.numpy()`, Python
                # `if` on a tensor): it cannot run in flat_map's function; as before, eagerly.
                _log.debug("an iterator a task for %s: %s", key[2], error or type(error).__name__)
                source = tf.data.Dataset.range(1).flat_map(
                    lambda _: tf.data.Dataset.from_tensor_slices(feed.read_value())
                )
                dataset = self._dataset_fn(source, key[2], metadata)
                return dataset.batch(self._minibatch_size).prefetch(1).with_options(options)
        return _TaskReader(tasks.with_options(options))

    def _maker_thread(self) -> ThreadPoolExecutor:
        if self._maker is None:
            self._maker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pipeline")
        return self._maker


TASKS_A_READER = 2**62
"""Elements of a reader's `range`: more tasks than any worker will read."""


class _NoEnd(Exception):
    """The minibatches are not plain tensors: no end-of-task minibatch can be made."""


def _end_of(spec: Any) -> Any:
    """A one-element dataset of `spec`'s structure with no rows: a task's end."""

    def empty(component: Any) -> Any:
        if not isinstance(component, tf.TensorSpec) or component.shape.rank is None:
            raise _NoEnd
        return tf.zeros([d or 0 for d in component.shape.as_list()], component.dtype)

    return tf.data.Dataset.from_tensors(tf.nest.map_structure(empty, spec))


def _is_end(batch: Any) -> bool:
    first = tf.nest.flatten(batch)[0]
    return first.shape.rank > 0 and first.shape[0] == 0


class _TaskReader:
    """One slot's iterator over every task fed into it, each task ended by `_end_of`.

    A task left before its end (a worker stopped, a prepared task dropped) leaves the iterator
    inside it: the next task then gets a fresh iterator."""

    def __init__(self, tasks: Any) -> None:
        self._tasks = tasks
        self._iterator: Iterator[Any] | None = None
        self._at_end = False
        self.iterators_made = 0

    def task(self) -> Iterator[Any]:
        """The minibatches of the task fed last, up to its end."""
        if self._iterator is None or not self._at_end:
            self._iterator = iter(self._tasks)
            self.iterators_made += 1
        self._at_end = False
        return self._until_end(self._iterator)

    def _until_end(self, iterator: Iterator[Any]) -> Iterator[Any]:
        for batch in iterator:
            if _is_end(batch):
                self._at_end = iterator is self._iterator  # not an abandoned task's, read late
                return
            yield batch


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
