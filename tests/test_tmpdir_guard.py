"""After the suite, TMPDIR holds nothing it did not hold before (support/tmpdir_guard.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).parent / "support"

LEAVES_FILES = """
import os, subprocess, sys, tempfile

def test_leaves_a_job_log_dir_and_autograph_files():
    tempfile.mkdtemp(prefix="train-1234abcd-")
    handle, _ = tempfile.mkstemp(prefix="__autograph_generated_file", suffix=".py")
    os.close(handle)
    # a process the test starts inherits the session's TMPDIR
    code = "import tempfile; tempfile.mkdtemp(prefix='predict-5678-')"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert os.environ["TMPDIR"] != os.environ["OUTER_TMPDIR"]
"""


def test_a_session_leaves_nothing_in_tmpdir(tmp_path: Path) -> None:
    tmpdir, tests = tmp_path / "tmp", tmp_path / "tests"
    tmpdir.mkdir()
    tests.mkdir()
    (tests / "test_leaves_files.py").write_text(LEAVES_FILES)
    env = {
        **os.environ,
        "TMPDIR": str(tmpdir),
        "OUTER_TMPDIR": str(tmpdir),
        "PYTHONPATH": str(SUPPORT),
    }
    env.pop("PYTEST_DEBUG_TEMPROOT", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tmpdir_guard"],
        cwd=tests,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "tmpdir_guard: the tests left 1 autograph files, 2 job log directories in TMPDIR; removed"
        in done.stdout
    ), done.stdout
    assert list(tmpdir.iterdir()) == []
