"""Processes that import TensorFlow while the master prepares, then become its first parameter
servers and workers (the process side and the handoff: runtime/standby.py).

A local job's master imports TensorFlow and Keras to check the model (1.9 s alone on this
project's 2-core machine), and each process it then starts imports them again before it can
serve or train. Started first, the job's processes import beside the master: for a 1-PS,
1-worker job the three imports take ~2.6 s together instead of 1.9 + 1.7 s in turn (two cores),
and `elasticdl train` of regressor.DNN on 32,768 records took 8.3-8.5 s instead of 9.3-9.9 s.
The price: the master's own import shares the cores, so an error found only by importing the
model (bad params, say) came ~1 s later (3.8 -> 5.0 s; the lean import of `job_start` took
it back to 3.9 s). Data that is not there is refused before any of this (training_job.py).

`Standbys.take` hands a waiting process its role; it returns None when none is left (or the one
it tried had died), and the launcher then starts the role's process as before. `close` ends
the rest (they hold nothing but their imports).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from elasticdl.runtime import keras_mode
from elasticdl.runtime.devices import master_devices
from elasticdl.runtime.job_config import import_tensorflow
from elasticdl.runtime.master.instances import InstanceManager, LocalInstanceManager, job_env

log = logging.getLogger("elasticdl.master")


class Standbys:
    """`count` standby processes started now in Keras `mode`, with the job's settings over
    environment `base` (what their roles get too: LocalInstanceManager)."""

    def __init__(self, count: int, mode: str, base: Mapping[str, str]) -> None:
        self.base = dict(base)
        self.env = job_env(mode, None, self.base)
        self._waiting: list[subprocess.Popen[bytes]] = [
            subprocess.Popen(  # noqa: S603 - argv list, no shell
                [sys.executable, "-P", "-m", "elasticdl.runtime.standby"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=self.env,
            )
            for _ in range(count)
        ]

    @property
    def pids(self) -> list[int]:
        """The processes still waiting for a role, in the order `take` hands them out."""
        return [process.pid for process in self._waiting]

    def take(
        self, role: str, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log_path: Path
    ) -> subprocess.Popen[bytes] | None:
        """A waiting process, now running `role` with `argv`, `env` (as a process started for
        it would), in `cwd`, logging to `log_path`; None when none is waiting."""
        handoff = {
            "role": role,
            "argv": list(argv),
            "env": dict(env),
            "cwd": str(cwd),
            "log": str(log_path),
        }
        line = (json.dumps(handoff) + "\n").encode()
        while self._waiting:
            process = self._waiting.pop(0)
            try:
                process.stdin.write(line)  # type: ignore[union-attr] - started with a pipe
                process.stdin.close()  # type: ignore[union-attr]
            except OSError:  # it died while standing by: the next one, or a fresh process
                process.wait()
                continue
            return process
        return None

    def close(self) -> None:
        """End the processes not taken (they hold nothing but their imports)."""
        waiting, self._waiting = self._waiting, []
        for process in waiting:
            process.kill()
            process.wait()
        if waiting:
            log.debug("%d standby process(es) were not needed", len(waiting))


def for_local_job(num_processes: int, mode: str) -> Standbys | None:
    """Standbys for a local job's first PS and workers (`num_processes` of them) in Keras
    `mode`, at most one per core: more importing beside the master only slows its own import
    (regressor.DNN, 2 workers + 1 PS, 2 cores: `elasticdl train` 10.8 s with none, 8.8-9.4 s
    with 2, 9.8-10.1 s with 3). None when this process imported TensorFlow already (nothing
    of the master's for them to overlap: started then, they would only move their import out
    of the job's timed run)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    count = min(num_processes, cores or 1)
    if keras_mode.tensorflow_imported() or count <= 0:
        return None
    return Standbys(count, mode, os.environ)


@contextlib.contextmanager
def job_start(local: bool, num_processes: int, mode: str) -> Iterator[Standbys | None]:
    """What a job's master does first, for the length of its run: standbys for a local job
    (`for_local_job`), then, in elasticdl's own process, its TensorFlow import in `mode`
    without scikit-learn (keras_mode.mark_own_process; 0.5 s), then its GPUs
    (runtime/devices.py). The standbys are ended with the run (those taken are the job's
    processes by then)."""
    standbys = for_local_job(num_processes, mode) if local else None
    try:
        own = keras_mode.own_process()
        if own and not keras_mode.tensorflow_imported():
            import_tensorflow(mode)
        with master_devices(local, own_process=own):
            yield standbys
    finally:
        if standbys is not None:
            standbys.close()


def instance_manager(
    factory: Callable[[Path, str, Path], InstanceManager],
    standbys: Standbys | None,
    config_path: Path,
    master_addr: str,
    log_dir: Path,
) -> InstanceManager:
    """The job's instance manager: local processes that take the standbys first, if any."""
    if standbys is not None:
        return LocalInstanceManager(config_path, master_addr, log_dir, standbys=standbys)
    return factory(config_path, master_addr, log_dir)
