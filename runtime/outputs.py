"""Publishing a job's outputs at `--output` (any fsspec URL), all or nothing.

Everything is first written to a local staging directory. Publication then depends on where
the output goes:

* a local path: the staging directory is created beside the target and renamed into place,
  which is atomic;
* any other fsspec URL (gs://, memory://, ...): files are uploaded, and `trained_model.pb` goes
  last. It is the commit marker: readers treat an output without it as absent, and a failed
  upload removes what it wrote.

`check_output` runs before the job starts so a bad `--output` fails in seconds, not after
training. `publish` consumes the staging directory: it is removed whether publication succeeds
or fails, and a failed publication leaves nothing in `--output` (a full disk included); the
error is one `PublishError` line naming the path and the cause. Published directories get the
modes the umask gives, not the 0700 of a temporary directory.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import fsspec

COMMIT_MARKER = "trained_model.pb"


class OutputError(ValueError):
    """`--output` cannot be used; the message says why and what to do."""


class PublishError(OSError, OutputError):
    """Writing the outputs failed (disk full, permissions, network); nothing was left behind."""


def _fs(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str, bool]:
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    return fs, path, protocol in ("file", "local")


def check_output(
    url: str, storage_options: dict[str, Any] | None = None, resuming: bool = False
) -> None:
    """Fail early if `url` already holds a model or cannot be written.

    `resuming`: the job resumes from checkpoints inside `url` (a job that stopped before it
    published), so the entries a job owns (`JOB_OWNED`) may be there, and nothing else.
    """
    if not url:
        raise OutputError("--output is required: a directory or URL for the trained model")
    fs, path, _ = _fs(url, storage_options)
    if fs.exists(path):
        if not fs.isdir(path):
            raise OutputError(f"--output {url!r} is a file; give a directory path")
        names = {posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)}
        if names and not (resuming and names <= JOB_OWNED):
            hint = "(a job never overwrites an earlier model)"
            if names == {"tensorboard"}:
                hint = "(it holds the TensorBoard logs of a job that did not finish)"
            elif names <= JOB_OWNED:
                hint = (
                    "(it holds the checkpoints of a job that did not finish: resume it with "
                    f"--checkpoint_dir_for_init {url.rstrip('/')}/checkpoints)"
                )
            raise OutputError(
                f"--output {url!r} already holds files; choose a new location or remove it {hint}"
            )
    probe = f"{path.rstrip('/')}/.elasticdl-write-probe-{uuid.uuid4().hex[:8]}"
    created = not fs.exists(path)
    try:
        fs.makedirs(path, exist_ok=True)
        fs.pipe(probe, b"probe")
        fs.rm(probe)
    except (OSError, PermissionError) as err:
        raise OutputError(f"--output {url!r} is not writable: {err}") from err
    finally:
        if created:
            try:
                fs.rmdir(path)
            except (OSError, NotImplementedError):
                pass


def staging_dir(prefix: str = "elasticdl-output-") -> Path:
    """A fresh local directory to assemble outputs in."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def publish(staged: Path, url: str, storage_options: dict[str, Any] | None = None) -> None:
    """Move the staged outputs to `url`, atomically where the filesystem allows.

    `staged` is removed in every case. An OSError becomes a PublishError whose message names
    the place and the cause; what was written of the outputs has been removed by then.
    """
    try:
        fs, path, local = _fs(url, storage_options)
        if local:
            _publish_local(staged, Path(path))
        else:
            upload_staged(staged, fs, path)
    except PublishError:
        raise
    except OSError as err:
        cause = err.strerror or str(err) or type(err).__name__
        failure = PublishError(f"could not publish the outputs to {url}: {cause}")
        failure.errno = err.errno
        raise failure from err
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _copy_tree(source: Path, target: Path) -> None:
    """Copy a directory tree, stopping at the first error (shutil.copytree collects them all
    into one unreadable shutil.Error). Directories get the umask's modes, not mkdtemp's 0700."""
    mode = 0o777 & ~_umask()
    target.mkdir(mode=mode)
    os.chmod(target, mode)
    for entry in sorted(source.iterdir()):
        if entry.is_dir():
            _copy_tree(entry, target / entry.name)
        else:
            shutil.copyfile(entry, target / entry.name)
            shutil.copymode(entry, target / entry.name)


JOB_OWNED = {"checkpoints", "tensorboard"}
"""Entries the job itself writes into --output while it runs."""


def _publish_local(staged: Path, target: Path) -> None:
    """Rename the staged directory into place; beside the job's checkpoints, entry by entry.

    Without checkpoints the whole model directory appears in one rename. With them, each
    staged entry is renamed into the existing directory, `trained_model.pb` last, so a
    reader that waits for the commit marker never sees a partial model.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    existing = {p.name for p in target.iterdir()} if target.exists() else set()
    if existing - JOB_OWNED:
        raise OutputError(f"--output {target} was filled by someone else during the job")
    if not existing:
        sibling = target.parent / f".{target.name}.staging-{uuid.uuid4().hex[:8]}"
        try:
            _copy_tree(staged, sibling)
            if target.exists():
                target.rmdir()
            os.rename(sibling, target)
        except BaseException:
            shutil.rmtree(sibling, ignore_errors=True)
            raise
        return
    inner = target / f".staging-{uuid.uuid4().hex[:8]}"
    try:
        _copy_tree(staged, inner)
        entries = sorted(inner.iterdir(), key=lambda p: p.name == COMMIT_MARKER)
        for entry in entries:
            os.rename(entry, target / entry.name)
    finally:
        shutil.rmtree(inner, ignore_errors=True)


def upload_staged(staged: Path, fs: Any, path: str, commit_marker: str = COMMIT_MARKER) -> None:
    """Upload a staged directory file by file, `commit_marker` last; undo on failure.

    Readers of an object store treat a directory without its commit marker as absent.
    """
    files = sorted(p for p in staged.rglob("*") if p.is_file())
    files.sort(key=lambda p: p.name == commit_marker)
    written: list[str] = []
    try:
        for file in files:
            remote = f"{path.rstrip('/')}/{file.relative_to(staged).as_posix()}"
            fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
            fs.put_file(str(file), remote)
            written.append(remote)
    except BaseException:
        for remote in written:
            try:
                fs.rm(remote)
            except OSError:
                pass
        raise
