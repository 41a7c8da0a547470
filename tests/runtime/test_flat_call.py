"""`FlatCall` (runtime/flat_call.py): the same results as the concrete function's own call,
flat where the inputs match the trace, and the plain call -- its conversions and its errors --
everywhere else."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from elasticdl.runtime.flat_call import FlatCall

W = tf.Variable([[1.0], [2.0]])


@tf.function
def model(values: list[Any], features: dict[str, Any], labels: Any) -> Any:
    x = tf.concat([features["b"], features["a"]], axis=1)  # keys out of sorted order
    return tf.reduce_sum(tf.matmul(x, W) * values[0] + values[1]) - tf.reduce_sum(labels)


def concrete() -> Any:
    return model.get_concrete_function(
        [tf.TensorSpec([1], tf.float32), tf.TensorSpec([], tf.float32)],
        {"b": tf.TensorSpec([None, 1], tf.float32), "a": tf.TensorSpec([None, 1], tf.float32)},
        tf.TensorSpec([None], tf.float32),
    )


def inputs(batch: int = 3, dtype: Any = np.float32) -> tuple[Any, ...]:
    rows = np.arange(batch, dtype=dtype)[:, None]
    return (
        [np.array([2.0], dtype=dtype), tf.constant(0.5)],
        {"b": tf.constant(rows + 1), "a": rows * 2},
        tf.ones([batch]),
    )


@pytest.fixture()
def plain_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often a concrete function's own (binding) call ran."""
    calls: list[int] = []
    cls = type(concrete())
    original = cls.__call__

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__call__", counted)
    return calls


def test_matching_inputs_are_called_flat_with_the_same_result(plain_calls: list[int]) -> None:
    function = concrete()
    flat = FlatCall(function)
    for batch in (3, 1, 5):  # the batch dimension the trace left open
        args = inputs(batch)
        assert float(flat(*args)) == float(function(*args))
    assert len(plain_calls) == 3  # only the comparisons' own calls


def test_a_tape_sees_through_the_flat_call(plain_calls: list[int]) -> None:
    function = concrete()
    flat = FlatCall(function)
    gradients = []
    for call in (flat, function):
        with tf.GradientTape() as tape:
            loss = call(*inputs())
        gradients.append(tape.gradient(loss, W).numpy())
    np.testing.assert_array_equal(gradients[0], gradients[1])
    assert np.abs(gradients[0]).sum() > 0
    assert len(plain_calls) == 1


@pytest.mark.parametrize(
    "change",
    [
        "dtype",  # float64 arrays: the plain call refuses them
        "inner shape",  # [batch, 2] where the trace takes [None, 1]
        "rank",
        "structure",  # a feature missing
    ],
)
def test_inputs_the_trace_does_not_take_get_the_plain_call_and_its_error(
    change: str, plain_calls: list[int]
) -> None:
    values, features, labels = inputs()
    if change == "dtype":
        values, features, labels = inputs(dtype=np.float64)
    elif change == "inner shape":
        features = {**features, "a": np.zeros([3, 2], np.float32)}
    elif change == "rank":
        labels = tf.ones([3, 1])
    else:
        features = {"b": features["b"]}
    function = concrete()
    with pytest.raises(TypeError) as plain_error:
        function(values, features, labels)
    with pytest.raises(TypeError) as flat_error:
        FlatCall(function)(values, features, labels)
    assert str(flat_error.value) == str(plain_error.value)
    assert len(plain_calls) == 2


def test_a_python_value_where_a_tensor_was_traced_is_converted_by_the_plain_call(
    plain_calls: list[int],
) -> None:
    values, features, labels = inputs()
    function = concrete()
    expected = float(function(values, features, labels))
    assert float(FlatCall(function)([values[0], 0.5], features, labels)) == expected
    assert len(plain_calls) == 2


def test_a_signature_with_python_values_is_always_bound(plain_calls: list[int]) -> None:
    @tf.function
    def scaled(x: Any, factor: float) -> Any:
        return x * factor

    function = scaled.get_concrete_function(tf.TensorSpec([None], tf.float32), 3.0)
    assert FlatCall(function)(tf.ones([2]), 3.0).numpy().tolist() == [3.0, 3.0]
    assert len(plain_calls) == 1
