"""Unary gRPC calls started without waiting, made as blocking calls on a few reused threads.

Why not grpcio's `multicallable.future()`: a channel's futures are driven by a "spin" thread
that exits whenever the channel has no call in flight and is started again by the next call,
so a process that makes one call at a time (a worker: one push in flight, one progress report)
pays a thread start in the caller per call. A 50 KB loopback echo (`bench/rpc_calls.py`),
quiet 2-core machine: starting a call took 0.22 ms with `.future()` and 0.013 ms here, the
round trip 0.58-0.59 ms and 0.49-0.55 ms; with a test suite running beside it, 0.4-1 ms to
start and 1.0-1.2 ms a round trip with `.future()`, 0.39-0.46 ms here. The futures returned
are `concurrent.futures.Future`s: `done()` and `result()` behave as grpc's (`result()` raises
the call's `grpc.RpcError`).

The threads are daemons: a call blocked on an unreachable server (up to its deadline) must not
hold up the process's exit, as `ThreadPoolExecutor`'s joined threads would.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

IDLE_S = 10.0
"""A thread with no call for this long ends (a process making calls often keeps its threads)."""


class CallThreads:
    """Up to `threads` daemon threads that run submitted calls, started as calls need them and
    ended after `IDLE_S` without one. Nothing to close."""

    def __init__(self, threads: int = 1, name: str = "rpc", idle_s: float = IDLE_S) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self._max = threads
        self._name = name
        self._idle_s = idle_s
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = 0
        self._idle = 0  # waiting threads no submitted call has claimed yet

    def submit(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Run `call(*args, **kwargs)` on one of the threads; its future."""
        future: Future[T] = Future()
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._started < self._max:
                self._started += 1
                threading.Thread(target=self._run, name=self._name, daemon=True).start()
        self._jobs.put((future, call, args, kwargs))
        return future

    def threads(self) -> int:
        """Threads running now."""
        with self._lock:
            return self._started

    def _run(self) -> None:
        while True:
            try:
                future, call, args, kwargs = self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # unclaimed: this thread may go
                        self._idle -= 1
                        self._started -= 1
                        return
                continue  # a call claimed this thread and is on its way
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call(*args, **kwargs))
                except BaseException as error:  # noqa: BLE001 - the caller's result() raises it
                    future.set_exception(error)
            with self._lock:
                self._idle += 1
