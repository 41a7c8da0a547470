"""`OneTrace` (runtime/worker/one_trace.py): one trace for every batch size, the results of the
plain `tf.function`, and its own dispatch for inputs the relaxed trace does not take."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from elasticdl.runtime.worker.one_trace import OneTrace


def weighted_sum():
    @tf.function(reduce_retracing=True)
    def f(features, labels):
        return tf.reduce_sum(features["x"] * tf.range(1.0, 4.0)) + tf.reduce_sum(labels)

    return f


def batch(n: int, width: int = 3):
    x = np.arange(n * width, dtype=np.float32).reshape(n, width)
    return {"x": tf.constant(x)}, tf.ones([n, 1])


def test_one_trace_for_every_batch_size_and_the_plain_results():
    plain, once = weighted_sum(), OneTrace(weighted_sum())
    for n in (64, 64, 17, 1, 64):
        features, labels = batch(n)
        assert float(once(features, labels)) == float(plain(features, labels))
    assert once.traces == 1
    assert plain.experimental_get_tracing_count() == 2  # what reduce_retracing needs


def test_an_input_the_trace_does_not_take_falls_back_to_the_function():
    once = OneTrace(weighted_sum())
    once(*batch(8))
    wider = {"x": tf.ones([8, 5])}, tf.ones([8, 1])
    narrow = {"x": tf.ones([8, 3])}, tf.ones([8, 1])
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):  # as the plain one fails
        once(*wider)
    assert float(once(*narrow)) == float(weighted_sum()(*narrow))
    assert once.traced and once.traces >= 2


def test_inner_dimensions_relaxed_too_when_asked():
    @tf.function
    def total(ids):
        return tf.reduce_sum(ids)

    once = OneTrace(total, static_inner_dims=False)
    for shape in ((4, 3, 2), (5, 7, 2), (1, 1, 2)):
        ids = tf.ones(shape, tf.int64)
        assert int(once(ids)) == int(np.prod(shape))
    assert once.traces == 1


def test_ragged_inputs_of_any_row_lengths_share_the_trace():
    @tf.function
    def row_sums(values):
        return tf.reduce_sum(values, axis=1)

    once = OneTrace(row_sums)
    for rows in ([[1, 2], [3]], [[4], [], [5, 6, 7]]):
        ragged = tf.ragged.constant(rows, dtype=tf.int64)
        assert once(ragged).numpy().tolist() == [sum(r) for r in rows]
    assert once.traces == 1


def test_a_function_that_needs_a_static_batch_size_still_runs():
    @tf.function
    def flatten(x):
        return tf.reshape(x, [x.shape[0], -1])  # None with a relaxed batch dimension

    once = OneTrace(flatten)
    for n in (4, 4, 3):
        assert once(tf.ones([n, 2, 3])).shape == (n, 6)
    assert once.traced
