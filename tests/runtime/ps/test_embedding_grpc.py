"""Embedding tables through real gRPC on 127.0.0.1: in-process shards and real PS processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import grpc
import keras
import numpy as np
import pytest

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.master.ports import choose_port
from elasticdl.runtime.ps.client import PSClient, PSError
from elasticdl.runtime.ps.embedding_table import EmbeddingTable, TableSpec
from elasticdl.runtime.ps.parameters import GradientPolicy, Parameters
from elasticdl.runtime.ps.partition import embedding_shard
from elasticdl.runtime.ps.servicer import ParameterServerServicer, serve, start_server
from elasticdl.runtime.tensor_codec import encode
from elasticdl.runtime.zoo_source import builtin_zoo_root

HOST = "127.0.0.1"


def job_config(num_ps: int = 2, **overrides) -> JobConfig:
    """regressor.DNN: its optimizer is Adam(0.05)."""
    return JobConfig(
        job_name="embedding-test",
        model_def="regressor.DNN",
        model_zoo_root=str(builtin_zoo_root()),
        params="hidden_units=[8, 4], learning_rate=0.05",
        num_ps=num_ps,
        **overrides,
    )


def start_shards(config: JobConfig) -> tuple[list[grpc.Server], list[str]]:
    servers, addresses = [], []
    for ps_id in range(config.num_ps):
        port = choose_port(HOST)
        servers.append(serve(config, ps_id, port))
        addresses.append(f"{HOST}:{port}")
    return servers, addresses


TABLES = [TableSpec("emb/user", 4), TableSpec("emb/item", 3, "zeros", seed=2)]


def in_process_shards(num_ps: int, optimizer, **policy):
    servers, addresses = [], []
    for ps_id in range(num_ps):
        params = Parameters(optimizer, GradientPolicy(**policy))
        server, port = start_server(ParameterServerServicer(params, ps_id, num_ps), 0)
        servers.append(server)
        addresses.append(f"{HOST}:{port}")
    return servers, addresses


@pytest.fixture
def two_shards():
    servers, addresses = in_process_shards(2, lambda: keras.optimizers.SGD(0.5))
    client = PSClient(addresses, timeout_s=20)
    client.wait_ready(10)
    yield client, addresses
    client.close()
    for server in servers:
        server.stop(None)


def test_pull_returns_rows_in_the_order_asked_created_deterministically(two_shards):
    client, addresses = two_shards
    client.push_model({}, embedding_tables=TABLES)
    client.push_model({}, embedding_tables=TABLES)  # a racing worker: same tables, ignored
    ids = np.array([9, -4, 9, 2**62, 0, 77, -4], dtype=np.int64)
    rows = client.pull_embedding_vectors("emb/user", ids)
    np.testing.assert_array_equal(rows, EmbeddingTable("emb/user", 4).lookup(ids))
    both = client.pull_embeddings({"emb/user": ids[::-1], "emb/item": ids})
    np.testing.assert_array_equal(both["emb/user"], rows[::-1])
    assert both["emb/item"].shape == (ids.size, 3) and not both["emb/item"].any()
    assert client.pull_embedding_vectors("emb/item", np.array([], np.int64)).shape == (0, 3)
    # each shard holds exactly its ids, fetched once despite duplicates
    for ps_id, address in enumerate(addresses):
        with grpc.insecure_channel(address) as channel:
            stub = elasticdl_pb2_grpc.ParameterServerStub(channel)
            mine = np.unique(ids)[embedding_shard(np.unique(ids), 2) == ps_id]
            assert mine.size
            answer = stub.pull_embedding_vectors(
                pb.PullEmbeddingVectorsRequest(name="emb/user", ids=mine.tolist())
            )
            assert tuple(answer.dims) == (mine.size, 4)
            other = np.unique(ids)[embedding_shard(np.unique(ids), 2) != ps_id]
            with pytest.raises(grpc.RpcError) as rpc:
                stub.pull_embedding_vectors(
                    pb.PullEmbeddingVectorsRequest(name="emb/user", id_tensor=encode("", other))
                )
            assert rpc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "belong to other shards" in rpc.value.details()


def test_sparse_and_dense_gradients_apply_in_one_push(two_shards):
    client, _ = two_shards
    kernel = np.ones((2, 2), np.float32)
    client.push_model({"dense/kernel": kernel}, embedding_tables=TABLES)
    ids = np.array([3, 5, 3, 1000], dtype=np.int64)
    before = client.pull_embedding_vectors("emb/user", ids)
    grads = np.arange(16, dtype=np.float32).reshape(4, 4)
    pushed = client.push_gradients(
        {"dense/kernel": kernel},
        0,
        task_id=1,
        records_end=10,
        embedding_grads={"emb/user": (ids, grads)},
    )
    assert pushed.accepted and pushed.versions == [1, 1]
    expected = before.copy()
    summed = {3: grads[0] + grads[2], 5: grads[1], 1000: grads[3]}
    for i, row_id in enumerate(ids):
        expected[i] = before[i] - 0.5 * summed[int(row_id)]
    np.testing.assert_allclose(client.pull_embedding_vectors("emb/user", ids), expected)
    np.testing.assert_allclose(client.pull().values["dense/kernel"], kernel * 0.5)
    assert client.applied_progress([1]) == {1: 10}


def test_bad_embedding_requests_are_one_clear_line(two_shards):
    client, _ = two_shards
    with pytest.raises(PSError, match="push_model must come before embedding lookups") as early:
        client.pull_embedding_vectors("emb/user", np.array([1]))
    assert early.value.code == grpc.StatusCode.FAILED_PRECONDITION
    client.push_model({}, embedding_tables=TABLES)
    with pytest.raises(PSError, match="no embedding table named 'nope'"):
        client.pull_embedding_vectors("nope", np.array([1]))
    with pytest.raises(PSError, match="rows have dim 4"):
        client.push_gradients(
            {}, 0, embedding_grads={"emb/user": (np.array([1, 2]), np.ones((2, 5)))}
        )
    with pytest.raises(PSError, match="embedding tables do not match"):
        client.push_model({}, embedding_tables=[TableSpec("emb/user", 8)])
    with pytest.raises(ValueError, match="values of shape"):
        client.push_gradients({}, 0, embedding_grads={"emb/user": (np.array([1]), np.ones(4))})


def test_sync_mode_sparse_gradients_are_averaged_and_stale_ones_rejected():
    servers, addresses = in_process_shards(
        2, lambda: keras.optimizers.SGD(1.0), use_async=False, grads_to_wait=2
    )
    try:
        with PSClient(addresses) as client:
            client.push_model({}, embedding_tables=TABLES[1:])
            ids = np.array([1, 2, 3])
            one = np.ones((3, 3), np.float32)
            assert client.push_gradients({}, 0, embedding_grads={"emb/item": (ids, one)}).accepted
            assert client.pull_embedding_vectors("emb/item", ids).sum() == 0  # not yet applied
            second = client.push_gradients(
                {}, 0, embedding_grads={"emb/item": (ids[:1], 3 * one[:1])}
            )
            assert second.accepted and second.versions == [1, 1]
            np.testing.assert_allclose(
                client.pull_embedding_vectors("emb/item", ids),
                [[-2, -2, -2], [-0.5, -0.5, -0.5], [-0.5, -0.5, -0.5]],
            )
            stale = client.push_gradients({}, 0, embedding_grads={"emb/item": (ids, one)})
            assert not stale.accepted
            assert client.pull_embedding_vectors("emb/item", ids)[2, 0] == -0.5
    finally:
        for server in servers:
            server.stop(None)


def test_job_optimizer_drives_the_tables_with_its_learning_rate():
    """The job's Keras optimizer (regressor.DNN: Adam, lr 0.05) updates the rows."""
    servers, addresses = start_shards(job_config(num_ps=2))
    try:
        with PSClient(addresses) as client:
            client.push_model({}, embedding_tables=TABLES[:1])
            ids = np.array([1, 2, 3, 4, 5])
            before = client.pull_embedding_vectors("emb/user", ids)
            client.push_gradients({}, 0, embedding_grads={"emb/user": (ids, np.ones((5, 4)))})
            after = client.pull_embedding_vectors("emb/user", ids)
            np.testing.assert_allclose(after - before, -0.05, rtol=1e-4)  # Adam's first step
    finally:
        for server in servers:
            server.stop(None)


def wait_for_line(process: subprocess.Popen, text: str, timeout_s: float) -> list[str]:
    """stderr lines of `process` up to the first one containing `text`."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not seen within {timeout_s} s; stderr: {''.join(seen)}")


def test_a_real_ps_process_serves_tables(tmp_path):
    config = job_config(num_ps=1).write(tmp_path / "job.json")
    port = choose_port(HOST)
    command = [sys.executable, "-P", "-m", "elasticdl.runtime.ps.main", "--config", str(config),
               "--ps_id", "0", "--port", str(port)]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_line(process, "listening on", 60)
        with PSClient([f"{HOST}:{port}"]) as client:
            client.push_model({}, embedding_tables=TABLES)
            ids = np.arange(-1000, 1000) * 7919
            np.testing.assert_array_equal(
                client.pull_embedding_vectors("emb/user", ids),
                EmbeddingTable("emb/user", 4).lookup(ids),
            )
        wait_for_line(process, "2 embedding tables", 10)
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_every_row_can_be_read_back_for_an_export(two_shards):
    client, _ = two_shards
    client.push_model({}, embedding_tables=TABLES)
    ids = np.arange(0, 5000, 7, dtype=np.int64)
    rows = client.pull_embedding_vectors("emb/user", ids)
    client.pull_embedding_vectors("emb/item", ids[:3])
    described = client.describe_embedding_tables()
    assert described == {"emb/user": (TABLES[0], ids.size), "emb/item": (TABLES[1], 3)}
    read_ids, read_rows = client.read_embedding_table("emb/user", page_rows=100)
    order = np.argsort(read_ids)
    np.testing.assert_array_equal(read_ids[order], ids)
    np.testing.assert_array_equal(read_rows[order], rows)
    with pytest.raises(PSError, match="no embedding table named 'x'"):
        client.read_embedding_table("x")


def test_pull_all_adds_every_tables_rows_for_the_final_model(two_shards):
    client, _ = two_shards
    kernel = np.ones((2, 2), np.float32)
    client.push_model({"dense/kernel": kernel}, embedding_tables=TABLES)
    ids = np.array([4, 8, 15, 16, 23, 42], dtype=np.int64)
    rows = client.pull_embedding_vectors("emb/user", ids)
    pulled = client.pull_all()
    assert set(pulled.values) == {
        "dense/kernel",
        "embedding:emb/user:ids",
        "embedding:emb/user:rows",
        "embedding:emb/item:ids",
        "embedding:emb/item:rows",
    }
    order = np.argsort(pulled.values["embedding:emb/user:ids"])
    np.testing.assert_array_equal(pulled.values["embedding:emb/user:ids"][order], ids)
    np.testing.assert_array_equal(pulled.values["embedding:emb/user:rows"][order], rows)
    assert pulled.values["embedding:emb/item:rows"].shape == (0, 3)
    assert set(client.pull_all(embeddings=False).values) == {"dense/kernel"}
