"""Child processes of a job must not outlive their master, nor linger when done.

The master starts workers and parameter servers without `preexec_fn` (forking a process
that runs gRPC threads and then executing Python in the child aborts inside gRPC), so instead
of PR_SET_PDEATHSIG each child watches its parent and exits when it has been orphaned.

A job process whose main function returned has finished its work (a PS its checkpoint writes,
a worker its pushes and reports); `exit_process` then ends it without the interpreter's and
TensorFlow's teardown, 0.5 s of every exit that the master waits for at the job's end.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import NoReturn


def exit_when_orphaned(interval_s: float = 1.0) -> threading.Thread:
    """Start a daemon thread that ends this process once its parent process is gone."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(3)

    thread = threading.Thread(target=watch, name="orphan-guard", daemon=True)
    thread.start()
    return thread


def exit_process(code: int) -> NoReturn:
    """End this process with status `code` now: logs and standard streams flushed, then
    `os._exit` (no atexit handlers, no interpreter teardown; threads still running are
    abandoned, as daemon threads are at any exit)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
