"""How many workers a job can use, decided before anything is launched.

Two limits, whichever is lower (and never above `scaling.MAX_WORKERS`):

* the tasks of one epoch (training: the planned tasks per epoch; prediction: the prediction
  tasks): a worker beyond them would only wait for work. The default --num_workers (2) is
  always allowed, so a tiny table still runs with the defaults;
* on the local engine (workers and PS as processes on this machine), the processes that fit in
  `MEMORY_SHARE` of the memory available now (MemAvailable in /proc/meminfo; elsewhere
  os.sysconf), at `WORKER_BYTES` per worker and `PS_BYTES` per PS. Without it, `--num_workers
  500` on a 2-core, 24 GB machine started 406 TensorFlow processes before anything failed.

The per-process sizes were measured once on the development machine (2 cores, 24 GB, Linux,
TensorFlow 2.21, CPU only): a `regressor.DNN` job (2 workers, 1 PS, 4,096 records, 2 epochs)
whose PS and worker processes were sampled every 0.2 s from /proc/PID/status and
/proc/PID/smaps_rollup. Peak per worker: VmRSS 604 MiB, Pss 339 MiB, RssAnon 247 MiB; per PS:
VmRSS 662 MiB, Pss 443 MiB, RssAnon 268 MiB. What one more process costs is its private
(anonymous) memory, the shared libraries being mapped once: hence 256 MiB per worker and 288 MiB
per PS (the RssAnon peaks, rounded up). A bigger model needs more; the bound is a floor on
what cannot run, not a promise of what can.

`worker_bound` and `processes_fit` are pure (tested as tables); `job_bound` is the one call a
master makes in its preparation, and `check_target` (scaling.py) applies the same bound to
`elasticdl scale`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from elasticdl.runtime.job_options import TRAIN, by_name
from elasticdl.runtime.master.scaling import MAX_WORKERS

DEFAULT_WORKERS = by_name(TRAIN)["num_workers"].default
"""--num_workers when not given: always allowed by the tasks bound (prediction's is the same)."""
MIB = 1 << 20
WORKER_BYTES = 256 * MIB
"""Memory one more local worker process takes (measured: see the module documentation)."""
PS_BYTES = 288 * MIB
"""Memory one local parameter server process takes (measured: see the module documentation)."""
MEMORY_SHARE = 0.8
"""The share of the available memory a job's processes may plan on (the rest: the OS, the
page cache, the master's own growth)."""


@dataclass(frozen=True)
class WorkerBound:
    """At most `limit` workers, because of `reason` (text for a message)."""

    limit: int
    reason: str

    def as_max(self) -> tuple[int, str]:
        """The `max_workers, max_reason` arguments of `scaling.check_target`."""
        return self.limit, self.reason


JOB_LIMIT = WorkerBound(MAX_WORKERS, "the limit for one job")


def processes_fit(
    available_bytes: int,
    num_ps: int,
    *,
    worker_bytes: int = WORKER_BYTES,
    ps_bytes: int = PS_BYTES,
    share: float = MEMORY_SHARE,
) -> int:
    """How many worker processes fit, next to `num_ps` PS, in `share` of `available_bytes`."""
    usable = int(available_bytes * share) - num_ps * ps_bytes
    return max(0, usable // worker_bytes)


def worker_bound(
    tasks: int,
    tasks_what: str,
    num_ps: int = 0,
    available_bytes: int | None = None,
    always_allowed: int = 1,
) -> WorkerBound:
    """The lowest of: the job limit, `tasks` (described as `tasks_what`) but never below
    `always_allowed` (the default --num_workers: a tiny table runs with the defaults), and
    with `available_bytes` (the local engine) the workers that memory holds."""
    by_tasks = WorkerBound(tasks, f"the {tasks} {tasks_what}")
    if tasks < always_allowed:
        by_tasks = WorkerBound(
            always_allowed,
            f"the {tasks} {tasks_what} (the default of {always_allowed} is always allowed)",
        )
    bounds = [JOB_LIMIT, by_tasks]
    if available_bytes is not None:
        fit = processes_fit(available_bytes, num_ps)
        bounds.append(
            WorkerBound(
                fit,
                f"the worker processes this machine's memory holds ({available_bytes / 2**30:.1f} "
                f"GiB available, about {WORKER_BYTES // MIB} MiB per worker and "
                f"{PS_BYTES // MIB} MiB per PS)",
            )
        )
    return min(bounds, key=lambda bound: bound.limit)


def check_num_workers(num_workers: int, bound: WorkerBound) -> None:
    """ValueError (one line, with the limit) when `num_workers` is above `bound`."""
    if num_workers > bound.limit:
        raise ValueError(
            f"--num_workers {num_workers} is more than {bound.limit}, {bound.reason}; "
            f"give --num_workers {bound.limit} or fewer"
        )


def available_memory() -> int | None:
    """Bytes of memory available now (MemAvailable; os.sysconf where /proc is missing)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def job_bound(options: Any, tasks: int, tasks_what: str, manager_factory: Any) -> WorkerBound:
    """The bound of a job about to start, checked against its `options.num_workers`
    (ValueError when above). Memory counts when `manager_factory` is the local one (the
    processes run on this machine); `options.num_ps` PS share it (a prediction job has none)."""
    from elasticdl.runtime.master.instances import LocalInstanceManager

    local = manager_factory is LocalInstanceManager
    num_ps = getattr(options, "num_ps", 0)
    memory = available_memory() if local else None
    bound = worker_bound(tasks, tasks_what, num_ps, memory, DEFAULT_WORKERS)
    check_num_workers(options.num_workers, bound)
    return bound
