"""Benchmark PS-backed embedding tables: DeepFM on Criteo-layout data, elasticdl vs plain Keras.

    python -P bench/embedding.py [--quick] [--dir DIR] [--threads 1] [--cases big,small,ps]

`--quick` runs the big case only (4,096 records; under a minute on an idle machine) unless
`--cases` says otherwise; each case otherwise starts its own jobs and Keras process.

Data: `elasticdl data gen ctr` records (default vocabulary scale: about 340k distinct values
over C1..C26), batch 512, Adam.

  * big:   DeepFM with 26 tables of `hash_buckets` = 200,000 rows each (5.2 M rows, 9 wide).
           Keras: `deepfm.DeepFM` with `embedding="keras"` (26 plain `keras.layers.Embedding`
           of 200,000 rows) and `model.fit` in a fresh process; elasticdl: the same model with
           `elasticdl.layers.Embedding` (ids hashed into the same 200,000 buckets), 1 worker +
           1 PS. Figure: records/s ratio elasticdl / Keras (target >= 3): Keras's Adam updates
           every row of every table each step, the PS only the rows the minibatch touched.
  * small: the same with 3,800 rows per table (98,800 rows in all; target >= 0.8).
  * ps:    `deepfm.DeepFM` as shipped (63-bit hashed ids), 1 worker with 1 PS and with 2 PS:
           records per CPU-second of the job's processes (worker + PS), steady window.

Keras figures come from `bench/train_overhead.py`'s `keras_fit` (records / fit wall time, and
the steady rate after the first minibatch); elasticdl figures from its `elastic_train`-style
timed job (records / report throughput, and the steady rate between the first progress
report that counts an applied minibatch and the last). Ratios use the steady rates (tracing
and process start-up excluded) and, separately, the rates with start-up. Both sides get
`--threads` TF threads.

Prints one `RESULT <name> <value> target=<target>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_train_overhead, loadavg, print_results, runtime_revision  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

overhead = load_train_overhead()
BATCH = 512
RECORDS_PER_TASK = 8 * BATCH


def case(name: str, params: str, records: int, quick: int) -> Any:
    """A `train_overhead.Case` for DeepFM."""
    return overhead.Case(
        name=name,
        dataset="ctr",
        model_def="deepfm.DeepFM",
        params=params,
        batch=BATCH,
        steady_target=0.0,  # this benchmark's targets: TARGETS
        startup_target=None,
        records=records,
        records_per_file=16_384,
        epochs=1,
        quick_records=quick,
        quick_epochs=1,
    )


CASES = {
    "big": case("big", "hash_buckets=200000", records=16_384, quick=4_096),
    "small": case("small", "hash_buckets=3800", records=65_536, quick=16_384),
    "ps": case("ps", "", records=65_536, quick=8_192),
}
TARGETS = {"big": ">=3", "small": ">=0.8"}


def keras_child(spec: dict[str, Any]) -> dict[str, Any]:
    base = CASES[spec["case"]]
    keras_params = f"embedding='keras', {base.params}"
    keras_case = overhead.Case(**{**base.__dict__, "params": keras_params})
    return overhead.keras_fit(keras_case, spec["data"], spec["threads"], spec["epochs"])


def keras_in_subprocess(name: str, data: Path, threads: int) -> dict[str, Any]:
    spec = json.dumps({"case": name, "data": str(data), "threads": threads, "epochs": 1})
    argv = [sys.executable, "-P", str(Path(__file__).resolve()), "--keras-child", spec]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"Keras subprocess failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("KERAS ")][-1]
    return json.loads(line[len("KERAS ") :])


def elastic(c: Any, data: Path, root: Path, threads: int, num_ps: int) -> dict[str, Any]:
    """One job (1 worker, `num_ps` PS, async) timed as train_overhead's `elastic_train`."""
    from elasticdl.train_command import options_from_kwargs

    name = f"{c.name}-{num_ps}ps"
    options = options_from_kwargs(
        model_def=c.model_def,
        data=str(data),
        output=str(root / f"out-{name}"),
        params=c.params,
        num_workers=1,
        num_ps=num_ps,
        minibatch_size=c.batch,
        num_epochs=1,
        records_per_task=RECORDS_PER_TASK,
        intra_op_threads=threads,
        use_async=True,
        log_dir=str(root / f"log-{name}"),
    )
    job = overhead.timed_job_class()(options)
    result = job.run()
    if not result.succeeded:
        raise RuntimeError(f"elasticdl job failed: {result.error}")
    timeline = job.timeline
    (t_first, r_first, *_), (t_last, r_last, *_) = timeline[0], timeline[-1]
    batches = max(1, len(timeline) - 1)
    cpu_ms: dict[str, float] = {}
    if len(job.cpu_marks) == 2:
        (_, first), (_, last) = job.cpu_marks
        cpu_ms = {role: (last[role] - first.get(role, 0.0)) / batches * 1e3 for role in last}
    job_cpu_ms = sum(v for k, v in cpu_ms.items() if k.startswith(("worker", "ps")))
    return {
        "records_per_s": result.report["throughput"]["records_per_second"],
        "steady_records_per_s": (r_last - r_first) / (t_last - t_first),
        "steady_ms_per_batch": (t_last - t_first) / batches * 1e3,
        "job_cpu_ms_per_batch": job_cpu_ms,
        "records_per_cpu_s": BATCH / (job_cpu_ms / 1e3) if job_cpu_ms else 0.0,
        "cpu_ms_per_batch": {k: round(v, 1) for k, v in cpu_ms.items()},
        "final_loss": result.report["final_loss"],
        "auc": result.report.get("metrics", {}).get("auc"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records (< 1 min)")
    ap.add_argument("--dir", help="where to write data and outputs (default: a temp dir)")
    ap.add_argument("--threads", type=int, default=1, help="TF intra/inter-op threads, both sides")
    ap.add_argument("--cases", help="comma-separated: big, small, ps (default all; quick: big)")
    ap.add_argument("--keras-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.keras_child:
        print("KERAS " + json.dumps(keras_child(json.loads(args.keras_child))), flush=True)
        return 0

    tmp = tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-embedding-")
    root = Path(tmp.name)
    results: list[tuple[str, float, str]] = []

    def result(name: str, value: float, target: str = "none") -> None:
        results.append((name, value, target))
        print(f"  {name} = {value:.4g}", flush=True)

    print(f"runtime: {runtime_revision()}; load average {loadavg()}; nproc {os.cpu_count()}")
    for name in (args.cases or ("big" if args.quick else "big,small,ps")).split(","):
        c = CASES[name]
        records = c.quick_records if args.quick else c.records
        t0 = time.perf_counter()
        data = overhead.make_data(c, root, records)
        print(f"[{name}] {records} ctr records, batch {BATCH}, params {c.params!r} "
              f"(data in {time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
        if name == "ps":
            one = elastic(c, data, root, args.threads, num_ps=1)
            two = elastic(c, data, root, args.threads, num_ps=2)
            print(f"  1 PS: {one}\n  2 PS: {two}", flush=True)
            result("deepfm_1ps_records_per_cpu_s", one["records_per_cpu_s"])
            result("deepfm_2ps_records_per_cpu_s", two["records_per_cpu_s"])
            result("deepfm_1ps_steady_records_per_s", one["steady_records_per_s"])
            result("deepfm_2ps_steady_records_per_s", two["steady_records_per_s"])
            result("deepfm_2ps_vs_1ps_per_cpu", two["records_per_cpu_s"] / one["records_per_cpu_s"])
            continue
        keras = keras_in_subprocess(name, data, args.threads)
        edl = elastic(c, data, root, args.threads, num_ps=1)
        print(f"  keras: {overhead.rounded(keras)}\n  elasticdl: {edl}", flush=True)
        result(f"{name}_keras_steady_records_per_s", keras["steady_records_per_s"])
        result(f"{name}_elasticdl_steady_records_per_s", edl["steady_records_per_s"])
        result(f"{name}_ratio_incl_startup", edl["records_per_s"] / keras["records_per_s"])
        result(
            f"{name}_ratio_steady",
            edl["steady_records_per_s"] / keras["steady_records_per_s"],
            TARGETS[name],
        )
    print(f"load average at the end {loadavg()}")
    tmp.cleanup()
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
