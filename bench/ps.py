"""Benchmark parameter-server traffic: push + pull of a 10 MB model vs a raw gRPC bytes echo.

    python -P bench/ps.py [--quick] [--mb 10] [--variables 10]

One PS shard runs as a real subprocess (`python -P -m elasticdl.runtime.ps.main`, job config
of `mnist.mnist_functional_api.custom_model`: plain SGD); this process initializes it with
`--variables` float32 variables totalling `--mb` MB (decimal) via `PSClient.push_model`.
A round trip is `PSClient.push_gradients` (all gradients, MB up) then `PSClient.pull(-1)` (all
values, MB down) — what a worker did per minibatch in async mode with one PS; a one-call round
trip is `push_gradients(..., return_parameters=True)` answered with all values (what a worker
does now: the push is also the pull).

Side by side, a raw echo server (another subprocess: a generic gRPC handler returning the
request bytes, the PS's server options and thread pool size) gets one call per round trip
carrying the same number of bytes up and down, on a channel with the same options as
`PSClient`'s. Blocks of round trips alternate between the two so both see the same machine.

Also printed: a breakdown of one one-call round trip measured in this process with the code
the runtime uses (runtime/ps/wire.py's serialization and parsing on both sides, the push
applied by a second `Parameters` store), the rest being gRPC transport and scheduling.

Prints one `RESULT <name> <value> target=<target>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CLOCK_TICK, machine_busy_s, print_results, runtime_revision, wait_quiet  # noqa: E402

ECHO_METHOD = "/bench.Echo/Echo"
MODEL_DEF = "mnist.mnist_functional_api.custom_model"


def echo_server() -> int:
    """Serve the echo method until stdin closes; print the port first."""
    from elasticdl.runtime.ps.servicer import MAX_WORKERS, SERVER_OPTIONS

    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=MAX_WORKERS), options=SERVER_OPTIONS
    )
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(None)
    return 0


MALLOC_TUNABLES = (
    "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824:"
    "glibc.malloc.arena_max=1"
)


def tune_malloc() -> None:
    """Keep freed large buffers in this process (glibc): mmap only above 32 MiB, never trim
    below 1 GiB, one arena; what GLIBC_TUNABLES=MALLOC_TUNABLES does for a new process."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    m_trim_threshold, m_mmap_threshold, m_arena_max = -1, -3, -8
    for option, value in (
        (m_mmap_threshold, 32 << 20),
        (m_trim_threshold, 1 << 30),
        (m_arena_max, 1),
    ):
        if not libc.mallopt(option, value):
            raise RuntimeError(f"mallopt({option}, {value}) refused")


def make_model(total_mb: float, variables: int) -> dict[str, np.ndarray]:
    per = int(total_mb * 1e6 / 4 / variables)
    rng = np.random.default_rng(0)
    return {
        f"layer_{i}/kernel": rng.standard_normal(per, dtype=np.float32) for i in range(variables)
    }


def proc_stat(pid: int) -> tuple[float, int]:
    """(CPU seconds, minor page faults) of process `pid` so far."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK, int(fields[7])


def self_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def breakdown(
    model: dict[str, np.ndarray], grads: dict[str, np.ndarray], n: int
) -> list[tuple[str, float, float]]:
    """Median ms of each in-process step of one one-call round trip (no gRPC), by the code
    `PSClient` and the servicer use: runtime/ps/wire.py, then the push handler."""
    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.runtime.job_config import JobConfig
    from elasticdl.runtime.ps.parameters import Parameters
    from elasticdl.runtime.ps.servicer import ParameterServerServicer
    from elasticdl.runtime.ps.wire import parse_with_tensors, serialize_with_tensors
    from elasticdl.runtime.zoo_source import resolve_zoo

    config = JobConfig(
        job_name="ps-bench", model_def=MODEL_DEF, model_zoo_root=str(resolve_zoo(None).root)
    )
    spec = config.load_spec()
    parameters = Parameters(lambda: spec.instantiate().optimizer)
    parameters.initialize(model)
    servicer = ParameterServerServicer(parameters)
    gradients_field = pb.PushGradientsRequest.DESCRIPTOR.fields_by_name["gradients"].number
    values_field = pb.PushGradientsResponse.DESCRIPTOR.fields_by_name["dense_parameters"].number

    def build_push() -> bytes:
        head = pb.PushGradientsRequest(version=-1, return_parameters=True)
        return serialize_with_tensors(head, gradients_field, grads)

    push_bytes = build_push()
    parsed_push = parse_with_tensors(push_bytes, pb.PushGradientsRequest, gradients_field)
    answer = servicer.push_gradients_bytes(parsed_push, None)
    values = parameters.values()
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("client: serialize push (one copy of the gradients)", build_push),
        (
            "server: parse push (gradients viewing the bytes)",
            lambda: parse_with_tensors(push_bytes, pb.PushGradientsRequest, gradients_field),
        ),
        (
            "server: handler (lend gradients, apply, read values)",
            lambda: parameters.push_gradients(parsed_push[1], -1, with_values=True),
        ),
        (
            "server: serialize answer (one copy of the values)",
            lambda: serialize_with_tensors(
                pb.PushGradientsResponse(version=1), values_field, values
            ),
        ),
        (
            "client: parse answer (values viewing the bytes)",
            lambda: parse_with_tensors(answer, pb.PushGradientsResponse, values_field),
        ),
    ]
    found = []
    for name, fn in steps:
        for _ in range(3):
            fn()
        faults = self_faults()
        ms = statistics.median(timed(fn, n)) * 1e3
        found.append((name, ms, (self_faults() - faults) / n))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer round trips (< 1 min)")
    ap.add_argument("--mb", type=float, default=10.0, help="model size in MB (1e6 bytes)")
    ap.add_argument("--variables", type=int, default=10, help="number of float32 variables")
    ap.add_argument(
        "--tuned-malloc",
        action="store_true",
        help="run client, PS and echo server with glibc malloc keeping freed buffers "
        f"(mallopt here, GLIBC_TUNABLES={MALLOC_TUNABLES} for the servers)",
    )
    ap.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.echo_server:
        return echo_server()

    from elasticdl.runtime.job_config import JobConfig
    from elasticdl.runtime.master.ports import choose_port
    from elasticdl.runtime.ps.client import CHANNEL_OPTIONS, PSClient
    from elasticdl.runtime.zoo_source import resolve_zoo

    blocks, per_block = (3, 4) if args.quick else (6, 10)
    env = dict(os.environ)
    if args.tuned_malloc:
        tune_malloc()
        env["GLIBC_TUNABLES"] = MALLOC_TUNABLES
    model = make_model(args.mb, args.variables)
    nbytes = sum(v.nbytes for v in model.values())
    grads = {name: np.full_like(v, 1e-6) for name, v in model.items()}
    mb_per_round_trip = 2 * nbytes / 1e6
    print(f"runtime: {runtime_revision()}; malloc {'tuned' if args.tuned_malloc else 'default'}")
    print(
        f"model: {args.variables} float32 variables, {nbytes / 1e6:.2f} MB; a round trip moves "
        f"{mb_per_round_trip:.2f} MB; {blocks} alternating blocks of {per_block} round trips",
        flush=True,
    )

    tmp = tempfile.TemporaryDirectory(prefix="bench-ps-")
    config = JobConfig(
        job_name="ps-bench", model_def=MODEL_DEF, model_zoo_root=str(resolve_zoo(None).root)
    )
    config_path = config.write(Path(tmp.name) / "job.json")
    ps_port = choose_port()
    ps_log = (Path(tmp.name) / "ps.log").open("wb")
    ps = subprocess.Popen(  # noqa: S603 - argv list, no shell
        [
            sys.executable,
            "-P",
            "-m",
            "elasticdl.runtime.ps.main",
            "--config",
            str(config_path),
            "--ps_id",
            "0",
            "--port",
            str(ps_port),
        ],
        stdout=ps_log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    echo = subprocess.Popen(  # noqa: S603
        [sys.executable, "-P", str(Path(__file__).resolve()), "--echo-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        echo_port = int(echo.stdout.readline())  # type: ignore[union-attr]
        client = PSClient([f"127.0.0.1:{ps_port}"])
        client.wait_ready(timeout_s=120)
        client.push_model(model)
        channel = grpc.insecure_channel(f"127.0.0.1:{echo_port}", options=CHANNEL_OPTIONS)
        echo_call = channel.unary_unary(ECHO_METHOD)
        payload = b"\x01" * nbytes

        def ps_round_trip() -> None:
            client.push_gradients(grads, versions=0)
            pulled = client.pull(-1)
            assert len(pulled.values) == len(model)

        def ps_one_call() -> None:
            result = client.push_gradients(grads, versions=0, return_parameters=True)
            assert len(result.values) == len(model)

        def echo_round_trip() -> None:
            assert len(echo_call(payload, timeout=60)) == nbytes

        for _ in range(3):
            ps_round_trip()
            ps_one_call()
            echo_round_trip()
        load = wait_quiet(0 if args.quick else 30)
        print(f"other processes' load before: {load:.2f} cores", flush=True)
        ps_times: list[float] = []
        one_times: list[float] = []
        echo_times: list[float] = []
        wall0, busy0, own0 = time.perf_counter(), machine_busy_s(), time.process_time()
        servers0 = proc_stat(ps.pid)[0] + proc_stat(echo.pid)[0]
        usage = {"ps": [0.0, 0, 0], "ps1": [0.0, 0, 0], "echo": [0.0, 0, 0]}  # CPU s, faults
        for _ in range(blocks):
            for kind, fn, times, pid in (
                ("ps", ps_round_trip, ps_times, ps.pid),
                ("ps1", ps_one_call, one_times, ps.pid),
                ("echo", echo_round_trip, echo_times, echo.pid),
            ):
                cpu0, faults0 = proc_stat(pid)
                mine0 = self_faults()
                times += timed(fn, per_block)
                cpu1, faults1 = proc_stat(pid)
                usage[kind][0] += cpu1 - cpu0
                usage[kind][1] += faults1 - faults0
                usage[kind][2] += self_faults() - mine0
        servers = proc_stat(ps.pid)[0] + proc_stat(echo.pid)[0] - servers0
        one_s = statistics.median(one_times)
        mine = servers + time.process_time() - own0
        others = (machine_busy_s() - busy0 - mine) / (time.perf_counter() - wall0)
        push_times = timed(lambda: client.push_gradients(grads, versions=0), per_block)
        pull_times = timed(lambda: client.pull(-1), per_block)
        client.close()
        channel.close()
    finally:
        ps.terminate()
        ps.wait()
        ps_log.close()
        echo.stdin.close()  # type: ignore[union-attr]
        echo.wait()
        tmp.cleanup()

    ps_s, echo_s = statistics.median(ps_times), statistics.median(echo_times)
    steps = breakdown(model, grads, 5 if args.quick else 10)
    n = blocks * per_block
    for kind in ("ps", "ps1", "echo"):
        cpu, faults, mine = usage[kind]
        print(
            f"{kind}: server process {cpu / n * 1e3:.1f} ms CPU and {faults / n:.0f} minor page "
            f"faults per round trip; client (this process) {mine / n:.0f} page faults"
        )
    print("\nOne one-call round trip, in-process steps (median ms, minor page faults per call):")
    for name, ms, faults in steps:
        print(f"  {name:58s} {ms:8.2f} {faults:8.0f}")
    in_process = sum(ms for _, ms, _ in steps)
    print(f"  {'sum':58s} {in_process:8.2f}")
    print(f"  {'measured one-call round trip over gRPC':58s} {one_s * 1e3:8.2f}")
    print(f"  {'raw echo round trip (same bytes)':58s} {echo_s * 1e3:8.2f}")

    results = [
        ("ps_push_pull_MB_per_s", mb_per_round_trip / ps_s, "none"),
        ("raw_grpc_echo_MB_per_s", mb_per_round_trip / echo_s, "none"),
        ("ratio_ps_over_raw", echo_s / ps_s, "none"),
        ("ratio_ps_one_call_over_raw", echo_s / one_s, ">=0.7"),
        ("ps_one_call_round_trip_ms", one_s * 1e3, "none"),
        ("ps_round_trip_ms", ps_s * 1e3, "none"),
        ("raw_echo_round_trip_ms", echo_s * 1e3, "none"),
        ("ps_push_ms", statistics.median(push_times) * 1e3, "none"),
        ("ps_pull_ms", statistics.median(pull_times) * 1e3, "none"),
        ("ps_round_trip_in_process_steps_ms", in_process, "none"),
        ("ps_server_cpu_ms_per_round_trip", usage["ps"][0] / n * 1e3, "none"),
        ("ps_one_call_server_cpu_ms_per_round_trip", usage["ps1"][0] / n * 1e3, "none"),
        ("echo_server_cpu_ms_per_round_trip", usage["echo"][0] / n * 1e3, "none"),
        ("ps_server_page_faults_per_round_trip", usage["ps"][1] / n, "none"),
        ("echo_server_page_faults_per_round_trip", usage["echo"][1] / n, "none"),
        ("other_processes_cores_busy", others, "none"),
    ]
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
