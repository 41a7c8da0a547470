"""Instance managers: how the master starts, watches and stops PS and worker processes.

`InstanceManager` is the mechanism only (start, signal, report exits); the master decides
policy (what to relaunch, when to give up). `LocalInstanceManager` runs subprocesses on this
machine; a Kubernetes implementation runs pods behind the same interface.

Every exit carries an `ExitKind` (exits.py), the one vocabulary of both managers: a local
process is `exited`, `failed` or `killed` by its exit status; a pod may also be `preempted` or
`oom` (pod_states.py). The supervisor refines it with what the master knows.
"""

from __future__ import annotations

import abc
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elasticdl.runtime import keras_mode
from elasticdl.runtime.devices import LOCAL_JOB_FLAG
from elasticdl.runtime.job_config import host_port
from elasticdl.runtime.master.exits import ExitKind, Role, kind_of_status
from elasticdl.runtime.master.liveness import Sample, read_sample
from elasticdl.runtime.master.ports import choose_port

if TYPE_CHECKING:
    from elasticdl.runtime.master.scaling import ScaleInbox
    from elasticdl.runtime.master.standbys import Standbys

StatusSource = Callable[[], dict[str, Any]]
"""The job's live report, for status requests that come through the platform."""


@dataclass(frozen=True)
class InstanceExit:
    """One process (or pod) ended."""

    role: Role
    index: int
    exit_code: int | None
    signal: int | None
    at: float
    log_tail: str = ""
    observed: ExitKind | None = None
    """What the platform knows beyond the exit status (Kubernetes: preempted, oom)."""
    message: str = ""
    """The instance manager's own words about the exit, if any (Kubernetes: the pod's fate)."""

    @property
    def kind(self) -> ExitKind:
        return self.observed or kind_of_status(self.exit_code, self.signal)

    @property
    def reason(self) -> str:
        return str(self.kind)

    def describe(self) -> str:
        if self.message:
            return f"{self.role}{self.index} {self.message}"
        if self.signal is not None:
            how = f"killed by {signal.Signals(self.signal).name}"
        else:
            how = f"exit code {self.exit_code}"
        return f"{self.role}{self.index} {how}"


class InstanceManager(abc.ABC):
    """Starts and watches the job's parameter servers and workers."""

    @abc.abstractmethod
    def start_ps(self, ps_id: int) -> str:
        """Start parameter server `ps_id` (again, after an exit) and return its address."""

    @abc.abstractmethod
    def start_worker(self, worker_id: int, ps_addrs: Sequence[str]) -> None:
        """Start a worker with a new, never reused `worker_id`."""

    @abc.abstractmethod
    def signal(self, role: Role, index: int, sig: int) -> bool:
        """Send `sig` to one instance; False if it is not running."""

    @abc.abstractmethod
    def exits(self, timeout: float) -> list[InstanceExit]:
        """Exits since the last call, waiting up to `timeout` seconds for the first."""

    @abc.abstractmethod
    def alive(self, role: Role) -> list[int]:
        """Indexes of the running instances of `role`."""

    def is_alive(self, role: Role, index: int) -> bool:
        """Whether instance `index` of `role` runs (the master asks on every worker call:
        managers answer with a lookup, not a list)."""
        return index in self.alive(role)

    @abc.abstractmethod
    def shutdown(self, grace_s: float = 5.0) -> None:
        """Stop everything: SIGTERM, then SIGKILL after `grace_s`."""

    def sample(self, role: Role, index: int, now: float) -> Sample | None:
        """A look at the instance's process (state, CPU time: liveness.py), or None where the
        master cannot see it (a pod). The master tells a slow instance from a hung one by it."""
        return None

    def listen_for_scale(  # noqa: B027 - optional hook
        self, inbox: ScaleInbox, status: StatusSource | None = None
    ) -> None:
        """Pass the platform's own resize requests to `inbox` until shutdown, and answer its
        status requests with `status()` (Kubernetes: annotations on the job's ConfigMap). By
        default there are none: the master's gRPC calls are the one channel."""


def drain_exits(exits: queue.Queue[InstanceExit], timeout: float) -> list[InstanceExit]:
    """Every exit queued so far, waiting up to `timeout` seconds for the first."""
    found: list[InstanceExit] = []
    try:
        found.append(exits.get(timeout=max(0.0, timeout)))
    except queue.Empty:
        return found
    while True:
        try:
            found.append(exits.get_nowait())
        except queue.Empty:
            return found


def job_env(
    mode: str, extra_env: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a local job's PS and worker processes (before their TMPDIR): `base`
    (default: this process's now) with the job's settings."""
    return keras_mode.env_for(
        mode,
        {
            **(os.environ if base is None else base),
            "PYTHONUNBUFFERED": "1",
            "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
            **(extra_env or {}),
        },
    )


def _keras_version(config_path: Path) -> str:
    """The job's Keras mode (job.json): its processes get it in their environment, so it is
    in force before they import TensorFlow (runtime/keras_mode.py)."""
    try:
        return str(json.loads(config_path.read_text()).get("keras_version", keras_mode.KERAS3))
    except (OSError, ValueError):
        return keras_mode.KERAS3


def _tail(path: Path, max_bytes: int = 4000) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - max_bytes))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass
class _Process:
    role: Role
    index: int
    popen: subprocess.Popen[bytes]
    log: Path


class LocalInstanceManager(InstanceManager):
    """Parameter servers and workers as subprocesses on 127.0.0.1.

    Each process runs `python -P -m elasticdl.runtime.{ps,worker}.main` with an argv list
    (no shell), logs to `<log_dir>/<role><index>.log`, and is reaped by a watcher thread so
    an exit is reported the moment it happens. A PS's port lies outside the kernel's
    ephemeral range (ports.py); a relaunched PS gets a fresh one (another process may have
    taken its old one); the master tells running workers its new address
    (`Master.get_ps_addresses`). Each has a private TMPDIR, `<log_dir>/tmp/<role><index>`,
    removed at shutdown: a killed TensorFlow process leaves its autograph files there.
    Each gets `--local_job`: they share the machine's GPUs (runtime/devices.py).
    """

    def __init__(
        self,
        config_path: Path,
        master_addr: str,
        log_dir: Path,
        host: str = "127.0.0.1",
        extra_env: dict[str, str] | None = None,
        standbys: Standbys | None = None,
    ) -> None:
        """`standbys`: processes that imported TensorFlow already (standbys.py), taken for
        roles while any is left; every process then gets their base environment."""
        # Processes run in `log_dir`: relative paths would resolve against it.
        self.config_path = config_path.resolve()
        self.master_addr = master_addr
        self.log_dir = log_dir.resolve()
        self.host = host
        base = standbys.base if standbys is not None else None
        self._env = job_env(_keras_version(self.config_path), extra_env, base)
        self._standbys = standbys
        self._lock = threading.Lock()
        self._running: dict[tuple[Role, int], _Process] = {}
        self._ps_ports: dict[int, int] = {}
        self._exits: queue.Queue[InstanceExit] = queue.Queue()
        self._closing = False

    def _spawn(self, role: Role, index: int, args: list[str]) -> None:
        log = self.log_dir / f"{role}{index}.log"
        module = f"elasticdl.runtime.{role}.main"
        role_args = ["--config", str(self.config_path), *args]
        argv = [sys.executable, "-P", "-m", module, *role_args]
        tmp = self.log_dir / "tmp" / f"{role}{index}"  # private TMPDIR, removed at shutdown
        tmp.mkdir(parents=True, exist_ok=True)
        env = {**self._env, "TMPDIR": str(tmp)}
        popen = None
        if self._standbys is not None:
            log.touch()  # here, as for a fresh process: a log that cannot be made fails here
            popen = self._standbys.take(str(role), role_args, env, self.log_dir, log)
        if popen is None:
            with log.open("ab") as out:
                popen = subprocess.Popen(  # noqa: S603 - argv list, no shell
                    argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.log_dir,
                    env=env,
                )
        process = _Process(role, index, popen, log)
        with self._lock:
            self._running[(role, index)] = process
        threading.Thread(
            target=self._watch, args=(process,), name=f"watch-{role}{index}", daemon=True
        ).start()

    def _watch(self, process: _Process) -> None:
        code = process.popen.wait()
        with self._lock:
            if self._running.get((process.role, process.index)) is process:
                del self._running[(process.role, process.index)]
        self._exits.put(
            InstanceExit(
                process.role,
                process.index,
                exit_code=code if code >= 0 else None,
                signal=-code if code < 0 else None,
                at=time.monotonic(),
                log_tail=_tail(process.log),
            )
        )

    def start_ps(self, ps_id: int) -> str:
        old = self._ps_ports.get(ps_id)
        port = choose_port(self.host, avoid=() if old is None else (old,))
        self._ps_ports[ps_id] = port
        self._spawn(Role.PS, ps_id, ["--ps_id", str(ps_id), "--port", str(port), LOCAL_JOB_FLAG])
        return host_port(self.host, port)

    def start_worker(self, worker_id: int, ps_addrs: Sequence[str]) -> None:
        self._spawn(
            Role.WORKER,
            worker_id,
            [
                "--worker_id",
                str(worker_id),
                "--master_addr",
                self.master_addr,
                "--ps_addrs",
                ",".join(ps_addrs),
                LOCAL_JOB_FLAG,
            ],
        )

    def signal(self, role: Role, index: int, sig: int) -> bool:
        with self._lock:
            process = self._running.get((role, index))
        if process is None or process.popen.poll() is not None:
            return False
        process.popen.send_signal(sig)
        return True

    def sample(self, role: Role, index: int, now: float) -> Sample | None:
        with self._lock:
            process = self._running.get((role, index))
        return None if process is None else read_sample(process.popen.pid, now)

    def exits(self, timeout: float) -> list[InstanceExit]:
        return drain_exits(self._exits, timeout)

    def alive(self, role: Role) -> list[int]:
        with self._lock:
            return sorted(i for (r, i) in self._running if r == role)

    def is_alive(self, role: Role, index: int) -> bool:
        with self._lock:
            return (role, index) in self._running

    def shutdown(self, grace_s: float = 5.0) -> None:
        with self._lock:
            processes = list(self._running.values())
        for process in processes:
            if process.popen.poll() is None:
                try:
                    process.popen.send_signal(signal.SIGCONT)
                    process.popen.terminate()
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace_s
        for process in processes:
            try:
                process.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait()
        shutil.rmtree(self.log_dir / "tmp", ignore_errors=True)  # what killed processes left
