"""runtime/process_guard.py: a job process ends at once when its main returns, its logs and
standard streams flushed, with main's status (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import logging, sys, threading, time
from elasticdl.runtime.process_guard import exit_process
logging.basicConfig(stream=sys.stderr, format="%(message)s")
logging.getLogger("job").warning("logged before the end")
sys.stdout.write("printed without a newline")  # still in the buffer
threading.Thread(target=time.sleep, args=(60,)).start()  # not a daemon: sys.exit would wait
exit_process(3)
"""


def test_exit_process_flushes_and_ends_with_the_status_without_waiting_for_threads():
    done = subprocess.run(
        [sys.executable, "-P", "-c", PROGRAM], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 3
    assert done.stdout == "printed without a newline"
    assert done.stderr.strip() == "logged before the end"
