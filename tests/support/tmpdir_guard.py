"""A pytest plugin: the test session runs with a TMPDIR of its own, removed when it ends.

Jobs started without --log_dir keep their log directory in TMPDIR (the user reads it after a
failure), and TensorFlow leaves its autograph modules there: a run of the suite used to leave
about 76 job directories and 141 autograph files behind. With this plugin every test, and every
process a test starts (they inherit TMPDIR), writes into one private directory under the
original TMPDIR; the terminal summary says what the tests left in it, and the directory goes at
exit (after the database servers, which stop at exit too). pytest's own `tmp_path` directories
stay where pytest keeps them (`PYTEST_DEBUG_TEMPROOT`: the original TMPDIR; pytest prunes them).

tests/conftest.py loads it; `python -m pytest -p tmpdir_guard` loads it anywhere.
"""

from __future__ import annotations

import atexit
import collections
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

PREFIX = "elasticdl-tests-"
_KINDS = (
    ("autograph files", ("__autograph_generated_file",)),
    ("job log directories", ("train-", "predict-", "evaluate-", "job-")),
)
_state: dict[str, Any] = {}


def kind_of(name: str) -> str:
    """What a leftover entry of TMPDIR is, by its name."""
    for kind, prefixes in _KINDS:
        if name.startswith(prefixes):
            return kind
    return "other entries"


def leftovers(directory: Path) -> dict[str, int]:
    """Entries left in `directory`, counted by kind."""
    counts = collections.Counter(kind_of(p.name) for p in directory.iterdir())
    return dict(sorted(counts.items()))


def _remove(private: Path, original: str | None) -> None:
    shutil.rmtree(private, ignore_errors=True)
    if original is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = original
    tempfile.tempdir = None


def pytest_configure(config: pytest.Config) -> None:
    if "private" in _state:
        return
    parent = tempfile.gettempdir()
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", parent)
    private = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
    _state.update(private=private, original=os.environ.get("TMPDIR"))
    os.environ["TMPDIR"] = str(private)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    atexit.register(_remove, private, _state["original"])


def pytest_terminal_summary(terminalreporter: Any) -> None:
    private = _state.get("private")
    if private is None or not private.is_dir():
        return
    counts = leftovers(private)
    if counts:
        found = ", ".join(f"{n} {kind}" for kind, n in counts.items())
        terminalreporter.write_line(f"tmpdir_guard: the tests left {found} in TMPDIR; removed")
