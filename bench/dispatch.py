"""Benchmark the master's task dispatch: task round trips (result in, next task out) per second.

    python -P bench/dispatch.py [--quick] [--clients 4] [--mode process|thread] [--seconds S]

A real `MasterServicer` around a real `TaskManager` is served by `serve_master` on 127.0.0.1
from this process. The plan has many one-record tasks (10,000 per epoch, 100,000 epochs, planned
lazily) so the manager never runs dry. `--clients` concurrent clients (separate processes by
default, like workers; `--mode thread` runs them as threads of one process) each loop, as a
worker does, `finish_task` (report the held task's success, records_done = its size, and get
the next task in one call), with plain stubs from `elasticdl.proto.elasticdl_pb2_grpc` on a
channel with the runtime's GRPC_OPTIONS, for a fixed time after a common start instant.

Side by side: the same clients with the two-call protocol of before (`get_task` then
`report_task_result`), and against a bare gRPC server (generic handlers that return an empty
message, same options and thread pool size) in this process with one and with two unary calls
per round trip: the ratio master / bare one call is the servicer's own cost.

The machine has 2 cores: server and clients compete for them (and with anything else running;
the CPU used by other processes during each run is printed). Prints one
`RESULT <name> <value> target=<target>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402

from elasticdl.proto import elasticdl_pb2 as pb  # noqa: E402
from elasticdl.proto import elasticdl_pb2_grpc  # noqa: E402
from elasticdl.runtime.job_config import GRPC_OPTIONS  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_busy_s, print_results, runtime_revision, wait_quiet  # noqa: E402

TASKS_PER_EPOCH = 10_000
EPOCHS = 100_000
BARE_SERVICE = "bench.Bare"


# --------------------------------------------------------------------------- servers


def serve_master_bench() -> tuple[grpc.Server, int, Any]:
    from elasticdl.runtime.data.shards import plan_shards
    from elasticdl.runtime.master.servicer import MasterServicer, serve_master
    from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig

    shards = plan_shards([("bench://dispatch.recordio", TASKS_PER_EPOCH)], 1)
    tasks = TaskManager(
        shards, TaskManagerConfig(records_per_task=1, num_epochs=EPOCHS), now=time.monotonic()
    )
    servicer = MasterServicer(tasks)
    server, port = serve_master(servicer, "127.0.0.1", 0)
    return server, port, servicer


def serve_bare() -> tuple[grpc.Server, int]:
    """Two unary methods returning an empty message: gRPC's own cost for the same calls."""
    empty = b""

    def handler(request: bytes, context: grpc.ServicerContext) -> bytes:
        return empty

    handlers = {
        "get_task": grpc.unary_unary_rpc_method_handler(handler),
        "report_task_result": grpc.unary_unary_rpc_method_handler(handler),
    }
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="bare-rpc"),
        options=GRPC_OPTIONS,
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(BARE_SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


# --------------------------------------------------------------------------- clients


def client_calls(
    kind: str, address: str, worker_id: int
) -> tuple[grpc.Channel, Callable[[], None]]:
    """A channel and one round trip against the `kind` server: "master" one `finish_task`
    (report a result and get the next task, what workers do), "master2" the two calls
    `get_task` + `report_task_result` (the protocol before `finish_task`), "bare" two unary
    calls, "bare1" one (gRPC's own cost of the two protocols)."""
    channel = grpc.insecure_channel(address, options=GRPC_OPTIONS)
    grpc.channel_ready_future(channel).result(timeout=30)
    if kind == "master":
        stub = elasticdl_pb2_grpc.MasterStub(channel)
        held = [stub.get_task(pb.GetTaskRequest(worker_id=worker_id), timeout=30)]

        def round_trip() -> None:
            task = held[0]
            if task.task_id == 0:
                raise RuntimeError(f"the master ran dry (task type {task.type})")
            held[0] = stub.finish_task(
                pb.ReportTaskResultRequest(
                    worker_id=worker_id,
                    task_id=task.task_id,
                    exec_counters={"records_done": task.end - task.start},
                ),
                timeout=30,
            )

    elif kind == "master2":
        stub = elasticdl_pb2_grpc.MasterStub(channel)
        get_request = pb.GetTaskRequest(worker_id=worker_id)

        def round_trip() -> None:
            task = stub.get_task(get_request, timeout=30)
            if task.task_id == 0:
                raise RuntimeError(f"the master ran dry (task type {task.type})")
            stub.report_task_result(
                pb.ReportTaskResultRequest(
                    worker_id=worker_id,
                    task_id=task.task_id,
                    exec_counters={"records_done": task.end - task.start},
                ),
                timeout=30,
            )

    elif kind == "bare1":
        get = channel.unary_unary(f"/{BARE_SERVICE}/get_task")
        get_bytes = pb.GetTaskRequest(worker_id=worker_id).SerializeToString()

        def round_trip() -> None:
            get(get_bytes, timeout=30)

    else:
        get = channel.unary_unary(f"/{BARE_SERVICE}/get_task")
        report = channel.unary_unary(f"/{BARE_SERVICE}/report_task_result")
        get_bytes = pb.GetTaskRequest(worker_id=worker_id).SerializeToString()
        report_bytes = pb.ReportTaskResultRequest(
            worker_id=worker_id, task_id=1, exec_counters={"records_done": 1}
        ).SerializeToString()

        def round_trip() -> None:
            get(get_bytes, timeout=30)
            report(report_bytes, timeout=30)

    return channel, round_trip


def run_client(kind: str, address: str, worker_id: int, start: float, end: float) -> dict[str, Any]:
    """Loop round trips from wall-clock `start` to `end`; count them and time each."""
    channel, round_trip = client_calls(kind, address, worker_id)
    for _ in range(20):
        round_trip()
    while time.time() < start:
        time.sleep(0.001)
    latencies: list[float] = []
    cpu0 = time.process_time()
    now = time.time()
    while now < end:
        round_trip()
        after = time.time()
        latencies.append(after - now)
        now = after
    cpu = time.process_time() - cpu0
    channel.close()
    return {"count": len(latencies), "latencies": latencies, "cpu_s": cpu, "warmup": 20}


def run_clients(
    kind: str, address: str, clients: int, mode: str, seconds: float
) -> list[dict[str, Any]]:
    # Clients connect and warm up first (20 round trips each), then all start together.
    start = time.time() + (2.0 if mode == "process" else 0.5)
    end = start + seconds
    if mode == "thread":
        found: list[dict[str, Any]] = []
        lock = threading.Lock()

        def one(worker_id: int) -> None:
            figures = run_client(kind, address, worker_id, start, end)
            with lock:
                found.append(figures)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return found
    argv = [sys.executable, "-P", str(Path(__file__).resolve()), "--client"]
    procs = [
        subprocess.Popen(  # noqa: S603 - argv list, no shell
            [*argv, json.dumps([kind, address, i, start, end])],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(clients)
    ]
    found = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"client exited with {proc.returncode}")
        found.append(json.loads(out.strip().splitlines()[-1]))
    return found


def measure(kind: str, address: str, clients: int, mode: str, seconds: float) -> dict[str, Any]:
    wall0, busy0, times0 = time.perf_counter(), machine_busy_s(), os.times()
    found = run_clients(kind, address, clients, mode, seconds)
    wall, busy, times = time.perf_counter() - wall0, machine_busy_s() - busy0, os.times()
    # This process (the server, and the clients in thread mode), and the reaped client processes.
    own = times.user + times.system - times0.user - times0.system
    children = (
        times.children_user + times.children_system - times0.children_user - times0.children_system
    )
    count = sum(f["count"] for f in found)
    calls = count + sum(f["warmup"] for f in found)
    latencies = sorted(x for f in found for x in f["latencies"])
    return {
        "round_trips": count,
        "warmup_round_trips": calls - count,
        "per_s": count / seconds,
        "p50_ms": statistics.median(latencies) * 1e3,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1e3,
        # Over the whole run, client start-up and warm-up included.
        "this_process_cpu_us_per_round_trip": own / calls * 1e6,
        "client_processes_cpu_us_per_round_trip": children / calls * 1e6,
        "others_cores_busy": (busy - own - children) / wall,
    }


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter runs (< 1 min)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--mode", choices=["process", "thread"], default="process")
    ap.add_argument("--seconds", type=float, help="measured seconds per run (default 8; 4 quick)")
    ap.add_argument("--repeats", type=int, help="alternating runs per server (default 2; 1 quick)")
    ap.add_argument(
        "--quiet-wait",
        type=float,
        help="seconds to wait for other processes to go quiet before each run (10; quick 0)",
    )
    ap.add_argument("--client", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.client:
        kind, address, worker_id, start, end = json.loads(args.client)
        figures = run_client(kind, address, worker_id, start, end)
        print(json.dumps(figures))
        return 0

    seconds = args.seconds or (4.0 if args.quick else 8.0)
    plural = {"process": "processes", "thread": "threads"}[args.mode]
    quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0 if args.quick else 10)
    repeats = args.repeats or (1 if args.quick else 2)
    master, master_port, servicer = serve_master_bench()
    bare, bare_port = serve_bare()

    print(f"runtime: {runtime_revision()}")
    print(
        f"{args.clients} client {plural}, {seconds:g} s per run, {repeats} run(s) per "
        f"server, alternating; nproc {os.cpu_count()}",
        flush=True,
    )
    runs: dict[str, list[dict[str, Any]]] = {"master": [], "master2": [], "bare": [], "bare1": []}
    servers = (
        ("master", master_port),
        ("master2", master_port),
        ("bare", bare_port),
        ("bare1", bare_port),
    )
    for _ in range(repeats):
        for kind, port in servers:
            load = wait_quiet(quiet_wait)
            figures = measure(kind, f"127.0.0.1:{port}", args.clients, args.mode, seconds)
            figures["others_load_before"] = load
            runs[kind].append(figures)
            shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}
            print(f"  {kind}: {shown}", flush=True)
    single = measure("master", f"127.0.0.1:{master_port}", 1, args.mode, seconds / 2)
    print(f"  master, 1 client: {single['per_s']:.0f}/s, p50 {single['p50_ms']:.3f} ms")

    with servicer.lock:
        finished = servicer.tasks.finished_tasks
        failure = servicer.tasks.failure
    counted = sum(
        r["round_trips"] + r["warmup_round_trips"] for r in runs["master"] + runs["master2"]
    )
    counted += single["round_trips"] + single["warmup_round_trips"]
    master.stop(None)
    bare.stop(None)
    if failure is not None or finished != counted:
        raise RuntimeError(f"the master counted {finished} finished tasks, clients {counted}")
    print(f"  master finished {finished} tasks = the clients' count")

    master_rate = statistics.median(r["per_s"] for r in runs["master"])
    master2_rate = statistics.median(r["per_s"] for r in runs["master2"])
    bare_rate = statistics.median(r["per_s"] for r in runs["bare1"])
    results = [
        (f"master_round_trips_per_s_{args.clients}_{plural}", master_rate, ">=1500"),
        (
            "master_round_trip_p50_ms",
            statistics.median(r["p50_ms"] for r in runs["master"]),
            "none",
        ),
        (
            "master_round_trip_p99_ms",
            statistics.median(r["p99_ms"] for r in runs["master"]),
            "none",
        ),
        (f"master_two_calls_round_trips_per_s_{args.clients}_{plural}", master2_rate, "none"),
        (
            f"bare_grpc_two_calls_round_trips_per_s_{args.clients}_{plural}",
            statistics.median(r["per_s"] for r in runs["bare"]),
            "none",
        ),
        (f"bare_grpc_one_call_round_trips_per_s_{args.clients}_{plural}", bare_rate, "none"),
        ("ratio_master_over_bare_grpc_one_call", master_rate / bare_rate, "none"),
        ("master_round_trips_per_s_1_client", single["per_s"], "none"),
    ]
    what = "server" if args.mode == "process" else "server_and_clients"
    for kind in ("master", "bare1"):
        cpu = statistics.median(r["this_process_cpu_us_per_round_trip"] for r in runs[kind])
        results.append((f"{kind}_{what}_cpu_us_per_round_trip", cpu, "none"))
        if args.mode == "process":
            cpu = statistics.median(r["client_processes_cpu_us_per_round_trip"] for r in runs[kind])
            results.append((f"{kind}_clients_cpu_us_per_round_trip", cpu, "none"))
    others = statistics.median(r["others_cores_busy"] for rs in runs.values() for r in rs)
    results.append(("other_processes_cpu_cores_busy", others, "none"))
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
