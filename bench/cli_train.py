"""Benchmark `elasticdl train` as a user runs it, from the shell to the end, against a Keras
script that does the same training in one process.

    python -P bench/cli_train.py [--quick] [--dir DIR] [--repeats 3] [--workers 1]

The job reports count from the moment the master starts its PS and workers (bench/
train_overhead.py compares those); a user waits for more: Python and the CLI starting, the
master importing TensorFlow and checking the model and the data, the job's processes, the
training, the export. Three commands on the same records, alternating, `--repeats` times
(each a fresh process, its whole wall time; TensorFlow's default threads on both sides):

  * **elasticdl**: `python -P -m elasticdl train` of regressor.DNN (hidden_units=[64, 32],
    batch 256, async, `--workers` workers, 1 PS) on generated `regression` records (32,768
    with --quick, else 131,072);
  * **elasticdl, no standbys**: the same command in a process that imports TensorFlow before
    the CLI runs: the master then has no import for standby processes to overlap
    (runtime/master/standbys.py) and starts none, so its job starts as before them;
  * **Keras script**: bench/train_overhead.py's Keras side in a fresh process (import
    TensorFlow, read the records, the same model, dataset_fn and batch, `fit`).

Prints the median wall times, the reports' `preparing_seconds` and `seconds`, and
`RESULT <name> <value> target=<target>` lines; among them the ratio bench/train_overhead.py
calls "including start-up" (the report's records/s over Keras `fit`'s, tracing included,
importing not) as the command gives it: with standbys the report's window no longer holds
the PS's and the worker's TensorFlow import (it happened while the master prepared, counted in
`preparing_seconds`), so read it beside the whole-command ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_train_overhead, print_results, runtime_revision, wait_quiet  # noqa: E402

_NO_STANDBYS = (
    "import sys, tensorflow; from elasticdl.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)  # noqa: S603
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:6]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, done.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="32,768 records, 1 repeat (< 1 min)")
    ap.add_argument("--dir", help="where to write data and outputs (default: a temp dir)")
    ap.add_argument("--repeats", type=int, help="rounds of the three commands (3; quick 1)")
    ap.add_argument("--workers", type=int, default=1, help="the job's workers (1)")
    args = ap.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    bench = load_train_overhead()
    case = bench.CASES["dnn"]
    records = case.quick_records if args.quick else case.records
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-cli-train-"))
    data = bench.make_data(case, root, records)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR"}
    job = [
        *("--log_level", "warning", "train", "--model_def", case.model_def),
        *("--params", case.params),
        *("--data", str(data), "--num_workers", str(args.workers), "--num_ps", "1"),
        *("--minibatch_size", str(case.batch), "--num_epochs", "1", "--use_async", "true"),
        *("--records_per_task", str(case.records_per_task)),
    ]
    commands = {
        "elasticdl": [sys.executable, "-P", "-m", "elasticdl", *job],
        "no_standbys": [sys.executable, "-P", "-c", _NO_STANDBYS, *job],
        "keras": bench.keras_child_argv(case, data, threads=0, epochs=1),
    }
    print(f"runtime: {runtime_revision()}; {records} records, {args.workers} worker(s), 1 PS")
    walls: dict[str, list[float]] = {name: [] for name in commands}
    rates: dict[str, list[float]] = {name: [] for name in commands}
    phases: dict[str, list[tuple[float, float]]] = {"elasticdl": [], "no_standbys": []}
    for round_ in range(repeats):
        for name, command in commands.items():
            load = wait_quiet(0 if args.quick else 10)
            output = root / f"out-{name}-{round_}"
            argv_ = [*command, "--output", str(output)] if name != "keras" else command
            wall, stdout = _timed(argv_, env)
            walls[name].append(wall)
            if name == "keras":
                found = [x for x in stdout.splitlines() if x.startswith("KERAS ")][-1]
                rates[name].append(json.loads(found[len("KERAS ") :])["records_per_s"])
            line = f"round {round_ + 1}: {name:12s} {wall:6.2f} s (others' load {load:.2f})"
            if name in phases:
                throughput = json.loads((output / "job_report.json").read_text())["throughput"]
                rates[name].append(throughput["records_per_second"])
                preparing, training = throughput["preparing_seconds"], throughput["seconds"]
                phases[name].append((preparing, training))
                line += f"; preparing {preparing:.2f} s, training {training:.2f} s"
            print(line, flush=True)
    median = {name: statistics.median(values) for name, values in walls.items()}
    results = [
        ("cli_train_wall_s", median["elasticdl"], "none"),
        ("cli_train_wall_without_standbys_s", median["no_standbys"], "none"),
        ("keras_script_wall_s", median["keras"], "none"),
        ("ratio_keras_script_over_cli_train", median["keras"] / median["elasticdl"], "none"),
        ("standby_gain_s", median["no_standbys"] - median["elasticdl"], "none"),
    ]
    rate = {name: statistics.median(values) for name, values in rates.items()}
    for name, tag, target in (
        ("elasticdl", "", ">=0.55"),
        ("no_standbys", "_without_standbys", "none"),
    ):
        ratio = rate[name] / rate["keras"]
        results.append((f"ratio_incl_startup_report_over_keras_fit{tag}", ratio, target))
    for name, pairs in phases.items():
        results.append((f"{name}_preparing_s", statistics.median(p for p, _ in pairs), "none"))
        results.append((f"{name}_report_seconds", statistics.median(t for _, t in pairs), "none"))
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
