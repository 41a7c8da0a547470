"""A job process started before its role is known: `python -P -m elasticdl.runtime.standby`.

Why: a job process spends most of its start importing TensorFlow and Keras (1.7-1.9 s on this
project's 2-core machine), and the master imports them too, before it can hand out any role.
Standing by, a parameter server or worker imports them while the master prepares, so both
imports overlap (runtime/master/standbys.py starts these processes).

The contract: it imports TensorFlow and Keras in the Keras mode of its environment (without
scikit-learn, as `configure_tensorflow` does), then reads one JSON line from stdin,

    {"role": "ps" | "worker", "argv": [...], "env": {...}, "cwd": "...", "log": "..."}

and becomes that process: stdout and stderr appended to `log`, in `cwd`, running
`elasticdl.runtime.<role>.main` with `argv` as `python -m` does (that module is `__main__`);
its exit status is that main's. The pid does not change, so the launcher's signals and exit
statuses mean what they meant, and its command line (`ps`, /proc/PID/cmdline) becomes the
role's, as one string. `env` must be the environment it
started with, but for TMPDIR (nothing reads it while importing; it takes `env`'s): the
launcher gives a standby and its role the environment the job started with (not the master's
later one, where its own imports set variables: TensorFlow's TF2_BEHAVIOR, scikit-learn's
KMP_*). When `env` differs otherwise, or its import failed, it execs the role's ordinary
command instead: same pid, a fresh interpreter, nothing of the early import carried over.
stdin closed without a line: it was not needed, and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

ROLES = {"ps": "elasticdl.runtime.ps.main", "worker": "elasticdl.runtime.worker.main"}
READS_LATE = frozenset({"TMPDIR"})
"""Variables a standby may take on at its handoff: nothing reads them while importing."""


def role_command(role: str, argv: list[str]) -> list[str]:
    """The ordinary command of `role` (what a process started for it directly runs)."""
    return [sys.executable, "-P", "-m", ROLES[role], *argv]


def parse_handoff(line: str) -> dict[str, Any]:
    """The handoff as a dict; ValueError naming what is wrong with it."""
    handoff = json.loads(line)
    if not isinstance(handoff, dict) or handoff.get("role") not in ROLES:
        raise ValueError(f"a handoff names a role of {sorted(ROLES)}")
    argv, env = handoff.get("argv"), handoff.get("env")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ValueError("a handoff's argv is a list of strings")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ValueError("a handoff's env maps strings to strings")
    for key in ("cwd", "log"):
        if not isinstance(handoff.get(key), str) or not handoff[key]:
            raise ValueError(f"a handoff names its {key}")
    return handoff


def same_start(started: Mapping[str, str], env: Mapping[str, str]) -> bool:
    """Whether a process started with `started` imported what one started with `env` would."""

    def early(e: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in e.items() if k not in READS_LATE}

    return early(started) == early(env)


def _import_early() -> bool:
    try:
        from elasticdl.runtime import keras_mode
        from elasticdl.runtime.job_config import import_tensorflow

        import_tensorflow(keras_mode.current())
        import grpc  # noqa: F401 - every role's next import
        import setproctitle  # noqa: F401

        return True
    except Exception:  # noqa: BLE001 - the role's own command meets the error again
        return False


def _become(handoff: dict[str, Any], imported: bool, started: dict[str, str]) -> int:
    log_fd = os.open(handoff["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.chdir(handoff["cwd"])
    role, argv, env = handoff["role"], handoff["argv"], handoff["env"]
    if not imported or not same_start(started, env):
        command = role_command(role, argv)
        os.execve(command[0], command, env)
    for key in READS_LATE:  # the rest is as it started, plus what its imports set
        if key in env:
            os.environ[key] = env[key]
        else:
            os.environ.pop(key, None)
    import runpy
    import tempfile

    import setproctitle

    setproctitle.setproctitle(" ".join(role_command(role, argv)))  # what ps shows
    tempfile.tempdir = None  # TMPDIR is read again
    sys.argv = [ROLES[role], *argv]
    # As `python -m`: the role's module is __main__, and its __main__ block ends the process.
    runpy.run_module(ROLES[role], run_name="__main__", alter_sys=True)
    return 0


def main() -> int:
    from elasticdl.runtime.process_guard import exit_when_orphaned

    exit_when_orphaned()
    started = dict(os.environ)
    imported = _import_early()
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    try:
        handoff = parse_handoff(line)
    except ValueError as error:
        print(f"standby process: {error}", file=sys.stderr)
        return 2
    return _become(handoff, imported, started)


if __name__ == "__main__":
    from elasticdl.runtime.process_guard import exit_process

    exit_process(main())
