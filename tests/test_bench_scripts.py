"""Every benchmark in bench/ still starts: `--help` answers and offers `--quick` (a change to a
shared helper such as train_overhead.Case once broke bench/embedding.py unnoticed)."""

from __future__ import annotations

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
