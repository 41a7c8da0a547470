"""Publishing outputs to an object store: every file, the commit marker last, undone on failure."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from mount_namespace import unshare_prefix

from elasticdl.runtime.outputs import publish, staging_dir


def staged_model(tmp_path):
    (tmp_path / "saved_model").mkdir()
    (tmp_path / "saved_model" / "saved_model.pb").write_bytes(b"graph")
    (tmp_path / "trained_model.pb").write_bytes(b"marker")
    (tmp_path / "params.npz").write_bytes(b"params")
    return tmp_path


def test_the_commit_marker_is_uploaded_last(tmp_path, monkeypatch):
    order: list[str] = []
    original = MemoryFileSystem.put_file

    def recording(self, lpath, rpath, *args, **kwargs):
        order.append(rpath.rsplit("/", 1)[-1])
        return original(self, lpath, rpath, *args, **kwargs)

    monkeypatch.setattr(MemoryFileSystem, "put_file", recording)
    publish(staged_model(tmp_path), "memory://published/model")
    assert order[-1] == "trained_model.pb" and sorted(order) == [
        "params.npz",
        "saved_model.pb",
        "trained_model.pb",
    ]
    fsspec.filesystem("memory").rm("/published", recursive=True)


def test_a_failed_upload_removes_what_it_wrote(tmp_path, monkeypatch):
    original = MemoryFileSystem.put_file

    def failing(self, lpath, rpath, *args, **kwargs):
        if rpath.endswith("trained_model.pb"):
            raise OSError("connection reset")
        return original(self, lpath, rpath, *args, **kwargs)

    monkeypatch.setattr(MemoryFileSystem, "put_file", failing)
    with pytest.raises(OSError, match="connection reset"):
        publish(staged_model(tmp_path), "memory://failed/model")
    fs = fsspec.filesystem("memory")
    assert not [p for p in fs.find("/failed") if fs.isfile(p)]


def test_published_directories_get_the_umask_modes_and_staging_is_removed(tmp_path):
    staged = staging_dir()
    (staged / "saved_model").mkdir()
    (staged / "saved_model" / "saved_model.pb").write_bytes(b"graph")
    (staged / "trained_model.pb").write_bytes(b"marker")
    old = os.umask(0o022)
    try:
        publish(staged, str(tmp_path / "model"))
    finally:
        os.umask(old)
    assert not staged.exists()
    assert stat.S_IMODE((tmp_path / "model").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "model" / "saved_model").stat().st_mode) == 0o755
    assert (tmp_path / "model" / "trained_model.pb").read_bytes() == b"marker"


_DISK_FULL = """
import os, sys
from pathlib import Path
from elasticdl.runtime.outputs import PublishError, publish
small, staged = Path(sys.argv[1]), Path(sys.argv[2])
try:
    publish(staged, str(small / "model"))
except PublishError as err:
    print("ERROR", err)
print("LEFT", sorted(os.listdir(small)))
print("STAGED", staged.exists())
"""


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    """A real full filesystem: a 256 KiB tmpfs in a private mount namespace."""
    prefix = unshare_prefix()
    if prefix is None:
        pytest.skip("needs unshare with mount namespaces to mount a small tmpfs")
    small = tmp_path / "small"
    small.mkdir()
    staged = tmp_path / "staged"
    (staged / "saved_model").mkdir(parents=True)
    (staged / "saved_model" / "variables.data").write_bytes(os.urandom(1 << 20))
    (staged / "trained_model.pb").write_bytes(b"marker")
    script = tmp_path / "publish.py"
    script.write_text(_DISK_FULL)
    command = (
        f"mount -t tmpfs -o size=256k tmpfs {shlex.quote(str(small))} && "
        f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} "
        f"{shlex.quote(str(small))} {shlex.quote(str(staged))}"
    )
    done = subprocess.run([*prefix, "sh", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    expected = f"could not publish the outputs to {small}/model: No space left on device"
    assert lines[0] == f"ERROR {expected}"
    assert lines[1] == "LEFT []" and lines[2] == "STAGED False"
