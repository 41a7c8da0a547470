"""--jit_compile: the worker's step compiled by XLA computes what the plain step computes; a
step XLA refuses runs without it from its first call; auto decides as Keras does; and a job
trains with it (runtime/worker/dense.py)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.worker.dense import XlaFirst, dense_functions, step_uses_xla


@pytest.mark.parametrize(
    ("setting", "accelerators", "xla"),
    [
        ("auto", 0, False),  # Keras's jit_compile="auto" on a CPU-only machine
        ("auto", 1, True),
        ("true", 0, True),
        ("false", 2, False),
    ],
)
def test_when_the_step_uses_xla(setting: str, accelerators: int, xla: bool) -> None:
    assert step_uses_xla(setting, accelerators) is xla


class AsText(tf.keras.layers.Layer):
    """A number through its decimal text and back: string ops, which XLA cannot compile."""

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return tf.strings.to_number(tf.strings.as_string(x))


def functions(model: tf.keras.Model, xla: bool) -> tuple[object, list[np.ndarray]]:
    model.build((None, 3))
    variables = list(model.trainable_variables)
    loss = tf.keras.losses.MeanSquaredError()
    made = dense_functions(model, loss, variables, [], xla)
    return made.step, [v.numpy() for v in variables]


def run(step: object, values: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
    features = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    labels = np.ones([4, 1], np.float32)
    loss, gradients, _ = step(values, features, labels)
    return float(loss), [np.asarray(g) for g in gradients]


def dense_model(*extra: tf.keras.layers.Layer) -> tf.keras.Model:
    tf.keras.utils.set_random_seed(3)
    return tf.keras.Sequential([*extra, tf.keras.layers.Dense(4), tf.keras.layers.Dense(1)])


def test_the_xla_step_computes_what_the_plain_step_computes() -> None:
    xla_step, values = functions(dense_model(), xla=True)
    plain_step, _ = functions(dense_model(), xla=False)
    assert isinstance(xla_step, XlaFirst) and not isinstance(plain_step, XlaFirst)
    xla_loss, xla_grads = run(xla_step, values)
    plain_loss, plain_grads = run(plain_step, values)
    assert xla_step.uses_xla
    assert xla_loss == pytest.approx(plain_loss, rel=1e-5)
    for a, b in zip(xla_grads, plain_grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_a_step_xla_refuses_runs_without_it(caplog: pytest.LogCaptureFixture) -> None:
    step, values = functions(dense_model(AsText()), xla=True)
    plain_step, _ = functions(dense_model(AsText()), xla=False)
    with caplog.at_level(logging.WARNING, logger="elasticdl.worker"):
        loss, grads = run(step, values)
    assert not step.uses_xla
    assert "does not compile with XLA" in caplog.text
    expected_loss, expected_grads = run(plain_step, values)
    assert loss == pytest.approx(expected_loss, rel=1e-6)
    for a, b in zip(grads, expected_grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert run(step, values)[0] == pytest.approx(loss, rel=1e-6)  # and stays without it


def test_any_error_of_the_first_compiled_call_falls_back() -> None:
    """Such as a GPU image without CUDA's libdevice, which XLA needs and the plain step not."""

    def xla(*args: object) -> str:
        raise tf.errors.InternalError(None, None, "libdevice not found")

    step = XlaFirst(xla, lambda *args: "plain")  # type: ignore[arg-type]
    assert step() == "plain" and not step.uses_xla


def test_an_error_after_the_step_compiled_is_raised_not_taken_for_a_refusal() -> None:
    calls: list[str] = []

    def xla(*args: object) -> str:
        calls.append("xla")
        if len(calls) > 1:
            raise tf.errors.InvalidArgumentError(None, None, "a NaN in the user's check")
        return "xla"

    step = XlaFirst(xla, lambda *args: "plain")  # type: ignore[arg-type]
    assert step() == "xla"
    with pytest.raises(tf.errors.InvalidArgumentError, match="NaN"):
        step()
    assert step.uses_xla


@pytest.mark.slow
def test_a_job_trains_with_its_step_compiled_by_xla(tmp_path, monkeypatch) -> None:
    data, logs = tmp_path / "data", tmp_path / "logs"
    gen.generate("regression", str(data), 1024, records_per_file=1024)
    monkeypatch.chdir(tmp_path)
    result = elasticdl.train(
        model_def="regressor.DNN",
        params="hidden_units=[16], learning_rate=0.05",
        data=str(data),
        validation_data=str(data),
        output="model",
        log_dir=str(logs),
        num_workers=1,
        minibatch_size=32,
        num_epochs=2,
        jit_compile="true",
    )
    assert result.succeeded, result.error
    worker_log = (logs / "worker0.log").read_text()
    assert "the training step is compiled with XLA" in worker_log
    assert "does not compile with XLA" not in worker_log
    first, last = (epoch["loss"] for epoch in result.report["history"]["epochs"])
    assert last < 0.2 * first, result.report["history"]
    assert result.report["history"]["evaluation"][-1]["metrics"]["mse"] < 2 * last
