"""A model zoo for fault-tolerance tests (`--model_zoo tests/support/fault_zoo`).

`faulty.custom_model` is a linear regression on the `regression` data set (x0..x7 -> label).
Its `sigkill_in_workers` input function kills the worker process that calls it with SIGKILL,
which is what the kernel's OOM killer does to a process that runs out of memory: every worker
dies on its first task, however often it is relaunched. The master, the parameter servers and
the test process (which never run it as a worker) are spared. `slow_worker0` makes worker 0
(only) take SLOW_RECORD_S per record, so that a job lasts until a worker added later has
trained, whatever the machine's speed. `slow_workers` makes every worker take
PACED_RECORD_S per record, so that no worker trains every task before another has started.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import keras
import tensorflow as tf

FEATURES = [f"x{i}" for i in range(8)]


def custom_model():
    inputs = {name: keras.Input(shape=(1,), name=name) for name in FEATURES}
    merged = keras.layers.Concatenate()(list(inputs.values()))
    return keras.Model(inputs, keras.layers.Dense(1)(merged))


def _parse(record):
    spec = {name: tf.io.FixedLenFeature([1], tf.float32) for name in [*FEATURES, "label"]}
    example = tf.io.parse_single_example(record, spec)
    return {name: example[name] for name in FEATURES}, example["label"]


def dataset_fn(dataset, mode):
    return dataset.map(_parse)


def in_a_worker() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return spec is not None and spec.name == "elasticdl.runtime.worker.main"


def sigkill_in_workers(dataset, mode):
    if in_a_worker():
        os.kill(os.getpid(), signal.SIGKILL)
    return dataset_fn(dataset, mode)


SLOW_RECORD_S = 0.02
PACED_RECORD_S = 0.002


def _worker_id() -> int | None:
    argv = sys.argv
    if in_a_worker() and "--worker_id" in argv:
        return int(argv[argv.index("--worker_id") + 1])
    return None


def _paced(dataset, seconds_a_record: float):
    def pause(record):
        time.sleep(seconds_a_record)
        return record

    slowed = dataset.map(lambda r: tf.py_function(pause, [r], tf.string))
    return slowed.map(lambda r: tf.ensure_shape(r, [])).map(_parse)


def slow_worker0(dataset, mode):
    if _worker_id() != 0:
        return dataset_fn(dataset, mode)
    return _paced(dataset, SLOW_RECORD_S)


def slow_workers(dataset, mode):
    if _worker_id() is None:
        return dataset_fn(dataset, mode)
    return _paced(dataset, PACED_RECORD_S)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions))


def optimizer(lr=0.01):
    return keras.optimizers.SGD(lr)


GATE_ENV = "FAULTY_GATE"
GATE_AFTER_RECORDS = 64


def gated(dataset, mode):
    """Workers train GATE_AFTER_RECORDS records, then wait for the file named by $FAULTY_GATE
    to exist: the job runs (and has reported losses) until the test opens the gate."""
    gate = os.environ.get(GATE_ENV, "")
    if not in_a_worker() or not gate:
        return dataset_fn(dataset, mode)
    seen = [0]

    def wait(record):
        seen[0] += 1
        while seen[0] > GATE_AFTER_RECORDS and not os.path.exists(gate):
            time.sleep(0.05)
        return record

    held = dataset.map(lambda r: tf.py_function(wait, [r], tf.string))
    return held.map(lambda r: tf.ensure_shape(r, [])).map(_parse)
