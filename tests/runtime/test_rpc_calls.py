"""CallThreads: unary gRPC calls without waiting, on reused daemon threads (real loopback gRPC)."""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
import pytest

from elasticdl.runtime.rpc_calls import CallThreads


@pytest.fixture
def echo_channel():
    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        if request == b"refuse":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "refused on purpose")
        return request

    server = grpc.server(futures.ThreadPoolExecutor(4))
    handler = grpc.method_handlers_generic_handler(
        "t.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield channel.unary_unary("/t.Echo/Echo")
    channel.close()
    server.stop(0)


def test_a_call_answers_through_its_future_and_a_refusal_raises_the_rpc_error(echo_channel):
    calls = CallThreads(2)
    answer = calls.submit(echo_channel, b"hello", timeout=10)
    assert answer.result(timeout=10) == b"hello" and answer.done()
    refused = calls.submit(echo_channel, b"refuse", timeout=10)
    with pytest.raises(grpc.RpcError) as raised:
        refused.result(timeout=10)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_an_unreachable_server_fails_the_call_at_its_deadline():
    channel = grpc.insecure_channel("127.0.0.1:1")
    pending = CallThreads(1).submit(channel.unary_unary("/t.Echo/Echo"), b"x", timeout=0.5)
    with pytest.raises(grpc.RpcError) as raised:
        pending.result(timeout=10)
    assert raised.value.code() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    )
    channel.close()


def test_calls_run_side_by_side_up_to_the_thread_count():
    calls = CallThreads(3)
    together = threading.Barrier(3, timeout=5)
    running = [calls.submit(together.wait) for _ in range(3)]
    assert all(f.result(timeout=10) is not None for f in running)  # none waited for another
    release = threading.Event()
    blocked = [calls.submit(release.wait, 5) for _ in range(5)]
    time.sleep(0.1)
    assert calls.threads() == 3
    assert sum(f.running() for f in blocked) == 3
    release.set()
    assert all(f.result(timeout=10) for f in blocked)


def test_threads_are_reused_daemons_and_end_when_idle():
    calls = CallThreads(2, name="test-idle", idle_s=0.1)
    for _ in range(20):
        calls.submit(int, "7").result(timeout=5)
    assert calls.threads() == 1  # one call at a time: one thread, reused
    (thread,) = [t for t in threading.enumerate() if t.name == "test-idle"]
    assert thread.daemon
    deadline = time.monotonic() + 5
    while calls.threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert calls.threads() == 0
    assert calls.submit(int, "8").result(timeout=5) == 8  # a new thread when needed again
