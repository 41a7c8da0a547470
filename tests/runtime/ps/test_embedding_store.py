"""A shard's tables inside `Parameters`: learning rates, policy, declarations (no gRPC)."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest

from elasticdl.runtime.ps.embedding_table import TableSpec
from elasticdl.runtime.ps.parameters import GradientPolicy, Parameters

TABLE = TableSpec("emb", 2, "zeros")
ONE = (np.array([7]), np.ones((1, 2), np.float32))


def schedule_sgd():
    lr = keras.optimizers.schedules.ExponentialDecay(1.0, decay_steps=1, decay_rate=0.5)
    return keras.optimizers.SGD(lr)


@pytest.mark.parametrize("with_dense", [True, False])
def test_rows_follow_the_schedule_and_the_push_scale(with_dense):
    """lr(iterations) * scale: 1.0, then 0.5 at scale 0.5, then 0.25 * staleness 1/2."""
    store = Parameters(schedule_sgd, GradientPolicy(lr_staleness_modulation=True))
    dense = {"w": np.zeros(2, np.float32)} if with_dense else {}
    store.initialize(dense, embedding_tables=[TABLE])
    grads = {"w": np.ones(2, np.float32)} if with_dense else {}
    store.push_gradients(grads, 0, embedding_grads={"emb": ONE})
    np.testing.assert_allclose(store.lookup("emb", np.array([7])), [[-1, -1]])
    store.push_gradients(grads, 1, embedding_grads={"emb": ONE}, lr_scale=0.5)
    np.testing.assert_allclose(store.lookup("emb", np.array([7])), [[-1.25, -1.25]])
    store.push_gradients(grads, 0, embedding_grads={"emb": ONE})  # 2 versions stale
    np.testing.assert_allclose(store.lookup("emb", np.array([7])), [[-1.375, -1.375]])
    if with_dense:  # the dense variable saw the same learning rates
        np.testing.assert_allclose(store.values(["w"])["w"], [-1.375, -1.375])


def test_an_optimizer_without_a_sparse_twin_is_refused_when_tables_are_declared():
    store = Parameters(lambda: keras.optimizers.Adamax())
    with pytest.raises(ValueError, match="Adamax is not supported for embedding tables"):
        store.initialize({}, embedding_tables=[TABLE])
    assert not store.initialized
    store.initialize({"w": np.zeros(2, np.float32)})  # dense models keep working


def test_a_rejected_push_changes_no_row():
    store = Parameters(
        lambda: keras.optimizers.SGD(1.0), GradientPolicy(use_async=False, grads_to_wait=1)
    )
    store.initialize({}, embedding_tables=[TABLE])
    assert store.push_gradients({}, 0, embedding_grads={"emb": ONE}).applied
    stale = store.push_gradients({}, 0, embedding_grads={"emb": ONE})
    assert not stale.accepted and store.version == 1
    np.testing.assert_allclose(store.lookup("emb", np.array([7])), [[-1, -1]])
    with pytest.raises(ValueError, match="no embedding table named 'other'"):
        store.push_gradients({}, 1, embedding_grads={"other": ONE})
    assert store.version == 1


def test_rows_created_after_a_restore_start_from_the_optimizers_initial_slots():
    """Adagrad's accumulator starts at 0.1 also for rows first touched after a restore."""
    make = lambda: keras.optimizers.Adagrad(0.1)  # noqa: E731
    trained = Parameters(make)
    trained.initialize({}, embedding_tables=[TABLE])
    trained.push_gradients({}, 0, embedding_grads={"emb": ONE})
    restored = Parameters(make)
    restored.restore(trained.state())
    new = (np.array([8]), np.ones((1, 2), np.float32))
    restored.lookup("emb", new[0])  # created before any apply
    for store in (trained, restored):
        store.push_gradients({}, 1, embedding_grads={"emb": new})
    np.testing.assert_array_equal(restored.lookup("emb", new[0]), trained.lookup("emb", new[0]))
    np.testing.assert_array_equal(restored.lookup("emb", ONE[0]), trained.lookup("emb", ONE[0]))


def test_reading_rows_is_paged_by_bytes(monkeypatch):
    from elasticdl.runtime.ps import embeddings

    monkeypatch.setattr(embeddings, "READ_PAGE_BYTES", 64)  # 8 rows of dim 2
    store = Parameters(lambda: keras.optimizers.SGD(0.1))
    store.initialize({}, embedding_tables=[TABLE])
    store.lookup("emb", np.arange(20))
    ids, rows, total = store.embeddings.read("emb", 16, 100)
    assert (ids.tolist(), rows.shape, total) == ([16, 17, 18, 19], (4, 2), 20)
    ids, _, _ = store.embeddings.read("emb", 0, 100)
    assert ids.tolist() == list(range(8))
