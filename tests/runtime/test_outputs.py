"""Publishing outputs to an object store: every file, the commit marker last, undone on failure."""

from __future__ import annotations

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from elasticdl.runtime.outputs import publish


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
