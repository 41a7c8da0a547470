import keras
import numpy as np

from elasticdl.runtime.variables import assign, named_variables


def build(units: int = 3) -> keras.Model:
    inputs = keras.Input(shape=(4,))
    x = keras.layers.Dense(units)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Dropout(0.5)(x)
    return keras.Model(inputs, keras.layers.Dense(1)(x))


def test_keys_do_not_depend_on_what_the_process_built_before():
    first_trainable, first_state = named_variables(build())
    for _ in range(3):
        build()  # bumps Keras' per-process layer-name counters
    again_trainable, again_state = named_variables(build())
    assert list(first_trainable) == list(again_trainable)
    assert list(first_state) == list(again_state)
    assert list(first_trainable)[0] == "t000/dense/kernel"
    assert all("seed_generator" not in k for k in first_state), "RNG state is not a parameter"
    assert {k.split("/", 1)[1] for k in first_state} == {
        "batch_normalization/moving_mean",
        "batch_normalization/moving_variance",
    }


def test_assign_checks_names_and_shapes():
    trainable, _ = named_variables(build())
    key = next(iter(trainable))
    assign(trainable, {key: np.ones((4, 3), dtype=np.float32)})
    np.testing.assert_array_equal(trainable[key].numpy(), np.ones((4, 3)))
    try:
        assign(trainable, {key: np.ones((2, 2), dtype=np.float32)})
    except ValueError as err:
        assert key in str(err)
    else:
        raise AssertionError("shape mismatch must raise")
