"""CPU time by thread, from /proc: which threads of a process used the cores over a window.

Why: a worker's minibatch is spread over a dozen threads (the training thread, tf.data's,
the push calls', the answers', the task held ahead), and a parameter server's over its gRPC
threads; a wall-clock profile of one thread cannot say which of them keep two cores busy.
Python threads are named by their `threading` names (by native id); other threads by the name
the kernel keeps for them (TensorFlow's often inherit "python"). Threads that ended inside the
window are missing from the rows but counted in the process's total.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from _common import CLOCK_TICK


def _ticks(stat: str) -> tuple[str, int]:
    """(kernel name, user + system ticks) from a /proc .../stat line."""
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    return name, int(fields[11]) + int(fields[12])


def process_threads(pid: int | str = "self") -> tuple[int, dict[int, tuple[str, int]]]:
    """(the process's ticks, {thread id: (kernel name, ticks)}) now."""
    root = Path(f"/proc/{pid}")
    _, total = _ticks((root / "stat").read_text())
    threads: dict[int, tuple[str, int]] = {}
    for task in (root / "task").iterdir():
        try:
            threads[int(task.name)] = _ticks((task / "stat").read_text())
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return total, threads


@dataclass
class ThreadWindow:
    """CPU of process `pid` by thread between `start()` and `stop()`."""

    pid: int | str = "self"
    _before: tuple[int, dict[int, tuple[str, int]]] | None = None
    rows: list[tuple[str, float]] = field(default_factory=list)
    """(thread name, CPU seconds), busiest first, threads of one name summed."""
    total_s: float = 0.0

    def start(self) -> None:
        self._before = process_threads(self.pid)

    def stop(self) -> None:
        if self._before is None:
            return
        total, threads = process_threads(self.pid)
        before_total, before = self._before
        names = {t.native_id: t.name for t in threading.enumerate()} if self.pid == "self" else {}
        used: Counter[str] = Counter()
        for tid, (kernel_name, ticks) in threads.items():
            used[names.get(tid, kernel_name)] += ticks - before.get(tid, (kernel_name, 0))[1]
        self.total_s = (total - before_total) / CLOCK_TICK
        self.rows = [(name, ticks / CLOCK_TICK) for name, ticks in used.most_common() if ticks]

    def report(self, title: str, per: int, unit: str = "minibatch", top: int = 10) -> str:
        """The window's rows as ms of CPU per `per` units (e.g. minibatches)."""
        per = max(1, per)
        lines = [f"{title}: {self.total_s / per * 1e3:.2f} ms of CPU a {unit} in all"]
        lines += [f"  {name:40s} {s / per * 1e3:7.3f}" for name, s in self.rows[:top]]
        return "\n".join(lines)
