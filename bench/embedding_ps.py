"""Benchmark embedding tables on the parameter server: unique-id lookups and sparse Adam applies.

    python -P bench/embedding_ps.py [--quick] [--rows 1000000] [--dim 16]

1. The pure core (`EmbeddingTable` + sparse `Adam`, in this process): a table of `--rows` rows
   of `--dim` float32, then lookups of batches of unique existing ids (random over the table)
   and Adam applications to such batches. Rates are rows per CPU second of this process (numpy
   runs these single-threaded, so that is rows/s per core, unaffected by other processes
   sharing the machine) and rows per wall second.
2. Through gRPC on 127.0.0.1: one real PS process (`python -P -m elasticdl.runtime.ps.main`,
   the job's optimizer is Adam: builtin regressor.DNN) and a `PSClient` in this process;
   `pull_embedding_vectors` and `push_gradients(embedding_grads=...)` of the same batches.
   Rates per CPU second of the PS process (from /proc, pooled over >= 1 CPU second; 0.3 with
   --quick) and per wall second (client included).
3. Memory (MB = 10^6 bytes): what the table allocates per million rows (rows, ids, hash
   index, Adam's slots), and the PS process's resident-memory growth per million rows created
   through gRPC.

Targets (issue 14): lookup >= 5,000,000 rows/s and sparse Adam >= 2,000,000 rows/s per core at
dim 16. Prints one `RESULT <name> <value> target=<target>` line per figure at the end.
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
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CLOCK_TICK, loadavg, machine_busy_s, runtime_revision  # noqa: E402

TABLE = "bench/embedding"


def proc_cpu_s(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def proc_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def rates(fn: Callable[[np.ndarray], object], batches: list[np.ndarray], pid: int | None = None):
    """(rows per CPU second of `pid` (None: this process), rows per wall second), medians over
    batches."""
    per_cpu, per_wall = [], []
    for ids in batches:
        cpu0 = time.process_time() if pid is None else proc_cpu_s(pid)
        wall0 = time.perf_counter()
        fn(ids)
        wall = time.perf_counter() - wall0
        cpu = (time.process_time() if pid is None else proc_cpu_s(pid)) - cpu0
        per_wall.append(ids.size / wall)
        if cpu > 0:
            per_cpu.append(ids.size / cpu)
    return statistics.median(per_cpu) if per_cpu else float("nan"), statistics.median(per_wall)


def pooled_rate(
    fn: Callable[[np.ndarray], object], batches: list[np.ndarray], pid: int, min_cpu_s: float
) -> float:
    """Rows per CPU second of process `pid`, going over `batches` until it used `min_cpu_s`
    (/proc counts in clock ticks of 10 ms, too coarse for a few calls) or 20 s passed."""
    cpu0, rows, deadline = proc_cpu_s(pid), 0, time.monotonic() + 20
    while True:
        for ids in batches:
            fn(ids)
            rows += ids.size
        cpu = proc_cpu_s(pid) - cpu0
        if cpu >= min_cpu_s or time.monotonic() > deadline:
            return rows / cpu if cpu > 0 else float("nan")


def core(args: argparse.Namespace, batch: int, repeats: int) -> dict[str, float]:
    from elasticdl.runtime.ps.embedding_table import EmbeddingTable
    from elasticdl.runtime.ps.sparse_optimizers import SGD, Adam

    rng = np.random.default_rng(0)
    all_ids = rng.choice(2**62, size=args.rows, replace=False).astype(np.int64) - 2**61
    table = EmbeddingTable(TABLE, args.dim)
    start = time.process_time()
    for chunk in np.array_split(all_ids, max(1, args.rows // 100_000)):
        table.lookup(chunk)
    create = args.rows / (time.process_time() - start)
    sgd_bytes = table.nbytes()
    batches = [rng.choice(all_ids, size=batch, replace=False) for _ in range(repeats)]
    lookup_cpu, lookup_wall = rates(table.lookup, batches)
    grads = rng.standard_normal((batch, args.dim)).astype(np.float32) * 0.01
    adam = Adam(learning_rate=0.001)
    table.apply(batches[0], grads, adam)  # allocates the slots
    adam_cpu, adam_wall = rates(lambda ids: table.apply(ids, grads, adam), batches)
    sgd = SGD(learning_rate=0.1)
    sgd_table = EmbeddingTable("sgd", args.dim)
    sgd_table.lookup(all_ids)
    sgd_cpu, _ = rates(lambda ids: sgd_table.apply(ids, grads, sgd), batches)
    return {
        "create_rows_per_cpu_s": create,
        "lookup_rows_per_cpu_s": lookup_cpu,
        "lookup_rows_per_wall_s": lookup_wall,
        "adam_rows_per_cpu_s": adam_cpu,
        "adam_rows_per_wall_s": adam_wall,
        "sgd_rows_per_cpu_s": sgd_cpu,
        "mb_per_million_rows_no_slots": sgd_bytes / args.rows,
        "mb_per_million_rows_adam": table.nbytes() / args.rows,
    }


def through_grpc(args: argparse.Namespace, batch: int, repeats: int) -> dict[str, float]:
    from elasticdl.runtime.job_config import JobConfig
    from elasticdl.runtime.master.ports import choose_port
    from elasticdl.runtime.ps.client import PSClient
    from elasticdl.runtime.ps.embedding_table import TableSpec
    from elasticdl.runtime.zoo_source import builtin_zoo_root

    rng = np.random.default_rng(1)
    rows = args.rows
    all_ids = rng.choice(2**62, size=rows, replace=False).astype(np.int64) - 2**61
    tmp = tempfile.TemporaryDirectory(prefix="bench-embedding-ps-")
    config = JobConfig(
        job_name="embedding-ps-bench",
        model_def="regressor.DNN",
        model_zoo_root=str(builtin_zoo_root()),
        params="hidden_units=[8], learning_rate=0.001",
    )
    config_path = config.write(Path(tmp.name) / "job.json")
    port = choose_port()
    log = (Path(tmp.name) / "ps.log").open("wb")
    command = [sys.executable, "-P", "-m", "elasticdl.runtime.ps.main", "--config",
               str(config_path), "--ps_id", "0", "--port", str(port)]  # fmt: skip
    ps = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
    try:
        client = PSClient([f"127.0.0.1:{port}"], timeout_s=120)
        client.wait_ready(timeout_s=120)
        client.push_model({}, embedding_tables=[TableSpec(TABLE, args.dim)])
        rss0 = proc_rss_bytes(ps.pid)
        for chunk in np.array_split(all_ids, max(1, rows // 100_000)):
            client.pull_embedding_vectors(TABLE, chunk)
        rss_rows = proc_rss_bytes(ps.pid) - rss0
        batches = [rng.choice(all_ids, size=batch, replace=False) for _ in range(repeats)]
        grads = rng.standard_normal((batch, args.dim)).astype(np.float32) * 0.01

        def pull(ids: np.ndarray) -> None:
            assert client.pull_embedding_vectors(TABLE, ids).shape == (ids.size, args.dim)

        def push(ids: np.ndarray) -> None:
            assert client.push_gradients({}, 0, embedding_grads={TABLE: (ids, grads)}).accepted

        push(batches[0])  # allocates Adam's slots
        rss_before_slots = rss_rows
        min_cpu_s = 0.3 if args.quick else 1.0
        pull_ps_cpu = pooled_rate(pull, batches, ps.pid, min_cpu_s)
        _, pull_wall = rates(pull, batches, ps.pid)
        push_ps_cpu = pooled_rate(push, batches, ps.pid, min_cpu_s)
        _, push_wall = rates(push, batches, ps.pid)
        rss_adam = proc_rss_bytes(ps.pid) - rss0
        client.close()
    finally:
        ps.terminate()
        ps.wait(timeout=30)
        log.close()
        tmp.cleanup()
    return {
        "grpc_lookup_rows_per_ps_cpu_s": pull_ps_cpu,
        "grpc_lookup_rows_per_wall_s": pull_wall,
        "grpc_adam_rows_per_ps_cpu_s": push_ps_cpu,
        "grpc_adam_rows_per_wall_s": push_wall,
        "ps_rss_mb_per_million_rows_no_slots": rss_before_slots / rows,
        "ps_rss_mb_per_million_rows_adam": rss_adam / rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller table, fewer batches")
    parser.add_argument("--rows", type=int, default=0, help="table rows (default 1M; quick 250k)")
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--batch", type=int, default=0, help="unique ids per call")
    args = parser.parse_args(argv)
    args.rows = args.rows or (250_000 if args.quick else 1_000_000)
    batch = args.batch or (32_768 if args.quick else 65_536)
    repeats = 5 if args.quick else 15
    print(f"runtime: {runtime_revision()}; load average {loadavg()} (shared machine)")
    print(f"table: {args.rows} rows of dim {args.dim}; batches of {batch} unique ids", flush=True)
    busy0, wall0 = machine_busy_s(), time.perf_counter()
    results = core(args, batch, repeats)
    print(
        f"core: lookup {results['lookup_rows_per_cpu_s'] / 1e6:.2f} M rows/CPU-s "
        f"({results['lookup_rows_per_wall_s'] / 1e6:.2f} M/wall-s), Adam "
        f"{results['adam_rows_per_cpu_s'] / 1e6:.2f} M rows/CPU-s "
        f"({results['adam_rows_per_wall_s'] / 1e6:.2f} M/wall-s)",
        flush=True,
    )
    results.update(through_grpc(args, batch, repeats))
    busy = (machine_busy_s() - busy0) / (time.perf_counter() - wall0)
    print(f"machine busy during the run: {busy:.2f} cores of {os.cpu_count()}")
    targets = {
        "lookup_rows_per_cpu_s": ">=5000000",
        "adam_rows_per_cpu_s": ">=2000000",
        "grpc_lookup_rows_per_ps_cpu_s": ">=5000000",
        "grpc_adam_rows_per_ps_cpu_s": ">=2000000",
    }
    print()
    for name, value in results.items():
        print(f"RESULT embedding_{name} {value:.4g} target={targets.get(name, 'none')}")
    print(f"RESULT embedding_machine_busy_cores {busy:.3g} target=none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
