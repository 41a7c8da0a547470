"""One job per `--output`: a claim taken before the job starts anything, released at its end.

Two jobs given one `--output` used to both run to the end, interleaving checkpoint versions,
the progress journal and TensorBoard files in it; the loser learned of it only when it
published. Now the first thing a training or prediction job does is claim its output; a second
job fails at once, in one line naming the holder and since when (exit status 2 on the CLI).

The claim is a small JSON file beside the output, `.<name>.claim` in its parent directory
(`/models/.m1.claim`, `gs://b/models/.m1.claim`), naming the job, the host, the process id and
when the claim was taken. Beside it, not in it: the output must stay empty until the job
publishes (outputs.py).

* A local path: the holder keeps an exclusive `flock` on the claim file for its whole life.
  The kernel drops the lock when the process ends, however it ends (SIGKILL, OOM), so a claim
  whose lock can be taken belongs to a dead job: it is taken over, with a line naming that job.
  Two jobs started at the same instant: the kernel gives the lock to exactly one.
* Any other fsspec URL (object stores have no locks): the claim is written when absent and
  renewed every `RENEW_S` seconds; a claim not renewed for `STALE_S` seconds belongs to a
  dead job and is taken over. The claim is read back after it is written: of two jobs that
  wrote at the same instant, the one whose claim was overwritten fails. (An object store gives
  no stronger guarantee without conditional writes.)

A job that claimed the output becomes the only live job that stages beside it, so staging
directories that a killed job left there (`.<name>.staging-*`, and `.staging-*` inside a
resumed output) are removed when the claim is taken.

A job's master that runs in a child process (another Keras, keras_switch.py) finds its
parent's claim: the same job, held by its parent process; it runs under it and leaves it to
the parent to release.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import logging
import os
import posixpath
import shutil
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import fsspec

from elasticdl.runtime.outputs import OutputError

log = logging.getLogger("elasticdl.output")

SUFFIX = ".claim"
RENEW_S = 60.0
"""How often a job renews its claim on an object-store output."""
STALE_S = 300.0
"""A claim on an object-store output not renewed for this long belongs to a dead job."""
_READ_TRIES = 20
"""Reads of a locked claim that is still empty (its holder is writing it), 10 ms apart."""


class OutputClaimed(OutputError):
    """Another live job holds the claim on this --output."""


@dataclass(frozen=True)
class Holder:
    """Who holds a claim: what the claim file says."""

    job: str
    host: str
    pid: int
    since: str
    """When the claim was taken: ISO 8601, UTC, seconds."""
    renewed: float = 0.0
    """Object stores: when the holder last renewed the claim (seconds since the epoch)."""
    token: str = ""

    def describe(self) -> str:
        return f"job {self.job} (process {self.pid} on {self.host}, since {self.since})"

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def parse(cls, data: bytes) -> Holder | None:
        """The holder a claim file names; None when it names none (empty, or not a claim)."""
        try:
            fields = json.loads(data.decode())
            return cls(
                str(fields["job"]),
                str(fields["host"]),
                int(fields["pid"]),
                str(fields["since"]),
                float(fields.get("renewed", 0.0)),
                str(fields.get("token", "")),
            )
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None


def claim_path(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str, bool]:
    """(filesystem, path of the claim file, whether it is local) for output `url`."""
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    local = protocol in ("file", "local")
    if local:
        path = os.path.abspath(path)
    path = path.rstrip("/")
    parent, name = posixpath.split(path)
    if not name:
        raise OutputError(f"--output {url!r}: give a directory below the root")
    return fs, posixpath.join(parent, f".{name}{SUFFIX}"), local


class OutputClaim:
    """The claim of one job on one --output (see the module docstring).

    Use as a context manager, or `acquire()` then `release()`."""

    def __init__(
        self, url: str, job_name: str, storage_options: dict[str, Any] | None = None
    ) -> None:
        if not url:
            raise OutputError("--output is required: a directory or URL for the job's outputs")
        self.url = url
        self.job_name = job_name
        self._fs, self.path, self._local = claim_path(url, storage_options)
        self._fd: int | None = None
        self._created: list[Path] = []
        self._inherited = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.me = Holder(
            job_name,
            socket.gethostname(),
            os.getpid(),
            dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            time.time(),
            uuid.uuid4().hex,
        )
        self.taken_over: Holder | None = None
        """The dead job whose claim this one took over, if any."""

    def __enter__(self) -> OutputClaim:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- taking --------------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the claim; OutputClaimed (one line) when a live job holds it."""
        try:
            if self._local:
                self._acquire_local()
            else:
                self._acquire_remote()
        except OSError as err:
            self._remove_created()
            cause = err.strerror or str(err) or type(err).__name__
            raise OutputError(
                f"--output {self.url!r} is not writable: cannot write its claim file "
                f"{self.path}: {cause}"
            ) from None
        if self._inherited:
            return
        if self.taken_over is not None:
            log.warning(
                "--output %s: taking over the claim of %s: that job is gone",
                self.url,
                self.taken_over.describe(),
            )
        if self._local:
            remove_stale_staging(Path(self.path).parent, Path(self.path).name[1 : -len(SUFFIX)])

    def _refuse(self, holder: Holder | None) -> OutputClaimed:
        who = holder.describe() if holder else "another job that is starting"
        # A local claim's lock dies with its holder; an object store's claim may outlive it.
        gone = "" if self._local else f" (or, if that job is gone, remove {self.path})"
        return OutputClaimed(
            f"--output {self.url!r} is in use by {who}; give this job another --output{gone}"
        )

    def _is_parent(self, holder: Holder | None) -> bool:
        """The claim is this job's own, held by the process that started this one."""
        return (
            holder is not None
            and holder.job == self.job_name
            and holder.host == self.me.host
            and holder.pid == os.getppid()
        )

    def _acquire_local(self) -> None:
        import fcntl

        parent = Path(self.path).parent
        self._created = [p for p in (parent, *parent.parents) if not p.exists()]
        parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise
                holder = _read_locked(fd)
                os.close(fd)
                if self._is_parent(holder):
                    self._inherited = True
                    return
                self._remove_created()
                raise self._refuse(holder) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # its holder removed it as we opened it: take the new one
                os.close(fd)
                continue
            self.taken_over = Holder.parse(os.pread(fd, 1 << 16, 0))
            data = self.me.to_json()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
            self._fd = fd
            return

    def _acquire_remote(self) -> None:
        fs = self._fs
        holder = self._read_remote()
        if holder is not None:
            if self._is_parent(holder):
                self._inherited = True
                return
            if time.time() - holder.renewed < STALE_S:
                raise self._refuse(holder)
            self.taken_over = holder
        fs.makedirs(posixpath.dirname(self.path), exist_ok=True)
        fs.pipe_file(self.path, self.me.to_json())
        found = self._read_remote()
        if found is None or found.token != self.me.token:
            raise self._refuse(found)
        self._renewer = threading.Thread(target=self._renew, name="output-claim", daemon=True)
        self._renewer.start()

    def _read_remote(self) -> Holder | None:
        self._fs.invalidate_cache(posixpath.dirname(self.path))
        try:
            return Holder.parse(self._fs.cat_file(self.path))
        except FileNotFoundError:
            return None

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_S):
            renewed = Holder(**{**asdict(self.me), "renewed": time.time()})
            try:
                self._fs.pipe_file(self.path, renewed.to_json())
            except OSError as err:  # the next renewal tries again; STALE_S is 5 renewals
                log.warning("--output %s: could not renew its claim: %s", self.url, err)

    # -- giving back -----------------------------------------------------------------------------

    def release(self) -> None:
        """Give the claim back (the file goes); a claim inherited from the parent stays."""
        if self._inherited:
            return
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5.0)
            self._renewer = None
            try:
                if (found := self._read_remote()) is not None and found.token == self.me.token:
                    self._fs.rm_file(self.path)
            except OSError as err:
                log.warning(
                    "--output %s: could not remove its claim %s: %s", self.url, self.path, err
                )
        if self._fd is not None:
            try:
                if os.fstat(self._fd).st_ino == os.stat(self.path).st_ino:
                    os.unlink(self.path)
            except OSError:
                pass
            os.close(self._fd)  # unlocks
            self._fd = None
            self._remove_created()

    def _remove_created(self) -> None:
        """Remove the directories the claim created above --output, if they are still empty (a
        job that published has filled them): a failed job leaves the file system as it was."""
        for directory in self._created:  # the deepest first
            try:
                directory.rmdir()
            except OSError:
                break


def _read_locked(fd: int) -> Holder | None:
    """The holder named in a claim file another process holds (it may be writing it)."""
    for _ in range(_READ_TRIES):
        holder = Holder.parse(os.pread(fd, 1 << 16, 0))
        if holder is not None:
            return holder
        time.sleep(0.01)
    return None


def remove_stale_staging(parent: Path, name: str) -> list[Path]:
    """Remove what killed jobs left staging for output `parent/name`: `.name.staging-*` beside
    it and `.staging-*` inside it. Only the claim's holder calls this: no live job stages
    there then. Returns what it removed (each named in a log line)."""
    found = list(parent.glob(f".{name}.staging-*"))
    target = parent / name
    if target.is_dir():
        found += list(target.glob(".staging-*"))
    removed = []
    for path in found:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as err:
            log.warning("could not remove %s, left by a job that did not finish: %s", path, err)
            continue
        log.warning("removed %s, left by a job that did not finish", path)
        removed.append(path)
    return removed
