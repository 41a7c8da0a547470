"""One round trip per minibatch (a push that answers with fresh parameters) and the async
staleness rule, over real gRPC on 127.0.0.1 with a real Keras optimizer on the PS."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest

from elasticdl.runtime.ps.client import PSClient
from elasticdl.runtime.ps.parameters import (
    DEFAULT_STALENESS_TOLERANCE,
    GradientPolicy,
    Parameters,
    staleness_lr_scale,
)
from elasticdl.runtime.ps.servicer import ParameterServerServicer, start_server


@pytest.mark.parametrize(
    ("staleness", "tolerance", "scale"),
    [
        (0, 4, 1.0),
        (1, 4, 1.0),  # one worker overlapping its push with the next minibatch
        (4, 4, 1.0),
        (5, 4, 0.8),
        (8, 4, 0.5),
        (40, 4, 0.1),
        (-3, 4, 1.0),  # ahead of a shard restored from a checkpoint: counts as current
        (2, 1, 0.5),  # tolerance 1: the classic 1 / staleness
        (1, 1, 1.0),
        (100, 0, 1.0),  # tolerance 0: no rule
    ],
)
def test_staleness_lr_scale_table(staleness, tolerance, scale):
    assert staleness_lr_scale(staleness, tolerance) == pytest.approx(scale)


def test_rate_times_staleness_never_exceeds_the_tolerance():
    for staleness in range(1, 200):
        assert staleness * staleness_lr_scale(staleness, 4) <= 4 + 1e-9


def test_the_async_policy_applies_the_rule_by_default():
    g = {"w": np.ones(2, np.float32)}
    policy = GradientPolicy()
    assert policy.staleness_tolerance == DEFAULT_STALENESS_TOLERANCE
    decision = policy.offer(18, 10, g, lr_scale=0.5)
    assert decision.staleness == 8
    assert decision.lr_scale == pytest.approx(0.5 * DEFAULT_STALENESS_TOLERANCE / 8)
    assert GradientPolicy(staleness_tolerance=0).offer(18, 10, g).lr_scale == 1.0
    with pytest.raises(ValueError, match="staleness_tolerance"):
        GradientPolicy(staleness_tolerance=-1)


def serve_one(policy: GradientPolicy, lr: float = 0.1):
    parameters = Parameters(lambda: keras.optimizers.SGD(lr), policy)
    server, port = start_server(ParameterServerServicer(parameters), 0)
    client = PSClient([f"127.0.0.1:{port}"], timeout_s=20)
    client.wait_ready(10)
    return server, client


def test_a_push_answers_with_the_parameters_when_the_version_moved():
    server, client = serve_one(GradientPolicy())
    try:
        client.push_model({"w": np.zeros(3, np.float32)})
        grad = {"w": np.ones(3, np.float32)}
        plain = client.push_gradients(grad, 0)
        assert plain.accepted and plain.versions == [1] and plain.values == {}
        fresh = client.push_gradients(grad, 1, return_parameters=True)
        assert fresh.versions == [2] and fresh.updated == [0] and fresh.staleness == [0]
        np.testing.assert_allclose(fresh.values["w"], client.pull(-1).values["w"])
        np.testing.assert_allclose(fresh.values["w"], np.full(3, -0.2, np.float32))
        behind = client.push_gradients(grad, 0, return_parameters=True)
        assert behind.staleness == [2] and behind.versions == [3]
    finally:
        client.close()
        server.stop(None)


def test_sync_pushes_answer_only_when_the_caller_is_behind():
    server, client = serve_one(GradientPolicy(use_async=False, grads_to_wait=2))
    try:
        client.push_model({"w": np.zeros(3, np.float32)})
        grad = {"w": np.ones(3, np.float32)}
        waiting = client.push_gradients(grad, 0, return_parameters=True)
        assert waiting.accepted and waiting.versions == [0] and waiting.values == {}
        released = client.push_gradients(grad, 0, return_parameters=True)
        assert released.versions == [1]
        np.testing.assert_allclose(released.values["w"], np.full(3, -0.1, np.float32))
        stale = client.push_gradients(grad, 0, return_parameters=True)
        assert not stale.accepted and stale.versions == [1]
        np.testing.assert_allclose(stale.values["w"], released.values["w"])
    finally:
        client.close()
        server.stop(None)


def async_workers_loss(num_workers: int, tolerance: int, pushes: int = 320) -> float:
    """Linear least squares trained by `num_workers` async workers taking turns (each computes
    on the parameters its previous push answered with, so every push is num_workers - 1
    versions behind: the steady state of equally fast workers, with no timing involved);
    the final mean squared error on all the data."""
    rng = np.random.default_rng(0)
    features = rng.standard_normal((1024, 8)).astype(np.float32)
    labels = features @ rng.standard_normal(8).astype(np.float32)
    labels += 0.1 * rng.standard_normal(1024).astype(np.float32)
    server, client = serve_one(GradientPolicy(staleness_tolerance=tolerance), lr=0.1)
    try:
        client.push_model({"w": np.zeros(8, np.float32)})
        replicas = [(np.zeros(8, np.float32), 0)] * num_workers
        for step in range(pushes):
            worker = step % num_workers
            w, version = replicas[worker]
            rows = rng.integers(0, len(labels), 64)
            x, y = features[rows], labels[rows]
            grad = 2.0 * x.T @ (x @ w - y) / len(rows)
            result = client.push_gradients({"w": grad}, version, return_parameters=True)
            replicas[worker] = (np.array(result.values["w"]), result.versions[0])
        w = client.pull(-1).values["w"]
        return float(np.mean((features @ w - labels) ** 2))
    finally:
        client.close()
        server.stop(None)


def test_eight_async_workers_diverge_without_the_rule_and_converge_with_it():
    """Issue 13 section 5: more async workers must not silently ruin a model that trains with
    a few. Same data, rate and number of pushes; the noise floor is 0.01."""
    assert async_workers_loss(1, DEFAULT_STALENESS_TOLERANCE) < 0.02
    assert async_workers_loss(8, 0) > 10.0  # no rule: 7 versions behind at the full rate
    assert async_workers_loss(8, DEFAULT_STALENESS_TOLERANCE) < 0.02
