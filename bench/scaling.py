"""Benchmark worker scaling: the same job with 1 and with 2 workers, side by side.

    python -P bench/scaling.py [--quick] [--dir DIR] [--cases dnn,mnist] [--threads 1]

Each case (the models, data and batch sizes of bench/train_overhead.py: `regressor.DNN` at
batch 256, the mnist CNN at batch 64) runs as a job on the local engine
(`TrainingJob(options_from_kwargs(...)).run()`, what `elasticdl.train` does) with 1 PS, async
SGD and every TensorFlow process limited to `--threads` intra- and inter-op threads
(`intra_op_threads`), first with 1 worker, then with 2, on the same records.

Figures per run: the job report's records/s (process launch to the last task, so start-up is
in it) and a steady rate: records reported between the moment every worker had trained its
first minibatch and the last report, over that time. The ratio 2 workers / 1 worker is given
for both. CPU time per minibatch of each process over the steady window is printed too: on
this 2-core machine the master, the PS and two workers share two cores (and whatever else the
machine runs, also printed), so little speedup is expected.

Prints one `RESULT <name> <value> target=<target>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_train_overhead, print_results  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


MIN_STEADY_S = 0.5
"""A steady window shorter than this gives no rate (NaN): progress reports come at most every
0.1 s a worker, so a shorter window holds too few of them to mean anything."""


def steady_all_workers(timeline: list[tuple[float, int, int, int]]) -> tuple[float, float]:
    """(records/s, seconds) from the first moment every worker had reported to the last report;
    the rate is NaN when that window is shorter than `MIN_STEADY_S`."""
    first: dict[int, float] = {}
    for now, _, _, worker in timeline:
        first.setdefault(worker, now)
    start = max(first.values())
    inside = [(now, records) for now, records, _, _ in timeline if now >= start]
    (t0, r0), (t1, r1) = inside[0], inside[-1]
    if t1 - t0 < MIN_STEADY_S:
        return math.nan, t1 - t0
    return (r1 - r0) / (t1 - t0), t1 - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="the dnn case only, no quiet wait (< 1 min)"
    )
    ap.add_argument("--dir", help="where to write data and outputs (default: a temp dir)")
    ap.add_argument("--cases", help="comma-separated: dnn, mnist (default: both; quick: dnn)")
    ap.add_argument("--threads", type=int, default=1, help="intra_op_threads per TF process")
    ap.add_argument(
        "--quiet-wait",
        type=float,
        help="seconds to wait for other processes to go quiet before each run (20; quick 0)",
    )
    args = ap.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING)
    bench = load_train_overhead()
    quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0 if args.quick else 20)
    cases = (args.cases or ("dnn" if args.quick else "dnn,mnist")).split(",")

    tmp = tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-scaling-")
    root = Path(tmp.name)
    results: list[tuple[str, float, str]] = []

    def result(name: str, value: float, target: str = "none") -> None:
        results.append((name, value, target))
        print(f"  {name} = {value:.4g}", flush=True)

    print(f"runtime: {bench.runtime_revision()}")
    print(f"intra_op_threads={args.threads} per TF process; nproc {os.cpu_count()}; in {root}")
    for name in cases:
        case = bench.CASES[name]
        # The full size in --quick too: at ~95,000 records/s a worker, the quick size (32,768)
        # left two workers no steady window at all.
        records = case.records
        data = bench.make_data(case, root, records)
        print(
            f"[{name}] {records} records, batch {case.batch}, {case.records_per_task} "
            "records/task, 1 epoch",
            flush=True,
        )
        runs: dict[int, dict[str, Any]] = {}
        for workers in (1, 2):
            load = bench.wait_quiet(quiet_wait)
            print(f"  other processes' load before: {load:.2f} cores", flush=True)
            t0 = time.perf_counter()
            run = bench.elastic_train(case, data, root, args.threads, 1, num_workers=workers)
            rate, window = steady_all_workers(run["timeline"])
            run["steady_all_workers_records_per_s"] = rate
            runs[workers] = run
            print(
                f"  {workers} worker(s): {run['records_per_s']:.0f} records/s (report), "
                f"steady {rate:.0f} records/s over {window:.1f} s, start-up "
                f"{run['startup_s']:.1f} s, job {time.perf_counter() - t0:.1f} s; CPU ms per "
                f"minibatch: {run['steady_cpu_ms_per_batch']}",
                flush=True,
            )
        for workers, run in runs.items():
            result(f"{name}_{workers}w_records_per_s", run["records_per_s"])
            result(
                f"{name}_{workers}w_steady_records_per_s", run["steady_all_workers_records_per_s"]
            )
        result(
            f"{name}_speedup_2w_over_1w_incl_startup",
            runs[2]["records_per_s"] / runs[1]["records_per_s"],
        )
        result(
            f"{name}_speedup_2w_over_1w_steady",
            runs[2]["steady_all_workers_records_per_s"]
            / runs[1]["steady_all_workers_records_per_s"],
        )

    tmp.cleanup()
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
