"""Received gradients lent to TensorFlow from reused aligned buffers (ps/apply_functions.py)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from elasticdl.runtime.ps.apply_functions import ALIGNMENT, GradientBuffers, aligned_empty


def _address(tensor: tf.Tensor) -> int:
    return np.asarray(tensor).ctypes.data


def test_aligned_empty_starts_on_the_boundary_for_every_offset():
    for size in (1, 3, 17, 1000):
        array = aligned_empty((size, 2), np.dtype(np.float32))
        assert array.shape == (size, 2) and array.flags.c_contiguous
        assert array.ctypes.data % ALIGNMENT == 0


def test_float_gradients_are_copied_once_into_one_buffer_per_variable_and_reused():
    buffers = GradientBuffers()
    received = np.frombuffer(np.arange(12, dtype=np.float32).tobytes(), np.float32)
    first = buffers.lend((0, 1), [received.reshape(3, 4), np.ones(5, np.float32)])
    np.testing.assert_array_equal(first[0].numpy(), np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(first[1].numpy(), np.ones(5))
    addresses = [_address(t) for t in first]
    assert all(a % ALIGNMENT == 0 for a in addresses)
    assert _address(first[0]) != received.ctypes.data  # a copy: the request bytes may go
    del first
    second = buffers.lend((0, 1), [np.full((3, 4), 7, np.float32), np.zeros(5, np.float32)])
    assert [_address(t) for t in second] == addresses
    np.testing.assert_array_equal(second[0].numpy(), np.full((3, 4), 7))
    np.testing.assert_array_equal(second[1].numpy(), np.zeros(5))


def test_a_new_shape_or_dtype_gets_a_new_buffer():
    buffers = GradientBuffers()
    (small,) = buffers.lend((0,), [np.ones(4, np.float32)])
    small_at = _address(small)
    (wide,) = buffers.lend((0,), [np.arange(6, dtype=np.float64)])
    assert wide.dtype == tf.float64 and _address(wide) != small_at
    np.testing.assert_array_equal(wide.numpy(), np.arange(6))


def test_other_kinds_and_empty_gradients_are_converted():
    buffers = GradientBuffers()
    ints, empty = buffers.lend((0, 1), [np.arange(3, dtype=np.int64), np.zeros(0, np.float32)])
    assert ints.dtype == tf.int64 and ints.numpy().tolist() == [0, 1, 2]
    assert empty.shape == (0,)
    assert buffers.enabled


def test_switched_off_converts_as_before():
    buffers = GradientBuffers()
    buffers.enabled = False
    (tensor,) = buffers.lend((0,), [np.ones(3, np.float32)])
    assert tensor.numpy().tolist() == [1.0, 1.0, 1.0]


def test_scalars_and_strided_gradients_are_lent_as_they_read():
    buffers = GradientBuffers()
    scalar, strided = buffers.lend((0, 1), [np.float32(3.0), np.arange(6.0).reshape(2, 3)[:, ::2]])
    assert scalar.shape == () and float(scalar) == 3.0
    np.testing.assert_array_equal(strided.numpy(), [[0.0, 2.0], [3.0, 5.0]])
    assert buffers.enabled


class _AssignsTheGradient:
    """An optimizer XLA cannot compile (a Python call in its step) that assigns each gradient
    as the variable's value: in a graph function the assignment may take the gradient's buffer
    as the variable's own."""

    def __new__(cls, learning_rate: float):
        import keras

        class AssignsTheGradient(keras.optimizers.Optimizer):
            def update_step(self, gradient, variable, learning_rate):
                tf.numpy_function(lambda: np.int32(0), [], tf.int32, stateful=True)
                variable.assign(gradient)

        return AssignsTheGradient(learning_rate=learning_rate)


def test_a_graph_function_gets_copies_a_variable_cannot_keep():
    import keras

    from elasticdl.runtime.ps.apply_functions import ApplyFunctions

    variable = keras.Variable(np.zeros(100, np.float32))
    optimizer = _AssignsTheGradient(learning_rate=0.1)
    optimizer.build([variable])
    apply = ApplyFunctions(optimizer, [variable], keras.Variable(1.0))
    apply((0,), [np.full(100, 1.0, np.float32)], 1.0)
    assert not apply.jit  # XLA refused it: a graph function applied the push
    np.testing.assert_array_equal(variable.numpy(), np.ones(100))
    apply((0,), [np.full(100, 2.0, np.float32)], 1.0)
    np.testing.assert_array_equal(variable.numpy(), np.full(100, 2.0))
    # The next push's gradient is received (and, when lent, copied into a reused buffer)
    # before its application runs; the variable must not change with it.
    apply._buffers.lend((0,), [np.full(100, 3.0, np.float32)])
    np.testing.assert_array_equal(variable.numpy(), np.full(100, 2.0))
