"""Benchmark recovery: how fast a job gets a failed worker's work back, and what a failure costs.

    python -P bench/recovery.py [--quick] [--dir DIR] [--repeats N] [--floor S]

The same job (`regressor.DNN` hidden_units=[8] on 8,192 generated `regression` records x 2
epochs, quick: 4,096; 2 workers, 1 PS, async SGD, batch 64, 128 records per task) runs on the
local engine
(`TrainingJob(options_from_kwargs(...)).run()`, what `elasticdl.train` does), side by side:

* baseline: no failure;
* sigkill: `--chaos worker1:kill@tasks=4` (SIGKILL after its 4th task, so mid-task);
* hang: `--chaos worker1:stop@tasks=4` (SIGSTOP) with `--task_timeout_floor S`.

Figures, from each run's `job_report.json` (times relative to the job's start, taken by the
master with one monotonic clock):

* kill -> requeued: from the chaos event (the master sends SIGKILL) to the `task_requeued`
  event of the killed worker's task, i.e. its unfinished records back in the queue. It holds
  the kernel killing the process, the watcher thread reaping it, the master asking the PS how
  far the task's gradients got, and the requeue. The report's `failures[].requeue_s` (from the
  reaped exit to the requeue) is printed too.
* hang detection: from the chaos event (SIGSTOP) to the `task_timeout` event, against the
  timeout in force (the event's `timeout_s`: the floor, unless 5x the slowest warm task is
  longer); then timeout -> requeued.
* job wall time with the failure / without (the whole `run()`: start-up, training, export).
* training again: from the killed worker's end to its replacement's first progress report
  (the report's `failures[].training_again_s`), for a relaunched worker (relaunch: a new
  process imports TensorFlow and builds the model) and for a warm spare (spare:
  `--spare_workers 1`). Both kill worker 1 after its 200th task on 30 times the epochs,
  so that the spare, started once the first task is done, is ready when the kill comes, and
  the relaunched worker has work left when it is (120 tasks on six times the epochs until
  workers got faster on 2026-11-25: the spare was promoted before it was ready, and the job
  ended before the relaunched worker trained; ten times until 2026-11-28, likewise).

Prints one `RESULT <name> <value> target=<target>` line per figure at the end (medians over
`--repeats` runs of each kind; a run whose worker 1 held no task when hit is not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_train_overhead, print_results  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


ATTEMPTS = 3
"""Runs of a kind until one hits worker 1 while it holds a task: with two minibatches a task, a
kill can land after the task's last push was applied (nothing to requeue)."""

LONG_RUN = 30
"""Epochs of the relaunch and spare runs, times the others': the job must outlast a relaunched
worker's start (10 left it no work on 2026-11-28: the workers got faster again)."""


def run_job(data: Path, root: Path, name: str, epochs: int, **extra: Any) -> dict[str, Any]:
    """One job; returns its report plus `wall_s` (the whole run)."""
    from elasticdl.runtime.master.training_job import TrainingJob
    from elasticdl.train_command import options_from_kwargs

    options = options_from_kwargs(
        model_def="regressor.DNN",
        params="hidden_units=[8]",
        data=str(data),
        output=str(root / name / "model"),
        log_dir=str(root / name / "logs"),
        num_workers=2,
        num_ps=1,
        minibatch_size=64,
        records_per_task=128,
        num_epochs=epochs,
        **extra,
    )
    start = time.perf_counter()
    result = TrainingJob(options).run()
    wall = time.perf_counter() - start
    if not result.succeeded:
        raise SystemExit(f"{name}: the job failed: {result.error}")
    report = dict(result.report)
    report["wall_s"] = wall
    return report


def _event(report: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [e for e in report["events"] if e["kind"] == kind]
    if len(found) != 1:
        raise SystemExit(f"expected one {kind} event, got {json.dumps(report['events'])[:2000]}")
    return found[0]


def _requeued_at(report: dict[str, Any], worker_id: int) -> float | None:
    """When the first task of `worker_id` went back to the queue (job-relative seconds)."""
    for event in report["tasks"]["events"]:
        if event["kind"] == "task_requeued" and event.get("worker_id") == worker_id:
            return float(event["at_s"])
    return None  # it held no task when hit (between tasks, or no work was left for it)


def sigkill_figures(report: dict[str, Any]) -> dict[str, float] | None:
    chaos = _event(report, "chaos")
    (failure,) = report["failures"]
    if _requeued_at(report, 1) is None:
        return None
    return {
        "kill_to_requeued_s": _requeued_at(report, 1) - chaos["at_s"],
        "exit_to_requeued_s": failure["requeue_s"],
        "records_requeued": failure["records_requeued"],
        "redone": report["records"]["redone"],
    }


def replacement_figures(report: dict[str, Any]) -> dict[str, float] | None:
    """How soon the replacement of worker 1 trained; for a spare, how long it had stood."""
    (failure,) = report["failures"]
    if "training_again_s" not in failure:
        return None  # the job ended before the replacement trained
    found = {"training_again_s": failure["training_again_s"]}
    for event in report["events"]:
        if event["kind"] == "spare_promoted":
            spare = report["workers"]["instances"][event["worker_id"]]
            found["spare_standing_s"] = event["at_s"] - spare["launched_at"]
    return found


def hang_figures(report: dict[str, Any]) -> dict[str, float] | None:
    stop, timeout = _event(report, "chaos"), _event(report, "task_timeout")
    if _requeued_at(report, 1) is None:
        return None
    return {
        "detection_s": timeout["at_s"] - stop["at_s"],
        "timeout_s": timeout["timeout_s"],
        "timeout_to_requeued_s": _requeued_at(report, 1) - timeout["at_s"],
        "redone": report["records"]["redone"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one run of each kind (< 1 min)")
    ap.add_argument("--dir", help="where to write data and outputs (default: a temp dir)")
    ap.add_argument("--repeats", type=int, help="runs of each kind (default 3; quick 1)")
    ap.add_argument("--floor", type=float, default=3.0, help="--task_timeout_floor of the hang")
    ap.add_argument(
        "--quiet-wait",
        type=float,
        help="seconds to wait for other processes to go quiet before each run (20; quick 0)",
    )
    args = ap.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING)
    bench = load_train_overhead()
    repeats = args.repeats or (1 if args.quick else 3)
    quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0 if args.quick else 20)
    records, epochs = (4096, 2) if args.quick else (8192, 2)

    tmp = tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-recovery-")
    root = Path(tmp.name)
    from elasticdl.runtime.data.generate import generate

    data = root / "data"
    generate("regression", data, records, records_per_file=1024)
    print(f"runtime: {bench.runtime_revision()}")
    print(
        f"nproc {os.cpu_count()}; {records} records x {epochs} epochs, 2 workers, 1 PS, "
        f"batch 64, 128 records/task; {repeats} run(s) of each kind; in {root}",
        flush=True,
    )
    kinds = {
        "baseline": {},
        "sigkill": {"chaos": "worker1:kill@tasks=4"},
        "hang": {"chaos": "worker1:stop@tasks=4", "task_timeout_floor": args.floor},
        "relaunch": {"chaos": "worker1:kill@tasks=200"},
        "spare": {"chaos": "worker1:kill@tasks=200", "spare_workers": 1},
    }
    reading = {
        "sigkill": sigkill_figures,
        "hang": hang_figures,
        "relaunch": replacement_figures,
        "spare": replacement_figures,
    }
    walls: dict[str, list[float]] = {kind: [] for kind in kinds}
    figures: dict[str, list[dict[str, float]]] = {kind: [] for kind in reading}
    for repeat in range(repeats):
        for kind, extra in kinds.items():
            for attempt in range(ATTEMPTS):
                load = bench.wait_quiet(quiet_wait)
                runs = epochs * (LONG_RUN if kind in ("relaunch", "spare") else 1)
                report = run_job(data, root, f"{kind}-{repeat}-{attempt}", runs, **extra)
                walls[kind].append(report["wall_s"])
                line = (
                    f"  {kind} #{repeat}: job {report['wall_s']:.1f} s "
                    f"(other load {load:.2f} cores)"
                )
                found = reading[kind](report) if kind in reading else {}
                if found is None:
                    line += ", worker 1 held no task when hit (or the job ended first): not counted"
                elif found:
                    figures[kind].append(found)
                    line += ", " + ", ".join(f"{k} {v:.4g}" for k, v in found.items())
                print(line, flush=True)
                if found is not None:
                    break

    if not all(figures.values()):
        raise SystemExit("no run hit worker 1 while it held a task; run again")

    def median(kind: str, key: str) -> float:
        return statistics.median(f[key] for f in figures[kind])

    base = statistics.median(walls["baseline"])
    results = [
        ("sigkill_kill_to_requeued_s", median("sigkill", "kill_to_requeued_s"), "<1"),
        ("sigkill_exit_to_requeued_s", median("sigkill", "exit_to_requeued_s"), "none"),
        ("relaunched_worker_training_again_s", median("relaunch", "training_again_s"), "none"),
        ("spare_worker_training_again_s", median("spare", "training_again_s"), "<2"),
        ("spare_standing_before_promotion_s", median("spare", "spare_standing_s"), "none"),
        ("baseline_job_s", base, "none"),
        ("sigkill_job_s", statistics.median(walls["sigkill"]), "none"),
        ("sigkill_job_ratio_to_baseline", statistics.median(walls["sigkill"]) / base, "none"),
        ("hang_timeout_s", median("hang", "timeout_s"), f"={args.floor:g}"),
        ("hang_detection_s", median("hang", "detection_s"), "none"),
        (
            "hang_detection_minus_timeout_s",
            statistics.median(f["detection_s"] - f["timeout_s"] for f in figures["hang"]),
            "<1",
        ),
        ("hang_timeout_to_requeued_s", median("hang", "timeout_to_requeued_s"), "<1"),
        ("hang_job_s", statistics.median(walls["hang"]), "none"),
        ("hang_job_ratio_to_baseline", statistics.median(walls["hang"]) / base, "none"),
    ]
    tmp.cleanup()
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
