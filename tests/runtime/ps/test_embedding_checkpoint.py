"""Embedding tables in checkpoints: files, re-sharding into another num_ps, relaunched shards."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest

from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.master.ports import choose_port
from elasticdl.runtime.ps import checkpoint as ckpt
from elasticdl.runtime.ps.checkpoint import CheckpointError
from elasticdl.runtime.ps.client import PSClient
from elasticdl.runtime.ps.embedding_table import TableExport, TableSpec
from elasticdl.runtime.ps.parameters import Parameters
from elasticdl.runtime.ps.partition import embedding_shard
from elasticdl.runtime.ps.servicer import serve, servicer_of, start_server
from elasticdl.runtime.zoo_source import builtin_zoo_root

HOST = "127.0.0.1"
TABLES = [TableSpec("emb/user", 4), TableSpec("emb/item", 2, "random_normal", seed=5)]
IDS = np.arange(-300, 300, dtype=np.int64) * 1_000_003


def shards_with_rows(num_ps: int, optimizer=lambda: keras.optimizers.Adam(0.01)):
    """`num_ps` stores that applied the same two sparse pushes, each to its own rows."""
    rng = np.random.default_rng(0)
    pushes = [
        {
            spec.name: (IDS[::step], rng.standard_normal((IDS[::step].size, spec.dim)))
            for spec in TABLES
        }
        for step in (1, 3)
    ]
    stores = []
    for ps_id in range(num_ps):
        store = Parameters(optimizer)
        store.initialize({}, embedding_tables=TABLES)
        for version, push in enumerate(pushes):
            mine = {}
            for name, (ids, grads) in push.items():
                keep = embedding_shard(ids, num_ps) == ps_id
                mine[name] = (ids[keep], grads[keep])
            store.push_gradients({}, version, embedding_grads=mine)
        stores.append(store)
    return stores


def lookups(stores: list[Parameters], name: str, ids: np.ndarray) -> np.ndarray:
    owner = embedding_shard(ids, len(stores))
    out = np.zeros((ids.size, stores[0].embeddings._tables[name].dim), np.float32)
    for ps_id, store in enumerate(stores):
        out[owner == ps_id] = store.lookup(name, ids[owner == ps_id])
    return out


def test_tables_and_slots_survive_a_checkpoint_restored_into_another_num_ps(tmp_path):
    directory = str(tmp_path)
    two = shards_with_rows(2)
    for ps_id, store in enumerate(two):
        ckpt.save_shard(directory, 2, ps_id, 2, store.state(), "zoo.M")
    loaded = ckpt.load_all(directory)
    assert loaded.embedding_rows == {"emb/user": IDS.size, "emb/item": IDS.size}
    assert set(loaded.embeddings["emb/user"].slots) == {"m", "v", "step"}
    for num_ps in (1, 2, 3):
        restored = []
        for ps_id in range(num_ps):
            store = Parameters(lambda: keras.optimizers.Adam(0.01))
            part = ckpt.load_all(directory, only=(ps_id, num_ps))
            state = ckpt.shard_state(part, ps_id, num_ps)
            assert state.embedding_rows == sum(
                int((embedding_shard(IDS, num_ps) == ps_id).sum()) for _ in TABLES
            )
            store.restore(state, directory)
            store.initialize({}, embedding_tables=TABLES)  # agrees
            restored.append(store)
        fresh = np.arange(10**6, 10**6 + 50)  # never touched: recreated identically
        for spec in TABLES:
            for ids in (IDS, fresh):
                np.testing.assert_array_equal(
                    lookups(restored, spec.name, ids), lookups(two, spec.name, ids)
                )
    # the slots came back too (restored is the 3-shard set): one more identical push to the
    # original two shards and to the three restored ones gives identical rows
    ids, grads = IDS[:40], np.ones((40, 4), np.float32)
    for stores in (restored, two):
        owner = embedding_shard(ids, len(stores))
        for ps_id, store in enumerate(stores):
            mine = owner == ps_id
            store.push_gradients({}, 2, embedding_grads={"emb/user": (ids[mine], grads[mine])})
    moved = lookups(two, "emb/user", ids)
    np.testing.assert_array_equal(lookups(restored, "emb/user", ids), moved)
    assert not np.array_equal(moved, lookups(shards_with_rows(2), "emb/user", ids))


def test_a_table_with_rows_on_one_shard_only_restores(tmp_path):
    """A two-value column's rows may all hash to one shard: the other shard's file holds the
    table empty. Its slots are allocated from the start (so a row pulled but not yet updated
    is checkpointed with its slots too), and the checkpoint merges and restores either way."""
    directory = str(tmp_path)
    ids = IDS[embedding_shard(IDS, 2) == 0][:5]
    stores = []
    for _ in range(2):
        store = Parameters(lambda: keras.optimizers.Adam(0.01))
        store.initialize({}, embedding_tables=TABLES)
        stores.append(store)
    grads = {"emb/user": (ids, np.ones((5, 4), np.float32))}
    stores[0].push_gradients({}, 0, embedding_grads=grads)
    stores[0].lookup("emb/item", ids)  # rows, no update yet
    stores[1].push_gradients({}, 0)
    for ps_id, store in enumerate(stores):
        exports = store.state().embeddings
        assert all(set(e.slots) == {"m", "v", "step"} for e in exports.values())
        ckpt.save_shard(directory, 1, ps_id, 2, store.state(), "zoo.M")
    assert ckpt.load_all(directory).embedding_rows == {"emb/user": 5, "emb/item": 5}

    # a file written before slots came with the table: the empty shard has none
    old = str(tmp_path / "old")
    empty = stores[1].state()
    empty.embeddings = {
        n: TableExport(e.spec, e.ids[:0], e.rows[:0], {}) for n, e in empty.embeddings.items()
    }
    ckpt.save_shard(old, 1, 1, 2, empty, "zoo.M")
    ckpt.save_shard(old, 1, 0, 2, stores[0].state(), "zoo.M")
    for num_ps in (1, 2):
        state = ckpt.shard_state(ckpt.load_all(old, 1, only=(0, num_ps)), 0, num_ps)
        assert set(state.embeddings["emb/user"].slots) == {"m", "v", "step"}
        restored = Parameters(lambda: keras.optimizers.Adam(0.01))
        restored.restore(state, directory)
        np.testing.assert_array_equal(
            restored.lookup("emb/user", ids), stores[0].lookup("emb/user", ids)
        )


def test_a_shard_file_with_rows_of_another_shard_is_refused(tmp_path):
    directory = str(tmp_path)
    one = shards_with_rows(1)[0].state()
    for ps_id in range(2):
        ckpt.save_shard(directory, 1, ps_id, 2, one)  # every row in both files
    with pytest.raises(CheckpointError, match="embedding rows of other shards"):
        ckpt.load_all(directory)


def test_a_dense_only_checkpoint_has_no_table_entries(tmp_path):
    store = Parameters(lambda: keras.optimizers.SGD(0.1))
    store.initialize({"w": np.ones(2, np.float32)})
    path = ckpt.save_shard(str(tmp_path), 0, 0, 1, store.state())
    with np.load(path) as npz:
        assert "embedding_tables" not in bytes(npz["__header__"]).decode()
    assert ckpt.load_all(str(tmp_path)).embeddings == {}


# -- real servers over gRPC -------------------------------------------------------------------


def job_config(num_ps: int, **overrides) -> JobConfig:
    return JobConfig(
        job_name="emb-ckpt-test",
        model_def="regressor.DNN",
        model_zoo_root=str(builtin_zoo_root()),
        params="hidden_units=[8, 4], learning_rate=0.05",
        num_ps=num_ps,
        **overrides,
    )


def wait_until(condition, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(0.02)


def test_relaunched_shard_and_a_job_with_three_shards_get_the_checkpointed_rows(tmp_path, caplog):
    directory = str(tmp_path / "ckpt")
    config = job_config(2, checkpoint_dir=directory, checkpoint_steps=2, keep_checkpoint_max=2)
    ports = [choose_port(HOST), choose_port(HOST)]
    servicers = [servicer_of(config, ps_id) for ps_id in range(2)]
    servers = [start_server(s, port)[0] for s, port in zip(servicers, ports, strict=True)]
    client = PSClient([f"{HOST}:{p}" for p in ports], timeout_s=20)
    rng = np.random.default_rng(3)
    try:
        client.push_model({}, embedding_tables=TABLES)
        for version in range(4):
            ids = rng.choice(IDS, 200)
            grads = {s.name: (ids, rng.standard_normal((ids.size, s.dim))) for s in TABLES}
            assert client.push_gradients({}, version, embedding_grads=grads).accepted
        wait_until(lambda: ckpt.valid_versions(directory) == [2, 4], "checkpoints 2 and 4")
        at_4 = {s.name: client.pull_embedding_vectors(s.name, IDS) for s in TABLES}
        # version 5 is not checkpointed: a relaunched shard 1 comes back at version 4
        ids = IDS[:100]
        client.push_gradients({}, 4, embedding_grads={"emb/user": (ids, np.ones((100, 4)))})
        assert all(s.writer.flush(10) for s in servicers)
        servers[1].stop(None).wait()
        servicers[1].close(10)
        with caplog.at_level(logging.INFO, logger="elasticdl.runtime.ps.servicer"):
            servers[1] = serve(config, 1, ports[1])
        restored = [
            r.getMessage() for r in caplog.records if "restored version 4" in r.getMessage()
        ]
        held = ckpt.shard_state(ckpt.load_all(directory, 4), 1, 2).embedding_rows
        assert held > 0 and restored and f"{held} embedding rows in 2 tables" in restored[0]
        wait_until(lambda: client.pull().initialized, "the relaunched shard")
        reports = client.restored_embedding_rows()
        assert reports[0] == (-1, {}) and reports[1][0] == 4
        assert sum(reports[1][1].values()) == held and set(reports[1][1]) == {
            "emb/user",
            "emb/item",
        }
        after = client.pull_embedding_vectors("emb/user", ids)
        on_1 = embedding_shard(ids, 2) == 1
        np.testing.assert_array_equal(after[on_1], at_4["emb/user"][:100][on_1])
        assert not np.array_equal(after[~on_1], at_4["emb/user"][:100][~on_1])  # shard 0 kept v5
    finally:
        client.close()
        for server in servers:
            server.stop(None)
        for servicer in servicers:
            servicer.close(10)

    # a new job of three shards from that checkpoint: identical lookups, tables declared
    init = job_config(3, checkpoint_dir_for_init=directory)
    ports = [choose_port(HOST) for _ in range(3)]
    servers = [serve(init, ps_id, port) for ps_id, port in enumerate(ports)]
    try:
        with PSClient([f"{HOST}:{p}" for p in ports], timeout_s=20) as three:
            for spec in TABLES:
                np.testing.assert_array_equal(
                    three.pull_embedding_vectors(spec.name, IDS), at_4[spec.name]
                )
            three.push_model({}, embedding_tables=TABLES)  # the workers' push agrees
    finally:
        for server in servers:
            server.stop(None)


def test_a_sigkilled_ps_process_comes_back_with_its_rows_and_slots(tmp_path):
    directory = str(tmp_path / "ckpt")
    config = job_config(1, checkpoint_dir=directory, checkpoint_steps=1).write(tmp_path / "j.json")
    port = choose_port(HOST)
    command = [sys.executable, "-P", "-m", "elasticdl.runtime.ps.main", "--config", str(config),
               "--ps_id", "0", "--port", str(port)]  # fmt: skip

    def launch() -> tuple[subprocess.Popen, list[str]]:
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (line := process.stderr.readline()):
            lines.append(line)
            if "listening on" in line:
                return process, lines
        process.kill()
        raise AssertionError(f"the PS did not start: {''.join(lines)}")

    ids = IDS[:50]
    process, _ = launch()
    try:
        with PSClient([f"{HOST}:{port}"], timeout_s=20) as client:
            client.push_model({}, embedding_tables=TABLES)
            for version in range(3):
                grads = {"emb/user": (ids, np.full((50, 4), version + 1.0))}
                assert client.push_gradients({}, version, embedding_grads=grads).accepted
            wait_until(lambda: ckpt.latest_valid_version(directory) == 3, "checkpoint 3")
            trained = client.pull_embedding_vectors("emb/user", ids)
            process.kill()  # SIGKILL: no goodbye
            process.wait(10)
            process, lines = launch()
            assert any("restored version 3" in x and "50 embedding rows" in x for x in lines)
            np.testing.assert_array_equal(client.pull_embedding_vectors("emb/user", ids), trained)
            # Adam's per-row state came back: the next step is the 4th step of each row
            client.push_gradients({}, 3, embedding_grads={"emb/user": (ids, np.ones((50, 4)))})
            state = ckpt.load_all(directory, 3).embeddings["emb/user"]
            assert (state.slots["step"] == 3).all()
            wait_until(lambda: ckpt.latest_valid_version(directory) == 4, "checkpoint 4")
            assert (ckpt.load_all(directory).embeddings["emb/user"].slots["step"] == 4).all()
    finally:
        process.kill()
        process.wait(10)
