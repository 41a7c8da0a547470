"""Embedding tables and sparse optimizers on their own: pure numpy, no processes."""

from __future__ import annotations

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from elasticdl.runtime.ps import sparse_optimizers as so
from elasticdl.runtime.ps.embedding_table import EmbeddingTable
from elasticdl.runtime.ps.initializers import parse_initializer
from elasticdl.runtime.ps.partition import embedding_shard

EXTREME_IDS = np.array([0, 1, -1, 2**63 - 1, -(2**63), 2**40 + 7, -12345], dtype=np.int64)


def test_rows_are_a_function_of_table_seed_and_id_only():
    rng = np.random.default_rng(1)
    ids = np.concatenate([EXTREME_IDS, rng.integers(-(2**62), 2**62, 3000)])
    first = EmbeddingTable("user", 8)
    rows = first.lookup(ids)
    # another table instance, other order and batches: the same rows
    second = EmbeddingTable("user", 8)
    order = rng.permutation(ids.size)
    for chunk in np.array_split(order, 7):
        np.testing.assert_array_equal(second.lookup(ids[chunk]), rows[chunk])
    np.testing.assert_array_equal(second.lookup(ids), rows)
    assert len(first) == len(second) == np.unique(ids).size
    # another name or seed: other rows
    assert not np.array_equal(EmbeddingTable("item", 8).lookup(ids), rows)
    assert not np.array_equal(EmbeddingTable("user", 8, seed=1).lookup(ids), rows)


def test_lookup_handles_duplicates_growth_and_keeps_rows():
    table = EmbeddingTable("t", 4)
    ids = np.arange(0, 200_000, 3, dtype=np.int64)
    rows = table.lookup(ids)
    assert rows.shape == (ids.size, 4) and rows.dtype == np.float32
    again = table.lookup(np.concatenate([ids[::-1], ids[:10]]))
    np.testing.assert_array_equal(again[: ids.size], rows[::-1])
    np.testing.assert_array_equal(again[ids.size :], rows[:10])
    assert len(table) == ids.size
    assert table.lookup(np.array([], dtype=np.int64)).shape == (0, 4)
    assert (table.row_indices(np.array([1, 3]), create=False) == [-1, 1]).all()
    with pytest.raises(ValueError, match="must be integers"):
        table.lookup(np.array([1.5]))


@pytest.mark.parametrize(
    ("spec", "low", "high", "mean", "std"),
    [
        ("uniform", -0.05, 0.05, 0.0, 0.05 / np.sqrt(3)),
        ("random_uniform", -0.05, 0.05, 0.0, 0.05 / np.sqrt(3)),
        ("normal", -1.0, 1.0, 0.0, 0.05),
        ("random_normal", -1.0, 1.0, 0.0, 0.05),
        ("truncated_normal", -0.1, 0.1, 0.0, 0.05 * 0.880),
        ("zeros", 0.0, 0.0, 0.0, 0.0),
        ("ones", 1.0, 1.0, 1.0, 0.0),
        (
            json.dumps({"class_name": "RandomUniform", "config": {"minval": 1, "maxval": 2}}),
            1.0,
            2.0,
            1.5,
            1 / np.sqrt(12),
        ),
        (json.dumps({"class_name": "Constant", "config": {"value": 3}}), 3.0, 3.0, 3.0, 0.0),
    ],
)
def test_initializers_follow_keras_distributions(spec, low, high, mean, std):
    rows = EmbeddingTable("t", 16, spec).lookup(np.arange(20_000))
    assert rows.min() >= low and rows.max() <= high
    assert abs(rows.mean() - mean) < 0.01 * max(std, 0.1) + 1e-6
    assert abs(rows.std() - std) < 0.02 * max(std, 1e-3) + 1e-6


def test_unknown_initializer_is_one_clear_line():
    with pytest.raises(ValueError, match="glorot_uniform.*use uniform"):
        parse_initializer("glorot_uniform")


def test_apply_sums_duplicate_ids_and_creates_missing_rows():
    table = EmbeddingTable("t", 2, "zeros")
    sgd = so.SGD(learning_rate=0.5)
    table.apply(np.array([3, 9, 3]), np.array([[1, 2], [4, 4], [1, 0]], np.float32), sgd)
    np.testing.assert_allclose(table.lookup(np.array([3, 9])), [[-1, -1], [-2, -2]])
    with pytest.raises(ValueError, match="gradients of shape"):
        table.apply(np.array([1]), np.ones((1, 3), np.float32), sgd)


def test_export_and_load_round_trip_rows_and_slots():
    table = EmbeddingTable("t", 3)
    adam = so.Adam(learning_rate=0.1)
    ids = np.array([5, -7, 2**50])
    table.apply(ids, np.ones((3, 3), np.float32), adam)
    exported = table.export()
    assert set(exported.slots) == {"m", "v", "step"}
    copy = EmbeddingTable("t", 3)
    copy.load(exported.ids, exported.rows, exported.slots)
    np.testing.assert_array_equal(copy.lookup(ids), table.lookup(ids))
    table.apply(ids, np.ones((3, 3), np.float32), adam)
    copy.apply(ids, np.ones((3, 3), np.float32), adam)
    np.testing.assert_array_equal(copy.lookup(ids), table.lookup(ids))


def keras_optimizers():
    import keras

    return [
        ("sgd", lambda: keras.optimizers.SGD(0.1)),
        ("momentum", lambda: keras.optimizers.SGD(0.1, momentum=0.9)),
        ("nesterov", lambda: keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True)),
        ("adam", lambda: keras.optimizers.Adam(0.01)),
        ("adam_amsgrad", lambda: keras.optimizers.Adam(0.01, beta_1=0.8, amsgrad=True)),
        ("adagrad", lambda: keras.optimizers.Adagrad(0.1)),
        ("rmsprop", lambda: keras.optimizers.RMSprop(0.01)),
        ("rmsprop_centered", lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True)),
        ("clipvalue", lambda: keras.optimizers.SGD(0.1, clipvalue=0.3)),
    ]


@pytest.mark.parametrize("case", range(9))
def test_sparse_optimizers_equal_keras_on_the_touched_rows(case):
    """Each row behaves like a Keras optimizer stepping its own variable when touched."""
    import keras

    _, make = keras_optimizers()[case]
    rng = np.random.default_rng(case)
    table = EmbeddingTable("t", 4, "random_normal")
    sparse = so.from_keras(make())
    ids = np.array([11, 22, 33])
    initial = table.lookup(ids)
    # rows 11 and 22 are touched at every step, row 33 at steps 0 and 3 only
    steps = [ids, ids[:2], ids[:2], ids]
    grads = [rng.standard_normal((len(s), 4)).astype(np.float32) for s in steps]
    for step_ids, g in zip(steps, grads, strict=True):
        table.apply(step_ids, g, sparse)
    for row, row_id in enumerate(ids):
        variable = keras.Variable(initial[row : row + 1])
        optimizer = make()
        for step_ids, g in zip(steps, grads, strict=True):
            hit = np.flatnonzero(step_ids == row_id)
            if hit.size:
                optimizer.apply([g[hit]], [variable])
        np.testing.assert_allclose(
            table.lookup(ids[row : row + 1]), variable.numpy(), rtol=2e-6, atol=1e-7
        )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda k: k.optimizers.Adamax(), "Adamax is not supported"),
        (lambda k: k.optimizers.Adam(weight_decay=0.01), "weight_decay"),
        (lambda k: k.optimizers.SGD(clipnorm=1.0), "clipnorm"),
    ],
)
def test_unsupported_optimizers_are_refused_in_one_line(make, message):
    import keras

    with pytest.raises(ValueError, match=message):
        so.from_keras(make(keras))


def test_embedding_shard_is_stable_and_balanced():
    # golden values: a change of the hash would move every row of existing checkpoints
    assert embedding_shard(EXTREME_IDS, 3).tolist() == GOLDEN_SHARDS
    ids = np.arange(-50_000, 50_000)
    for num_ps in (1, 2, 3, 5):
        owner = embedding_shard(ids, num_ps)
        counts = np.bincount(owner, minlength=num_ps)
        assert counts.sum() == ids.size and counts.min() > 0.95 * ids.size / num_ps
    with pytest.raises(ValueError, match="num_ps"):
        embedding_shard(ids, 0)


GOLDEN_SHARDS = [1, 0, 1, 2, 0, 2, 1]


def test_random_operations_match_a_dict_of_rows():
    """Growth, collisions, duplicates and extreme ids against a plain dict reference (SGD)."""
    rng = np.random.default_rng(7)
    table = EmbeddingTable("ref", 3, "random_uniform")
    sgd = so.SGD(learning_rate=0.5)
    reference: dict[int, np.ndarray] = {}
    pool = np.concatenate([EXTREME_IDS, rng.integers(-(2**63), 2**63 - 1, 4000, dtype=np.int64)])
    fresh = EmbeddingTable("ref", 3, "random_uniform")  # initial rows, never updated
    for _ in range(60):
        ids = rng.choice(pool, size=int(rng.integers(0, 300)))
        if rng.random() < 0.5:
            rows = table.lookup(ids)
            for i, row_id in enumerate(ids.tolist()):
                reference.setdefault(row_id, fresh.lookup(np.array([row_id]))[0].copy())
                np.testing.assert_array_equal(rows[i], reference[row_id])
        else:
            grads = rng.standard_normal((ids.size, 3)).astype(np.float32)
            table.apply(ids, grads, sgd)
            summed: dict[int, np.ndarray] = {}
            for row_id, grad in zip(ids.tolist(), grads, strict=True):
                summed[row_id] = summed.get(row_id, 0) + grad
            for row_id, grad in summed.items():
                start = reference.get(row_id, fresh.lookup(np.array([row_id]))[0])
                reference[row_id] = start - np.float32(0.5) * grad.astype(np.float32)
    assert len(table) == len(reference)
    ids = np.array(sorted(reference), dtype=np.int64)
    np.testing.assert_allclose(table.lookup(ids), np.stack([reference[i] for i in ids]), rtol=1e-6)
