"""Benchmark one unary gRPC call at a time: grpcio's `.future()` vs `CallThreads` (rpc_calls.py).

    python -P bench/rpc_calls.py [--quick] [--kb 50] [--calls 2000]

A loopback server (a generic handler returning the request bytes) answers calls made one at a
time, as a worker makes its pushes and progress reports. Side by side, in alternating blocks:
`multicallable.future(request)` then `.result()`, and `CallThreads.submit(multicallable,
request)` then `.result()`. Reported per call: the caller's time to start it (what the worker's
training thread pays before it goes on) and the whole round trip.

Prints one `RESULT <name> <value> target=<target>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent import futures
from pathlib import Path

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import loadavg, runtime_revision  # noqa: E402

from elasticdl.runtime.rpc_calls import CallThreads  # noqa: E402


def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
    return request


def measure(start, request: bytes, calls: int) -> tuple[list[float], list[float]]:
    """(seconds to start each call, seconds for each round trip)."""
    started, whole = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        pending = start(request)
        t1 = time.perf_counter()
        pending.result()
        t2 = time.perf_counter()
        started.append(t1 - t0)
        whole.append(t2 - t0)
    return started, whole


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls (a few seconds)")
    ap.add_argument("--kb", type=int, default=50, help="request (and answer) size in KB")
    ap.add_argument("--calls", type=int, help="calls per block (default 2000; quick 500)")
    args = ap.parse_args()
    calls = args.calls or (500 if args.quick else 2000)
    print(f"runtime: {runtime_revision()}; load {loadavg()}")

    server = grpc.server(futures.ThreadPoolExecutor(4))
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = channel.unary_unary("/bench.Echo/Echo")
    request = b"x" * (args.kb * 1000)
    threads = CallThreads(1, name="bench-calls")
    ways = {"future": call.future, "call_threads": lambda r: threads.submit(call, r)}
    measure(call.future, request, 50)  # warm-up
    results: dict[str, tuple[list[float], list[float]]] = {w: ([], []) for w in ways}
    for _ in range(2):
        for way, start in ways.items():
            started, whole = measure(start, request, calls)
            results[way][0].extend(started)
            results[way][1].extend(whole)
    channel.close()
    server.stop(0)

    figures = {}
    for way, (started, whole) in results.items():
        figures[f"{way}_start_us"] = statistics.median(started) * 1e6
        figures[f"{way}_round_trip_us"] = statistics.median(whole) * 1e6
        print(
            f"{way:13s} start {figures[f'{way}_start_us']:7.1f} us, round trip "
            f"{figures[f'{way}_round_trip_us']:7.1f} us (medians of {len(whole)} calls)"
        )
    figures["round_trip_ratio_future_over_call_threads"] = (
        figures["future_round_trip_us"] / figures["call_threads_round_trip_us"]
    )
    print()
    for name, value in figures.items():
        target = ">=1" if name.startswith("round_trip_ratio") else "none"
        print(f"RESULT {name} {value:.4g} target={target}")


if __name__ == "__main__":
    main()
