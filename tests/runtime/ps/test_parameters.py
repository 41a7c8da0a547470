"""Parameters store and gradient policy, without gRPC."""

from __future__ import annotations

import os
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest
import tensorflow as tf

from elasticdl.runtime.ps import apply_functions
from elasticdl.runtime.ps.parameters import (
    GradientPolicy,
    NotInitializedError,
    Parameters,
)

SHAPES = {"dense/kernel": (4, 3), "dense/bias": (3,), "out/kernel": (3, 1), "out/bias": (1,)}


def random_values(seed: int, shapes=SHAPES) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


def reference_apply(values, steps, make_optimizer):
    """Apply each gradient dict of `steps` with a plain Keras optimizer on identical copies."""
    variables = {name: keras.Variable(value) for name, value in values.items()}
    optimizer = make_optimizer()
    for grads in steps:
        optimizer.apply_gradients([(tf.constant(grads[n]), variables[n]) for n in grads])
    return {name: v.numpy() for name, v in variables.items()}


def assert_values_close(actual, expected):
    assert set(actual) == set(expected)
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-6, atol=1e-6, err_msg=name)


# -- the pure policy ----------------------------------------------------------------------------


def test_async_policy_accepts_every_push_and_modulates_stale_ones():
    policy = GradientPolicy(lr_staleness_modulation=True)
    g = {"w": np.ones(2, np.float32)}
    fresh = policy.offer(5, 5, g, task_id=1, records_end=8)
    assert fresh.accepted and fresh.gradients is not None and fresh.lr_scale == 1.0
    assert fresh.contributions == ((1, 8),)
    assert policy.offer(5, 1, g).lr_scale == pytest.approx(0.25)
    assert policy.offer(5, 7, g).lr_scale == 1.0  # ahead (after a PS restart): no boost
    assert policy.offer(5, 3, g, lr_scale=0.5).lr_scale == pytest.approx(0.25)
    assert GradientPolicy().offer(5, 1, g).lr_scale == 1.0  # modulation off


def test_sync_policy_averages_then_rejects_stale_and_future_pushes():
    policy = GradientPolicy(use_async=False, grads_to_wait=2)
    first = policy.offer(0, 0, {"w": np.array([1.0, 2.0], np.float32)}, 1, 10)
    assert first.accepted and first.gradients is None and policy.pending == 1
    second = policy.offer(0, 0, {"w": np.array([3.0, 6.0], np.float32)}, 2, 20)
    assert second.accepted and second.lr_scale == 1.0
    np.testing.assert_array_equal(second.gradients["w"], [2.0, 4.0])
    assert second.contributions == ((1, 10), (2, 20)) and policy.pending == 0
    stale = policy.offer(1, 0, {"w": np.zeros(2, np.float32)})
    assert not stale.accepted and "stale" in stale.reason and policy.pending == 0
    ahead = policy.offer(1, 2, {"w": np.zeros(2, np.float32)})
    assert not ahead.accepted and "ahead" in ahead.reason


def test_sync_policy_drops_gradients_of_an_outdated_version():
    policy = GradientPolicy(use_async=False, grads_to_wait=2)
    policy.offer(0, 0, {"w": np.full(2, 100.0, np.float32)})
    # the version moved without this accumulator (e.g. a direct apply): start over
    policy.offer(1, 1, {"w": np.ones(2, np.float32)})
    decision = policy.offer(1, 1, {"w": np.ones(2, np.float32)})
    np.testing.assert_array_equal(decision.gradients["w"], [1.0, 1.0])


def test_applied_progress_keeps_the_maximum_per_task():
    policy = GradientPolicy()
    policy.record_applied([(1, 32), (2, 16)])
    policy.record_applied([(1, 16)])  # a late, older push does not move it back
    assert policy.applied_progress([1, 2, 3]) == {1: 32, 2: 16, 3: 0}


def test_grads_to_wait_must_be_positive():
    with pytest.raises(ValueError, match="grads_to_wait"):
        GradientPolicy(use_async=False, grads_to_wait=0)


# -- the store ----------------------------------------------------------------------------------


def test_first_initialize_wins_even_when_racing():
    params = Parameters(lambda: keras.optimizers.SGD(0.1))
    models = [random_values(seed) for seed in range(4)]
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda m=m: results.append(params.initialize(m))) for m in models
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, False, False, True]
    winner = next(m for m in models if np.array_equal(m["out/bias"], params.values()["out/bias"]))
    assert_values_close(params.values(), winner)
    assert params.initialize(random_values(9)) is False
    assert_values_close(params.values(), winner)
    assert params.version == 0 and params.initialized


def test_optimizer_is_built_once_with_slots_for_every_variable():
    params = Parameters(lambda: keras.optimizers.Adam(0.01))
    params.initialize(random_values(0))
    # Strip the optimizer's own name: its counter suffix depends on what the process built.
    paths = [v.path.split("/", 1)[1] for v in params.optimizer.variables]
    for name in SHAPES:
        slot = name.replace("/", "_")
        assert f"{slot}_momentum" in paths and f"{slot}_velocity" in paths
    assert len(paths) == 2 + 2 * len(SHAPES)  # + iterations and learning rate


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda: keras.optimizers.Adam(0.01),
        lambda: keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
        lambda: keras.optimizers.RMSprop(
            keras.optimizers.schedules.ExponentialDecay(0.01, decay_steps=1, decay_rate=0.5)
        ),
    ],
    ids=["adam", "sgd-nesterov", "rmsprop-schedule"],
)
def test_apply_matches_a_keras_optimizer_on_identical_variables(make_optimizer):
    initial = random_values(0)
    steps = [random_values(seed) for seed in (1, 2, 3)]
    steps.append({"out/bias": np.array([0.5], np.float32)})  # a subset of the variables
    params = Parameters(make_optimizer)
    params.initialize(initial)
    for i, grads in enumerate(steps, start=1):
        assert params.apply_gradients(grads) == i
    expected = reference_apply(initial, steps, make_optimizer)
    assert_values_close(params.values(), expected)
    assert not np.allclose(expected["dense/kernel"], initial["dense/kernel"])


def test_lr_scale_scales_one_application_only():
    initial = random_values(0)
    grads = random_values(1)
    params = Parameters(lambda: keras.optimizers.SGD(0.1))
    params.initialize(initial)
    params.apply_gradients(grads, lr_scale=0.25)
    after = {n: initial[n] - np.float32(0.025) * grads[n] for n in initial}
    assert_values_close(params.values(), after)
    params.apply_gradients(grads)
    assert_values_close(params.values(), {n: after[n] - np.float32(0.1) * grads[n] for n in after})
    assert float(params.optimizer.learning_rate) == pytest.approx(0.1)


def test_lr_scale_applies_to_a_schedule():
    initial = random_values(0)
    grads = random_values(1)
    schedule = keras.optimizers.schedules.PiecewiseConstantDecay([100], [0.2, 0.1])
    params = Parameters(lambda: keras.optimizers.SGD(schedule))
    params.initialize(initial)
    params.apply_gradients(grads, lr_scale=0.5)
    assert_values_close(
        params.values(), {n: initial[n] - np.float32(0.1) * grads[n] for n in initial}
    )


def test_unknown_names_and_shapes_are_rejected_without_changes():
    params = Parameters(lambda: keras.optimizers.SGD(0.1))
    with pytest.raises(NotInitializedError):
        params.push_gradients(random_values(1), 0)
    initial = random_values(0)
    params.initialize(initial, version=7)
    with pytest.raises(ValueError, match="nope/kernel"):
        params.apply_gradients({"nope/kernel": np.ones(2, np.float32)})
    with pytest.raises(ValueError, match=r"'out/bias' has shape \(2,\)"):
        params.push_gradients({"out/bias": np.ones(2, np.float32)}, 7)
    assert params.version == 7
    assert_values_close(params.values(), initial)


def test_async_push_applies_each_and_tracks_progress_and_state():
    initial = {**random_values(0), "bn/moving_mean": np.zeros(3, np.float32)}
    params = Parameters(
        lambda: keras.optimizers.SGD(0.1), GradientPolicy(lr_staleness_modulation=True)
    )
    params.initialize(initial, non_trainable={"bn/moving_mean"})
    assert params.non_trainable_names == ("bn/moving_mean",)
    g1, g2 = random_values(1), random_values(2)
    state = {"bn/moving_mean": np.arange(3, dtype=np.float32)}
    r1 = params.push_gradients(g1, 0, task_id=4, records_end=16, non_trainable=state)
    assert (r1.accepted, r1.applied, r1.version) == (True, True, 1)
    r2 = params.push_gradients(g2, 0, task_id=4, records_end=32)  # staleness 1: full lr
    assert (r2.accepted, r2.version) == (True, 2)
    expected = {n: initial[n] - np.float32(0.1) * g1[n] - np.float32(0.1) * g2[n] for n in g1}
    expected["bn/moving_mean"] = state["bn/moving_mean"]
    assert_values_close(params.values(), expected)
    params.push_gradients(g1, 0, task_id=5, records_end=8)  # staleness 2: lr halved
    expected = {n: expected[n] - np.float32(0.05) * g1[n] for n in g1} | {
        "bn/moving_mean": state["bn/moving_mean"]
    }
    assert_values_close(params.values(), expected)
    assert params.applied_progress([4, 5, 6]) == {4: 32, 5: 8, 6: 0}
    with pytest.raises(ValueError, match="unknown non-trainable"):
        params.push_gradients(g1, 3, non_trainable={"dense/kernel": initial["dense/kernel"]})


def test_sync_push_averages_grads_to_wait_pushes_and_bumps_version_once():
    initial = random_values(0)
    make = lambda: keras.optimizers.SGD(0.1, momentum=0.5)  # noqa: E731 (Adam ignores scale)
    params = Parameters(make, GradientPolicy(use_async=False, grads_to_wait=2))
    params.initialize(initial)
    g1, g2 = random_values(1), random_values(2)
    r1 = params.push_gradients(g1, 0, task_id=1, records_end=10)
    assert (r1.accepted, r1.applied, r1.version) == (True, False, 0)
    assert params.applied_progress([1]) == {1: 0}  # accepted, not applied yet
    assert_values_close(params.values(), initial)
    r2 = params.push_gradients(g2, 0, task_id=2, records_end=20)
    assert (r2.accepted, r2.applied, r2.version) == (True, True, 1)
    mean = {n: (g1[n] + g2[n]) / np.float32(2) for n in g1}
    assert_values_close(params.values(), reference_apply(initial, [mean], make))
    assert params.applied_progress([1, 2]) == {1: 10, 2: 20}
    stale = params.push_gradients(g1, 0, task_id=3, records_end=30)
    assert (stale.accepted, stale.version) == (False, 1)
    assert params.applied_progress([3]) == {3: 0}


def test_snapshot_is_empty_for_a_current_caller():
    params = Parameters(lambda: keras.optimizers.SGD(0.1))
    assert params.snapshot().initialized is False
    params.initialize(random_values(0))
    assert params.snapshot(known_version=0).values is None
    params.apply_gradients(random_values(1))
    snap = params.snapshot(known_version=0)
    assert snap.version == 1 and set(snap.values) == set(SHAPES)
    # a caller claiming a newer version holds another lineage (the PS restarted): full values
    assert params.snapshot(known_version=5).values is not None


def test_values_read_before_a_push_stay_as_they_were():
    """Values are views of a variable read, not copies: a later apply must not reach them."""
    params = Parameters(lambda: keras.optimizers.SGD(0.1))
    params.initialize(random_values(0))
    before = params.values()
    kept = {name: value.copy() for name, value in before.items()}
    params.push_gradients(random_values(1), 0, with_values=True)
    assert_values_close(before, kept)
    after = params.values()
    assert any(not np.array_equal(after[n], kept[n]) for n in kept)
    with pytest.raises(ValueError, match="read-only"):
        next(iter(before.values()))[...] = 0.0


class _HostSGD(keras.optimizers.SGD):
    """SGD whose update goes through a host callback, which XLA cannot compile."""

    def update_step(self, gradient, variable, learning_rate):
        gradient = tf.numpy_function(lambda g: g, [gradient], gradient.dtype, stateful=False)
        gradient = tf.ensure_shape(gradient, variable.shape)
        super().update_step(gradient, variable, learning_rate)


def test_optimizer_xla_cannot_compile_falls_back_to_a_graph_function():
    initial = random_values(0)
    grads = random_values(1)
    params = Parameters(lambda: _HostSGD(0.1, name="host_sgd"))
    params.initialize(initial)
    params.apply_gradients(grads)
    params.apply_gradients(grads)
    assert params._apply_fn.jit is False
    expected = {n: initial[n] - np.float32(0.2) * grads[n] for n in initial}
    assert_values_close(params.values(), expected)


@pytest.mark.parametrize(
    ("make_optimizer", "in_call"),
    [
        (lambda: keras.optimizers.Adam(0.01), True),
        (lambda: keras.optimizers.Adam(0.01), False),
        (lambda: _HostSGD(0.1, name="host_sgd"), True),
    ],
    ids=["xla-read-in-call", "xla-read-after", "graph-function-read-in-call"],
)
def test_a_push_answers_the_values_after_it_which_later_pushes_leave_alone(
    make_optimizer, in_call, monkeypatch
):
    """The answer, read by the applying call itself (a small model, apply_functions.py) or
    after it: every trainable value at the new version, the variables the push left alone
    too, and read-only arrays that no later push changes."""
    if not in_call:
        monkeypatch.setattr(apply_functions, "READ_IN_CALL_BYTES", 0)
    initial = random_values(0)
    first, second = random_values(1), random_values(2)
    partial = {name: first[name] for name in ("dense/kernel", "out/bias")}
    params = Parameters(make_optimizer)
    params.initialize({**initial, "fixed": np.arange(3.0)}, non_trainable=["fixed"])
    assert params._apply_fn.reads_in_call is in_call
    answer = params.push_gradients(partial, 0, with_values=True).values
    assert answer is not None and set(answer) == {*SHAPES, "fixed"}
    assert_values_close(
        {n: answer[n] for n in SHAPES}, reference_apply(initial, [partial], make_optimizer)
    )
    assert_values_close(answer, params.values())
    kept = {name: value.copy() for name, value in answer.items()}
    later = params.push_gradients(second, 1, with_values=True).values
    assert later is not None and any(not np.array_equal(later[n], kept[n]) for n in SHAPES)
    assert_values_close(answer, kept)
    with pytest.raises(ValueError, match="read-only"):
        answer["dense/kernel"][...] = 0.0
    assert params.push_gradients(second, 2).values is None  # not asked: not read


def test_apply_overhead_for_a_100k_parameter_model(capsys):
    shapes = {"h/kernel": (300, 256), "h/bias": (256,), "h2/kernel": (256, 64),
              "h2/bias": (64,), "o/kernel": (64, 10), "o/bias": (10,)}  # fmt: skip
    params = Parameters(lambda: keras.optimizers.Adam(0.001))
    params.initialize(random_values(0, shapes))
    grads = random_values(1, shapes)
    for _ in range(5):
        params.apply_gradients(grads)
    n = 100
    start = time.perf_counter()
    for _ in range(n):
        params.apply_gradients(grads)
    per_apply = (time.perf_counter() - start) / n
    with capsys.disabled():
        size = sum(int(np.prod(s)) for s in shapes.values())
        print(f"\n[ps] Adam apply, {size} params, 6 variables: {per_apply * 1e3:.2f} ms")


# -- the optimizer's application compiled before the first push (ps/apply_functions.py) -------
# It leaves every value as it was, so training afterwards equals a plain Keras optimizer's, for
# optimizers whose step on a zero gradient changes something (iterations, Ftrl's variables,
# weight decay, a schedule).

WARM_UP_OPTIMIZERS = {
    "sgd_momentum": lambda: keras.optimizers.SGD(0.1, momentum=0.9),
    "adam": lambda: keras.optimizers.Adam(0.01),
    "adamw": lambda: keras.optimizers.AdamW(0.01, weight_decay=0.1),
    "ftrl": lambda: keras.optimizers.Ftrl(0.1, l1_regularization_strength=0.01),
    "adagrad": lambda: keras.optimizers.Adagrad(0.1),
    "decayed": lambda: keras.optimizers.SGD(
        keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    ),
}


def wait_compiled(params: Parameters, timeout_s: float = 60.0) -> None:
    everything = tuple(range(len(params.variables)))
    deadline = time.monotonic() + timeout_s
    while everything not in params._apply_fn.compiled:
        assert time.monotonic() < deadline, "the application was never compiled ahead"
        time.sleep(0.01)


@pytest.mark.parametrize("name", sorted(WARM_UP_OPTIMIZERS))
def test_compiled_ahead_then_trains_like_a_plain_keras_optimizer(name):
    make = WARM_UP_OPTIMIZERS[name]
    initial = random_values(0)
    steps = [random_values(seed) for seed in (1, 2, 3)]
    params = Parameters(make)
    params.initialize(initial)
    wait_compiled(params)  # before any push
    state = params.state()
    assert state.version == 0
    assert_values_close(state.trainable, initial)
    assert int(params.optimizer.iterations.numpy()) == 0
    for grads in steps:
        params.apply_gradients(grads)
    assert_values_close(params.values(), reference_apply(initial, steps, make))


def test_a_restored_shard_compiles_ahead_and_goes_on_exactly():
    initial, steps = random_values(0), [random_values(seed) for seed in (1, 2, 3, 4)]
    first = Parameters(WARM_UP_OPTIMIZERS["adam"])
    first.initialize(initial)
    for grads in steps[:2]:
        first.apply_gradients(grads)
    restored = Parameters(WARM_UP_OPTIMIZERS["adam"])
    restored.restore(first.state())
    wait_compiled(restored)
    for grads in steps[2:]:
        restored.apply_gradients(grads)
    assert_values_close(
        restored.values(), reference_apply(initial, steps, WARM_UP_OPTIMIZERS["adam"])
    )


class _FailingSGD(keras.optimizers.SGD):
    def update_step(self, gradient, variable, learning_rate):
        raise ValueError("this optimizer cannot update")


def test_an_optimizer_that_fails_fails_the_first_push_not_the_warm_up():
    initial = random_values(0)
    params = Parameters(lambda: _FailingSGD(0.1, name="failing_sgd"))
    params.initialize(initial)
    assert_values_close(params.snapshot().values, initial)
    with pytest.raises(ValueError, match="cannot update"):
        params.apply_gradients(random_values(1))
    assert params.version == 0
    assert_values_close(params.values(), initial)
    assert np.all(np.isfinite(params.values()["dense/kernel"]))
