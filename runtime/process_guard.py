"""Child processes of a job must not outlive their master.

The master starts workers and parameter servers without `preexec_fn` (forking a process
that runs gRPC threads and then executing Python in the child aborts inside gRPC), so instead
of PR_SET_PDEATHSIG each child watches its parent and exits when it has been orphaned.
"""

from __future__ import annotations

import os
import threading
import time


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
