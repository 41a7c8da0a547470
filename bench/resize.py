"""Benchmark resizing a running job: how fast a request is applied, and what growing buys.

    python -P bench/resize.py [--quick] [--dir DIR] [--quiet-wait S]

The same job (`regressor.DNN` hidden_units=[8] on 16,384 generated `regression` records x 2
epochs, quick: 8,192 x 1; 1 PS, async SGD, batch 64, 128 records per task) runs on the local
engine, side by side:

* one: 1 worker throughout;
* grown: starts with 1 worker and is asked for 2 (`elasticdl scale --master`, the gRPC call)
  as soon as its master serves;
* two: 2 workers from the start.

Figures: the request's round trip (call to answer: the master applies it between two passes of
its loop and answers), the tasks the added worker trained, and the job wall times (the whole
`run()`), as ratios grown/one and grown/two: what growing a job buys, after the added worker's
start-up (TensorFlow import, model build, first pull), against starting with both. Prints
one `RESULT <name> <value>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import loadavg, runtime_revision, wait_quiet  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def run_job(data: Path, root: Path, name: str, epochs: int, workers: int, grow_to: int = 0):
    """One job; its report plus `wall_s`, and (grown) the request's `answer_s`/`answered_at`."""
    from elasticdl.runtime.master.training_job import TrainingJob
    from elasticdl.scale_command import scale_via_master
    from elasticdl.train_command import options_from_kwargs

    options = options_from_kwargs(
        model_def="regressor.DNN",
        params="hidden_units=[8]",
        data=str(data),
        output=str(root / name / "model"),
        log_dir=str(root / name / "logs"),
        num_workers=workers,
        num_ps=1,
        minibatch_size=64,
        records_per_task=128,
        num_epochs=epochs,
    )
    job = TrainingJob(options)
    figures: dict[str, Any] = {}

    def grow() -> None:
        while not job.master_addr:
            time.sleep(0.01)
        start = time.perf_counter()
        secret = str(root / name / "logs")
        figures["answer"] = scale_via_master(job.master_addr, grow_to, secret_file=secret)
        figures["answer_s"] = time.perf_counter() - start

    thread = threading.Thread(target=grow, daemon=True) if grow_to else None
    start = time.perf_counter()
    if thread:
        thread.start()
    result = job.run()
    wall = time.perf_counter() - start
    if thread:
        thread.join(5)
    if not result.succeeded:
        raise SystemExit(f"{name}: the job failed: {result.error}")
    return {**result.report, **figures, "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller job (~1 min in all)")
    ap.add_argument("--dir", default="", help="work directory (default: a temporary one)")
    ap.add_argument("--quiet-wait", type=float, default=0.0, help="wait up to S s for quiet")
    args = ap.parse_args(argv)
    from elasticdl.runtime.data import generate as gen

    records, epochs = (8192, 1) if args.quick else (16384, 2)
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-resize-"))
    data = root / "data"
    if not data.exists():
        gen.generate("regression", str(data), records, records_per_file=4096)
    print(f"runtime {runtime_revision()}; {records} records x {epochs} epoch(s)")
    reports = {}
    for name, workers, grow_to in (("one", 1, 0), ("grown", 1, 2), ("two", 2, 0)):
        if args.quiet_wait:
            wait_quiet(args.quiet_wait)
        reports[name] = run_job(data, root, name, epochs, workers, grow_to)
        print(f"{name}: {reports[name]['wall_s']:.1f} s (load {loadavg()})")
    grown = reports["grown"]
    results = {
        "request_round_trip_s": grown["answer_s"],
        "wall_one_s": reports["one"]["wall_s"],
        "wall_grown_s": grown["wall_s"],
        "wall_two_s": reports["two"]["wall_s"],
        "grown_over_one": grown["wall_s"] / reports["one"]["wall_s"],
        "grown_over_two": grown["wall_s"] / reports["two"]["wall_s"],
        "added_worker_tasks": grown["tasks"]["by_worker"].get("1", 0),
    }
    print(f"answer: {grown['answer']}")
    for name, value in results.items():
        print(
            f"RESULT {name} {value:.3f}" if isinstance(value, float) else f"RESULT {name} {value}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
