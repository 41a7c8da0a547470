"""Every benchmark in bench/ still starts: `--help` answers and offers `--quick` (a change to a
shared helper such as train_overhead.Case once broke bench/embedding.py unnoticed); the timed
job most of them build on runs a real job, scaling's steady window says when it is empty, and
master_scale's quick path runs at a tiny size."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
CHILDREN = {"pss_anchor.py"}
"""Scripts another benchmark runs with its own arguments (no command line of their own)."""

SCRIPTS = sorted(
    p.name for p in BENCH.glob("*.py") if not p.name.startswith("_") and p.name not in CHILDREN
)


def test_the_benchmarks_are_found():
    assert {"train_overhead.py", "embedding.py", "ps.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_starts_and_offers_quick(script):
    run = subprocess.run(  # noqa: S603
        [sys.executable, "-P", str(BENCH / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "--quick" in run.stdout


def test_thread_window_names_the_threads_that_used_the_cpu():
    """bench/_thread_cpu.py (train_overhead's `--profile`): a Python thread's CPU is reported
    under its `threading` name, and the process's total holds it."""
    import threading
    import time

    sys.path.insert(0, str(BENCH))
    try:
        from _thread_cpu import ThreadWindow
    finally:
        sys.path.remove(str(BENCH))

    spun, leave = threading.Event(), threading.Event()

    def spin() -> None:
        while time.thread_time() < 0.3:
            pass
        spun.set()
        leave.wait()  # alive at `stop`: an ended thread has no row

    window = ThreadWindow()
    window.start()
    spinner = threading.Thread(target=spin, name="spinner")
    spinner.start()
    try:
        assert spun.wait(timeout=60)
        window.stop()
    finally:
        leave.set()
        spinner.join()
    used = dict(window.rows)
    assert used.get("spinner", 0.0) >= 0.25, window.rows
    assert window.total_s >= used["spinner"]
    assert "spinner" in window.report("this process", per=10)


def test_the_timed_job_of_train_overhead_runs_a_real_job(tmp_path):
    """bench/train_overhead.py times a job through a subclass of TrainingJob (its progress
    reports as the master receives them); a change to the job's internals once broke every
    benchmark built on it with no test failing. A tiny regressor.DNN job through it: every
    record trained, the timeline and the steady figures read from it."""
    import dataclasses

    overhead = _bench_module("train_overhead")

    # Four tasks: the timeline starts at the first report that counts records (with its push in
    # flight, a worker's first report counts none), so one task would leave a single point.
    case = dataclasses.replace(overhead.CASES["dnn"], batch=64, records_per_file=2048)
    assert case.records_per_task == 1024
    data = overhead.make_data(case, tmp_path, 4096)
    figures = overhead.elastic_train(case, data, tmp_path, threads=1, epochs=1)
    assert figures["records"] == 4096
    assert figures["timeline"][-1][1] == 4096
    assert figures["tasks_seen"] >= 2
    assert figures["steady_ms_per_batch"] > 0
    assert figures["startup_s"] > 0


def _bench_module(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCH))


def test_scaling_gives_no_steady_rate_for_a_window_too_short_to_hold_one():
    """bench/scaling.py once reported a 2-worker speedup of 0 when its data ran out before both
    workers had reported: a window too short gives NaN, a long one the records over its time."""
    scaling = _bench_module("scaling")
    # (time, records, version, worker): worker 1 first reports at 1.0 s
    timeline = [(0.0, 256, 1, 0), (1.0, 512, 2, 1), (1.2, 768, 3, 0), (1.3, 1024, 4, 1)]
    rate, window = scaling.steady_all_workers(timeline)
    assert math.isnan(rate) and window == pytest.approx(0.3)
    timeline.append((3.0, 2048, 5, 0))
    rate, window = scaling.steady_all_workers(timeline)
    assert window == pytest.approx(2.0) and rate == pytest.approx((2048 - 512) / 2.0)


def test_master_scale_quick_path_runs_a_tiny_simulated_job_and_pods():
    """bench/master_scale.py's quick path at a tiny size: a real master, 40 simulated workers
    (4 of them lost mid-run and replaced), every record applied exactly once, `elasticdl
    status` answering, and 12 pods created and replaced on the fake API server."""
    run = subprocess.run(  # noqa: S603
        [
            sys.executable,
            "-P",
            str(BENCH / "master_scale.py"),
            "--quick",
            "--workers",
            "40",
            "--hosts",
            "1",
            "--pods",
            "12",
            "--task-seconds",
            "1",
            "--baseline",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = {
        line.split()[1]: float(line.split()[2])
        for line in run.stdout.splitlines()
        if line.startswith("RESULT ")
    }
    assert results["scale_workers"] == 40
    assert results["scale_records_exact"] == 1, run.stdout[-3000:]
    assert 0 < results["scale_status_ms"] < 10_000
    assert results["scale_master_cpu_cores"] > 0 and results["scale_report_mb"] > 0
    assert math.isfinite(results["scale_master_p99_ms"])
    assert 0 < results["scale_pods_running_s"] < 300
