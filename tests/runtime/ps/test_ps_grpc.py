"""Parameter servers over real gRPC on 127.0.0.1: in-process shards and one real PS process."""

from __future__ import annotations

import errno
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.master.exits import PORT_TAKEN_EXIT
from elasticdl.runtime.master.ports import choose_port
from elasticdl.runtime.ps.client import (
    PSClient,
    PSError,
    PSNeverReadyError,
    PSUnavailableError,
)
from elasticdl.runtime.ps.parameters import GradientPolicy, Parameters
from elasticdl.runtime.ps.partition import ps_of
from elasticdl.runtime.ps.servicer import (
    ParameterServerServicer,
    PortTakenError,
    serve,
    servicer_of,
    start_server,
    why_unbound,
)
from elasticdl.runtime.tensor_codec import encode
from elasticdl.runtime.variables import named_variables, values_of
from elasticdl.runtime.zoo_source import builtin_zoo_root

HOST = "127.0.0.1"


def job_config(num_ps: int = 2, **overrides) -> JobConfig:
    return JobConfig(
        job_name="ps-test",
        model_def="regressor.DNN",
        model_zoo_root=str(builtin_zoo_root()),
        params="hidden_units=[8, 4], learning_rate=0.05",
        num_ps=num_ps,
        **overrides,
    )


@pytest.fixture(scope="module")
def model():
    """(spec instance, trainable values, gradients of the loss on one batch)."""
    instance = job_config().load_spec().instantiate()
    rng = np.random.default_rng(0)
    features = {"dense": rng.standard_normal((16, 3)).astype(np.float32)}
    labels = rng.standard_normal((16, 1)).astype(np.float32)
    net = instance.model
    net(features)
    trainable, non_trainable = named_variables(net)
    assert not non_trainable
    with tf.GradientTape() as tape:
        loss = instance.loss(labels, net(features, training=True))
    grads = tape.gradient(loss, list(trainable.values()))
    gradients = {name: g.numpy() for name, g in zip(trainable, grads, strict=True)}
    return instance, values_of(trainable), gradients


def start_shards(config: JobConfig) -> tuple[list[grpc.Server], list[str]]:
    servers, addresses = [], []
    for ps_id in range(config.num_ps):
        port = choose_port(HOST)
        servers.append(serve(config, ps_id, port))
        addresses.append(f"{HOST}:{port}")
    return servers, addresses


@pytest.fixture
def shards():
    servers, addresses = start_shards(job_config(num_ps=2))
    client = PSClient(addresses, timeout_s=20)
    client.wait_ready(10)
    yield client, addresses
    client.close()
    for server in servers:
        server.stop(None)


def test_push_pull_push_gradients_and_pull_again(shards, model):
    client, addresses = shards
    _, values, gradients = model
    before = client.pull()
    assert (before.initialized, before.versions, before.values) == (False, [-1, -1], {})
    with pytest.raises(PSError, match="push_model must come before push_gradients") as failed:
        client.push_gradients(gradients, 0)
    assert failed.value.code == grpc.StatusCode.FAILED_PRECONDITION

    client.push_model(values)
    client.push_model({name: v + 1 for name, v in values.items()})  # a racing worker: ignored
    full = client.pull()
    assert full.initialized and full.versions == [0, 0] and full.updated == [0, 1]
    assert set(full.values) == set(values)
    for name in values:
        np.testing.assert_array_equal(full.values[name], values[name])

    current = client.pull(full.versions)
    assert current.values == {} and current.updated == [] and current.versions == [0, 0]

    pushed = client.push_gradients(gradients, full.versions, task_id=3, records_end=64)
    assert pushed.accepted is True and pushed.shard_accepted == [True, True]
    assert pushed.versions == [1, 1]
    after = client.pull(full.versions)
    assert after.versions == [1, 1] and after.updated == [0, 1] and after.version == 1
    assert set(client.pull_all().values) == set(values)
    # exactly what the job's Keras optimizer does to an identical copy
    reference = {name: keras.Variable(value) for name, value in values.items()}
    optimizer = job_config().load_spec().instantiate().optimizer
    optimizer.apply_gradients([(tf.constant(gradients[n]), reference[n]) for n in reference])
    for name, variable in reference.items():
        np.testing.assert_allclose(after.values[name], variable.numpy(), rtol=1e-6, atol=1e-7)
        assert not np.array_equal(after.values[name], values[name]), name
    assert client.applied_progress([3, 4]) == {3: 64, 4: 0}


def test_every_variable_lives_on_exactly_one_shard(shards, model):
    client, addresses = shards
    _, values, _ = model
    client.push_model(values)
    held = []
    for ps_id, address in enumerate(addresses):
        with grpc.insecure_channel(address) as channel:
            stub = elasticdl_pb2_grpc.ParameterServerStub(channel)
            response = stub.pull_dense_parameters(pb.PullDenseParametersRequest(version=-1))
            current = stub.pull_dense_parameters(pb.PullDenseParametersRequest(version=0))
        assert len(current.dense_parameters) == 0 and current.version == 0
        names = {t.name for t in response.dense_parameters}
        assert names and all(ps_of(n, 2) == ps_id for n in names)
        held.append(names)
    assert held[0].isdisjoint(held[1]) and held[0] | held[1] == set(values)


def test_bad_names_are_invalid_arguments_naming_them(shards, model):
    client, addresses = shards
    _, values, gradients = model
    client.push_model(values)
    with pytest.raises(PSError, match="no/such/kernel") as failed:
        client.push_gradients({**gradients, "no/such/kernel": np.ones(2, np.float32)}, 0)
    assert failed.value.code == grpc.StatusCode.INVALID_ARGUMENT
    misplaced = next(n for n in values if ps_of(n, 2) == 1)
    with grpc.insecure_channel(addresses[0]) as channel:
        stub = elasticdl_pb2_grpc.ParameterServerStub(channel)
        request = pb.PushGradientsRequest(gradients=[encode(misplaced, gradients[misplaced])])
        with pytest.raises(grpc.RpcError) as rpc:
            stub.push_gradients(request)
        assert rpc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (
            misplaced in rpc.value.details() and "not on parameter server 0" in rpc.value.details()
        )
        with pytest.raises(grpc.RpcError) as rpc:
            stub.pull_embedding_vectors(pb.PullEmbeddingVectorsRequest(name="e"))
        assert rpc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "no embedding table named 'e'" in rpc.value.details()
    # the shard that refused applied nothing (a push is not atomic across shards)
    assert client.pull().versions[ps_of("no/such/kernel", 2)] == 0


def test_sync_mode_rejects_stale_pushes(model):
    _, values, gradients = model
    servers, addresses = start_shards(job_config(num_ps=1, use_async=False, grads_to_wait=2))
    try:
        with PSClient(addresses) as client:
            client.push_model(values)
            first = client.push_gradients(gradients, 0, task_id=1, records_end=8)
            assert first.accepted_all and first.versions == [0]
            assert client.applied_progress([1]) == {1: 0}
            second = client.push_gradients(gradients, 0, task_id=2, records_end=8)
            assert second.accepted_all and second.versions == [1]
            stale = client.push_gradients(gradients, 0, task_id=3, records_end=8)
            assert stale.accepted is False and stale.shard_accepted == [False]
            assert stale.versions == [1]
            assert client.applied_progress([1, 2, 3]) == {1: 8, 2: 8, 3: 0}
    finally:
        for server in servers:
            server.stop(None)


def test_a_busy_port_is_a_clear_error():
    servers, addresses = start_shards(job_config(num_ps=1))
    port = int(addresses[0].rsplit(":", 1)[1])
    try:
        with pytest.raises(RuntimeError, match=f"parameter server 0: port {port} on {HOST} is in"):
            serve(job_config(num_ps=1), 0, port)
    finally:
        servers[0].stop(None)
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        sock.listen()
        taken = sock.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"port {taken} on {HOST} is in use"):
            serve(job_config(num_ps=1), 0, taken)


def test_why_a_port_cannot_be_bound():
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        sock.listen()
        taken = sock.getsockname()[1]
        assert why_unbound(HOST, taken).errno == errno.EADDRINUSE
    assert why_unbound(HOST, taken) is None  # let go


def test_an_address_that_cannot_be_bound_is_not_a_taken_port(monkeypatch):
    """Relaunching such a PS on another port would fail the same way: a plain error (exit 1),
    not PortTakenError (the master's retry elsewhere)."""
    from elasticdl.runtime.ps import servicer as module

    not_here = OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address")
    monkeypatch.setattr(module, "why_unbound", lambda host, port: not_here)
    servicer = servicer_of(job_config(num_ps=1), 0)
    with socket.socket() as sock:  # gRPC's own bind fails for real
        sock.bind((HOST, 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(RuntimeError) as raised:
            start_server(servicer, port, HOST)
    assert not isinstance(raised.value, PortTakenError)
    assert str(raised.value) == (
        f"parameter server 0: cannot listen on {HOST}:{port}: Cannot assign requested address; "
        "give --host an address of this machine"
    )
    with pytest.raises(ValueError, match=r"parameter server 0: port 70000 is not in \[0, 65535\]"):
        start_server(servicer, 70000, HOST)
    servicer.close(0)


def test_an_unreachable_shard_is_a_typed_error():
    address = f"{HOST}:{choose_port(HOST)}"
    with PSClient([address], timeout_s=5) as client:
        with pytest.raises(PSUnavailableError, match=f"parameter server 0 \\({address}\\)"):
            client.pull()
        with pytest.raises(PSUnavailableError, match="not reachable within 0.3 s"):
            client.wait_ready(0.3)


def test_calls_wait_for_a_shard_that_comes_up_after_wait_ready_behind(model):
    """A worker's path: it asks for readiness behind its back, builds its model, and its first
    call waits for the shard that was not up yet."""
    _, values, _ = model
    config = job_config(num_ps=1)
    port = choose_port(HOST)
    address = f"{HOST}:{port}"
    servers: list[grpc.Server] = []
    late = threading.Timer(0.5, lambda: servers.append(serve(config, 0, port)))
    with PSClient([address], timeout_s=5, resolve=lambda: [address]) as client:
        try:
            client.wait_ready_behind(30)  # nothing listens until it returned
            late.start()
            client.push_model(values)
            assert servers, "the call went out before the shard was up"
            assert client.pull().versions == [0]
        finally:
            late.join()
            for server in servers:
                server.stop(None)


def test_a_shard_that_never_came_up_fails_every_call_after_wait_ready_behind():
    address = f"{HOST}:{choose_port(HOST)}"
    with PSClient([address], timeout_s=5, resolve=lambda: [address]) as client:
        client.wait_ready_behind(0.3)
        for _ in range(2):
            with pytest.raises(PSNeverReadyError, match="not reachable within 0.3 s"):
                client.pull()


def test_client_reconnects_to_a_restarted_shard(model):
    _, values, _ = model
    config = job_config(num_ps=1)
    servers, addresses = start_shards(config)
    port = int(addresses[0].rsplit(":", 1)[1])
    with PSClient(addresses, timeout_s=5) as client:
        client.push_model(values)
        assert client.pull().versions == [0]
        servers[0].stop(None).wait()
        with pytest.raises(PSUnavailableError):
            client.pull()
        restarted = serve(config, 0, port)
        try:
            deadline = time.monotonic() + 3
            while True:
                try:
                    result = client.pull()
                    break
                except PSUnavailableError:
                    assert time.monotonic() < deadline, "no reconnect within 3 s"
                    time.sleep(0.05)
            assert not result.initialized  # a fresh server: the worker must push the model
        finally:
            restarted.stop(None)


def _stderr_lines(process: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for(lines: queue.Queue, text: str, timeout_s: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=deadline - time.monotonic())
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not seen within {timeout_s} s; stderr: {''.join(seen)}")


def test_main_serves_refuses_a_busy_port_and_exits_0_on_sigterm(tmp_path: Path, model):
    _, values, gradients = model
    config = job_config(num_ps=1).write(tmp_path / "job.json")
    port = choose_port(HOST)
    command = [sys.executable, "-P", "-m", "elasticdl.runtime.ps.main", "--config", str(config),
               "--ps_id", "0", "--port", str(port)]  # fmt: skip
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = _stderr_lines(process)
        _wait_for(lines, f"parameter server 0 listening on {HOST}:{port}", 60)
        with PSClient([f"{HOST}:{port}"]) as client:
            client.push_model(values)
            assert client.push_gradients(gradients, 0).versions == [1]
            assert client.pull(0).updated == [0]

        busy = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
        assert busy.returncode == PORT_TAKEN_EXIT  # the master relaunches it elsewhere
        assert busy.stderr.strip().splitlines()[-1] == (
            f"parameter server 0: port {port} on {HOST} is in use; choose another port or stop "
            "the process using it"
        )

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _latencies_ms(megabytes: int, repeats: int = 5) -> dict[str, float]:
    """Mean latency of a full pull, a pull when current, and a push, on 2 in-process shards."""
    per_variable = megabytes * (1 << 20) // 4 // 8
    values = {f"layer_{i}/kernel": np.full(per_variable, 0.5, np.float32) for i in range(8)}
    servers, addresses = [], []
    for ps_id in range(2):
        params = Parameters(lambda: keras.optimizers.SGD(0.01), GradientPolicy())
        server, port = start_server(ParameterServerServicer(params, ps_id, 2), 0)
        servers.append(server)
        addresses.append(f"{HOST}:{port}")
    timings = {}
    try:
        with PSClient(addresses) as client:
            client.push_model(values)
            calls = {
                "pull": lambda: client.pull(),
                "pull current": lambda: client.pull([0, 0]),
                "push": lambda: client.push_gradients(values, 0),
            }
            for label, call in calls.items():
                call()
                start = time.perf_counter()
                for _ in range(repeats):
                    call()
                timings[label] = (time.perf_counter() - start) / repeats * 1e3
    finally:
        for server in servers:
            server.stop(None)
    return timings


def test_throughput_sanity(capsys):
    """Loopback latency for ~1 MB and ~10 MB models on 2 shards (printed, not asserted)."""
    rows = []
    for megabytes in (1, 10):
        timings = _latencies_ms(megabytes)
        assert set(timings) == {"pull", "pull current", "push"}
        rows.append(
            f"[ps] {megabytes:>2} MB model, 2 shards: "
            + ", ".join(f"{k} {v:.1f} ms" for k, v in timings.items())
        )
    with capsys.disabled():
        print("\n" + "\n".join(rows))
