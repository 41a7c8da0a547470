"""Helpers the benchmark scripts share: what was measured, and how busy the machine was.

Scripts run as `python -P bench/<name>.py`, so bench/ is not on sys.path by itself: each script
puts its own folder there before `from _common import ...`.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

CLOCK_TICK = os.sysconf("SC_CLK_TCK")
BENCH_DIR = Path(__file__).resolve().parent


def runtime_revision() -> str:
    """The commit measured, and the runtime files with uncommitted changes (if any)."""
    repo = BENCH_DIR.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],  # noqa: S607
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "runtime", "proto"],  # noqa: S607
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    changed = [line[3:] for line in dirty if line.strip()]
    return head + (f" + uncommitted changes in {', '.join(changed)}" if changed else "")


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (all CPUs, from /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLOCK_TICK


def wait_quiet(limit_s: float, threshold: float = 0.3) -> float:
    """Wait (up to `limit_s`) until other processes use < `threshold` cores over 2 s; return
    the load last seen (this machine is shared; the load is reported either way)."""
    deadline = time.monotonic() + limit_s
    while True:
        busy0, own0 = machine_busy_s(), time.process_time()
        time.sleep(2.0)
        load = (machine_busy_s() - busy0 - (time.process_time() - own0)) / 2.0
        if load < threshold or time.monotonic() >= deadline:
            return load


def loadavg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def load_train_overhead() -> ModuleType:
    """bench/train_overhead.py as a module: its cases, data and job helpers."""
    path = BENCH_DIR / "train_overhead.py"
    spec = importlib.util.spec_from_file_location("bench_train_overhead", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def print_results(results: list[tuple[str, float, str]]) -> None:
    """The closing `RESULT <name> <value> target=<target>` lines, after a blank line."""
    print()
    for name, value, target in results:
        print(f"RESULT {name} {value:.4g} target={target}")
