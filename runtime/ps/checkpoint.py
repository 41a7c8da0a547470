"""Parameter-server checkpoints: every shard's parameters and optimizer state, through fsspec.

Layout (any fsspec URL)::

    <checkpoint_dir>/version-<v:012d>/ps-<i>-of-<n>.npz

One uncompressed `.npz` per shard holds the shard's trainable values, non-trainable values,
optimizer slots (keyed `<stable_name>/<slot>`, e.g. `t003/dense/kernel/momentums`) and the
optimizer's other variables (`iterations`, ...), stored as `a<k>` arrays, plus a JSON header
(`__header__`, uint8) naming each array and recording version, ps_id, num_ps, model_def, the
applied-records progress and the write time.

Atomicity: a shard file is written under a temporary name in the same directory
(`ps-<i>-of-<n>.npz.tmp-<pid>-<random>`) and renamed to its final name (local disk:
fsync + `os.replace`; other filesystems: fsspec `mv`, which on object stores is a server-side
copy, so the final object appears whole or not at all). No marker files: a final name is only
ever a complete file. A version is VALID only when all n files `ps-0-of-n` .. `ps-<n-1>-of-n`
are present; temporary files are ignored (and removed by `prune`).

Embedding tables (see `embedding_checkpoint`): each shard file holds its rows of every table
(ids, rows and per-row optimizer slots) and the tables' specs in the header; re-sharding selects
rows by `embedding_shard`, so a checkpoint of n servers restores into any number.

Restoring works whatever number of shards wrote a checkpoint: `load_all` merges every shard,
`shard_state` re-shards the merge by `ps_of` for any `num_ps`. The optimizer's non-slot
variables and the applied-records progress are per shard: with the same `num_ps` each shard
gets its own back; otherwise every shard takes the non-slot variables of the old shard with the
most iterations, and per task the smallest progress over the old shards.
"""

from __future__ import annotations

import io
import json
import logging
import os
import posixpath
import queue
import re
import threading
import time
import uuid
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec
import numpy as np
from fsspec.implementations.local import LocalFileSystem

from elasticdl.runtime.ps import embedding_checkpoint
from elasticdl.runtime.ps.embedding_table import TableExport
from elasticdl.runtime.ps.partition import embedding_shard, ps_of

_log = logging.getLogger(__name__)

FORMAT = 1
_HEADER = "__header__"
_VERSION_DIR = re.compile(r"^version-(\d+)$")
_SHARD_FILE = re.compile(r"^ps-(\d+)-of-(\d+)\.npz$")
_KINDS = ("trainable", "non_trainable", "slot", "optimizer")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, corrupt or belongs to another model (one line)."""


class CheckpointDamaged(CheckpointError):
    """A shard file cannot be restored from: `reason` says why in a word or two ("truncated",
    "not an elasticdl checkpoint", "corrupt (...)", "incomplete (...)")."""

    def __init__(self, message: str, reason: str, version: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.version = version


@dataclass(frozen=True)
class Skipped:
    """A checkpoint version a resume passed over, and why (`CheckpointDamaged.reason`)."""

    version: int
    reason: str
    path: str


class CheckpointWriteError(CheckpointError):
    """A shard file could not be written (a full disk, no permission): one line naming the
    path and the cause."""


@dataclass
class ShardState:
    """Everything one PS shard needs to resume: values, optimizer state and progress.

    `slots`: optimizer slot variables keyed `<stable_name>/<slot>` (the slot name has no '/').
    `optimizer`: the optimizer's other variables (e.g. `iterations`), learning rate excluded.
    `progress`: task id -> records whose gradients are in these values.
    `embeddings`: table name -> its rows on this shard (ids, rows, optimizer slots).
    """

    version: int
    trainable: dict[str, np.ndarray] = field(default_factory=dict)
    non_trainable: dict[str, np.ndarray] = field(default_factory=dict)
    slots: dict[str, np.ndarray] = field(default_factory=dict)
    optimizer: dict[str, np.ndarray] = field(default_factory=dict)
    progress: dict[int, int] = field(default_factory=dict)
    embeddings: dict[str, TableExport] = field(default_factory=dict)

    @property
    def embedding_rows(self) -> int:
        """Rows held in all embedding tables."""
        return sum(int(e.ids.size) for e in self.embeddings.values())

    @property
    def iterations(self) -> int:
        value = self.optimizer.get("iterations")
        return 0 if value is None else int(value)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Stable name -> shape of every model variable (trainable and non-trainable)."""
        out = {name: tuple(v.shape) for name, v in self.trainable.items()}
        out.update({name: tuple(v.shape) for name, v in self.non_trainable.items()})
        return out


@dataclass
class Checkpoint:
    """All shards of one valid checkpoint version, merged (`load_all`)."""

    directory: str
    version: int
    num_ps: int
    model_def: str
    trainable: dict[str, np.ndarray]
    non_trainable: dict[str, np.ndarray]
    slots: dict[str, np.ndarray]
    optimizer: list[dict[str, np.ndarray]]
    """Per writing shard (index = its ps_id)."""
    progress: list[dict[int, int]]
    """Per writing shard (index = its ps_id)."""
    variable_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Every model variable in the checkpoint (also those `load_all(only=...)` did not read)."""
    embeddings: dict[str, TableExport] = field(default_factory=dict)
    """Every table's rows over all shards (only the selected shard's with `load_all(only=)`)."""
    embedding_rows: dict[str, int] = field(default_factory=dict)
    """Rows per table in the whole checkpoint (from the headers)."""
    skipped: list[Skipped] = field(default_factory=list)
    """Newer versions passed over because they could not be read (`load_all` with no version)."""

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Stable name -> shape of every model variable (trainable and non-trainable)."""
        return dict(self.variable_shapes)


def slot_owner(key: str) -> str:
    """The stable variable name of slot key `<stable_name>/<slot>`."""
    return key.rsplit("/", 1)[0]


# ---------------------------------------------------------------------------------------------
# Paths


def _fs(directory: str) -> tuple[Any, str]:
    fs, path = fsspec.core.url_to_fs(directory)
    return fs, path.rstrip("/") or "/"


def version_dirname(version: int) -> str:
    return f"version-{version:012d}"


def shard_filename(ps_id: int, num_ps: int) -> str:
    return f"ps-{ps_id}-of-{num_ps}.npz"


def shard_path(directory: str, version: int, ps_id: int, num_ps: int) -> str:
    """The URL-less path of one shard's file (for messages and tests)."""
    _, root = _fs(directory)
    return posixpath.join(root, version_dirname(version), shard_filename(ps_id, num_ps))


def _listing(fs: Any, path: str) -> list[str]:
    fs.invalidate_cache(path)  # object stores cache listings; other shards write meanwhile
    try:
        return [posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _versions_on_disk(fs: Any, root: str) -> list[int]:
    found = []
    for name in _listing(fs, root):
        match = _VERSION_DIR.match(name)
        if match:
            found.append(int(match.group(1)))
    return sorted(found)


def _complete_sets(names: Sequence[str]) -> list[int]:
    """Shard counts n for which all files ps-0-of-n .. ps-(n-1)-of-n are in `names`."""
    seen: dict[int, set[int]] = {}
    for name in names:
        match = _SHARD_FILE.match(name)
        if match:
            seen.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    return sorted(n for n, ids in seen.items() if n > 0 and ids >= set(range(n)))


# ---------------------------------------------------------------------------------------------
# Writing


def _encode(state: ShardState, ps_id: int, num_ps: int, model_def: str) -> bytes:
    arrays: dict[str, np.ndarray] = {}
    entries = []
    groups = (state.trainable, state.non_trainable, state.slots, state.optimizer)

    def add(kind: str, name: str, value: Any) -> None:
        key = f"a{len(arrays)}"
        array = np.asarray(value)
        arrays[key] = array
        entries.append([key, kind, name, list(array.shape), array.dtype.str])

    for kind, group in zip(_KINDS, groups, strict=True):
        for name, value in group.items():
            add(kind, name, value)
    tables = embedding_checkpoint.encode(state.embeddings, add)
    header = {
        "format": FORMAT,
        "version": int(state.version),
        "ps_id": ps_id,
        "num_ps": num_ps,
        "model_def": model_def,
        "written_at": time.time(),
        "entries": entries,
        "progress": sorted([int(t), int(r)] for t, r in state.progress.items()),
    }
    if tables:
        header["embedding_tables"] = tables
    arrays[_HEADER] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def save_shard(
    directory: str, version: int, ps_id: int, num_ps: int, state: ShardState, model_def: str = ""
) -> str:
    """Write shard `ps_id` of `num_ps` of checkpoint `version` atomically; returns its path.

    Rewriting an existing shard file replaces it whole. A write that fails (a full disk)
    raises CheckpointWriteError, one line naming the shard file and the cause, and leaves
    neither its temporary file nor a version folder it left empty.
    """
    if not 0 <= ps_id < num_ps:
        raise ValueError(f"ps_id must be in [0, {num_ps}), got {ps_id}")
    data = _encode(state, ps_id, num_ps, model_def)
    fs, root = _fs(directory)
    folder = posixpath.join(root, version_dirname(version))
    final = posixpath.join(folder, shard_filename(ps_id, num_ps))
    temp = f"{final}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        for attempt in (1, 2):
            fs.makedirs(folder, exist_ok=True)
            try:
                _write_file(fs, temp, final, folder, data)
                break
            except FileNotFoundError:
                if attempt == 2:  # another shard's clean-up removed the empty folder: once more
                    raise
    except BaseException as error:
        try:
            fs.rm(temp)
        except (OSError, FileNotFoundError):
            pass
        _remove_if_empty(fs, folder)
        if isinstance(error, OSError):
            cause = error.strerror or str(error) or type(error).__name__
            raise CheckpointWriteError(f"cannot write checkpoint {final}: {cause}") from error
        raise
    return final


def _write_file(fs: Any, temp: str, final: str, folder: str, data: bytes) -> None:
    if isinstance(fs, LocalFileSystem):
        with open(temp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, final)
        _fsync_dir(folder)
    else:
        with fs.open(temp, "wb") as out:
            out.write(data)
        fs.mv(temp, final)


def _remove_if_empty(fs: Any, folder: str) -> None:
    """Remove a version folder that holds nothing (a failed write's, or pruned)."""
    if _listing(fs, folder):
        return
    try:
        fs.rmdir(folder)
    except (OSError, NotImplementedError):
        pass  # another shard removed it, or wrote into it meanwhile


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# Finding and reading


def valid_versions(directory: str) -> list[int]:
    """Versions under `directory` with every shard file present, oldest first ([] if none)."""
    fs, root = _fs(directory)
    return [
        v
        for v in _versions_on_disk(fs, root)
        if _complete_sets(_listing(fs, posixpath.join(root, version_dirname(v))))
    ]


def latest_valid_version(directory: str) -> int | None:
    """The newest valid version under `directory`, or None."""
    fs, root = _fs(directory)
    for version in reversed(_versions_on_disk(fs, root)):
        if _complete_sets(_listing(fs, posixpath.join(root, version_dirname(version)))):
            return version
    return None


_ZIP_MAGIC = b"PK\x03\x04"


def shard_damage(fs: Any, path: str) -> str | None:
    """Why the shard file at `path` cannot be restored from, or None when it is intact: every
    byte is read and checked against the zip's CRCs (a whole read, for a resume's choice)."""
    try:
        with fs.open(path, "rb") as raw:
            head = raw.read(4)
            if not head:
                return "truncated (empty)"
            if head != _ZIP_MAGIC:
                return "not an elasticdl checkpoint"
            raw.seek(0)
            try:
                archive = zipfile.ZipFile(raw)
            except zipfile.BadZipFile:
                return "truncated"
            with archive:
                if f"{_HEADER}.npy" not in archive.namelist():
                    return "not an elasticdl checkpoint"
                bad = archive.testzip()
                if bad is not None:
                    return f"corrupt (bad data in {bad})"
                with archive.open(f"{_HEADER}.npy") as member:
                    header = json.loads(bytes(np.lib.format.read_array(member)).decode())
                if not isinstance(header, dict) or "entries" not in header:
                    return "not an elasticdl checkpoint"
    except FileNotFoundError:
        return "missing"
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as error:
        return f"corrupt ({error})"
    return None


def newest_intact(directory: str) -> tuple[int | None, list[Skipped]]:
    """The newest version whose shard files are all there and intact (`shard_damage`: every
    byte read), and the newer versions passed over with why, newest first. The master chooses
    a resume's version with it and every PS restores by it (`load_all`): the same files give
    the same answer, so all shards start from one version."""
    fs, root = _fs(directory)
    skipped: list[Skipped] = []
    for version in reversed(_versions_on_disk(fs, root)):
        folder = posixpath.join(root, version_dirname(version))
        names = _listing(fs, folder)
        sets = _complete_sets(names)
        if not sets:
            skipped.append(Skipped(version, f"incomplete ({_missing_shards(names)})", folder))
            continue
        try:
            num_ps = _newest_complete_set(fs, folder, sets, directory)
        except CheckpointDamaged as damaged:
            skipped.append(Skipped(version, damaged.reason, folder))
            continue
        for ps_id in range(num_ps):
            path = posixpath.join(folder, shard_filename(ps_id, num_ps))
            damage = shard_damage(fs, path)
            if damage is not None:
                skipped.append(Skipped(version, damage, path))
                break
        else:
            return version, skipped
    return None, skipped


def _missing_shards(names: Sequence[str]) -> str:
    seen: dict[int, set[int]] = {}
    for name in names:
        match = _SHARD_FILE.match(name)
        if match:
            seen.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    if not seen:
        return "no shard files"
    n = max(seen, key=lambda k: len(seen[k]))
    missing = [shard_filename(i, n) for i in sorted(set(range(n)) - seen[n])]
    return f"missing {', '.join(missing[:3])}"


def set_aside(directory: str, skipped: Sequence[Skipped]) -> list[str]:
    """Rename the version folders of `skipped` to `damaged-version-...` beside them, so that
    nothing restores from, counts or prunes them any more (their files are kept to look at);
    returns the new paths. For a job that resumes in its own checkpoint directory."""
    fs, root = _fs(directory)
    moved = []
    for entry in skipped:
        folder = posixpath.join(root, version_dirname(entry.version))
        target = posixpath.join(root, f"damaged-{version_dirname(entry.version)}")
        if fs.exists(folder) and not fs.exists(target):
            fs.mv(folder, target, recursive=True)
            moved.append(target)
    return moved


def _read_shard(
    fs: Any,
    path: str,
    directory: str,
    wanted: Callable[[str], bool] | None = None,
    keep_rows: Callable[[np.ndarray], np.ndarray] | None = None,
    tables: bool = True,
) -> tuple[dict[str, Any], ShardState, dict[str, tuple[int, ...]]]:
    """(header, state, shapes of every model variable in the file); arrays of variables (and
    their slots) for which `wanted(name)` is false are not read; embedding rows for which
    `keep_rows(ids)` is false are dropped, and no table is read with `tables=False`."""
    embeddings: dict[str, TableExport] = {}
    try:
        with fs.open(path, "rb") as raw, np.load(raw) as npz:
            header = json.loads(bytes(npz[_HEADER]).decode())
            groups: dict[str, dict[str, np.ndarray]] = {kind: {} for kind in _KINDS}
            shapes: dict[str, tuple[int, ...]] = {}
            table_arrays: dict[tuple[str, str], Callable[[], np.ndarray]] = {}
            for key, kind, name, shape, _dtype in header["entries"]:
                if kind in embedding_checkpoint.KINDS:
                    table_arrays[(kind, name)] = lambda key=key: npz[key]
                    continue
                if kind in ("trainable", "non_trainable"):
                    shapes[name] = tuple(shape)
                owner = slot_owner(name) if kind == "slot" else name
                if kind == "optimizer" or wanted is None or wanted(owner):
                    groups[kind][name] = npz[key]
            if tables:
                embeddings = embedding_checkpoint.decode(header, table_arrays, keep_rows)
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as error:
        reason = shard_damage(fs, path) or f"unreadable ({type(error).__name__}: {error})"
        raise CheckpointDamaged(f"checkpoint {directory}: {path} is {reason}", reason) from error
    state = ShardState(
        version=int(header["version"]),
        trainable=groups["trainable"],
        non_trainable=groups["non_trainable"],
        slots=groups["slot"],
        optimizer=groups["optimizer"],
        progress={int(t): int(r) for t, r in header.get("progress", [])},
        embeddings=embeddings,
    )
    return header, state, shapes


def _newest_complete_set(fs: Any, folder: str, sets: list[int], directory: str) -> int:
    if len(sets) == 1:
        return sets[0]
    # Files of another num_ps left by an earlier run of the job: the newest complete set wins.
    stamps = {}
    for n in sets:
        path = posixpath.join(folder, shard_filename(0, n))
        header, _, _ = _read_shard(fs, path, directory, lambda _: False, tables=False)
        stamps[n] = float(header.get("written_at", 0.0))
    return max(sets, key=lambda n: (stamps[n], n))


def load_all(
    directory: str, version: int | None = None, only: tuple[int, int] | None = None
) -> Checkpoint:
    """Every shard of checkpoint `version` (default: the latest valid one), merged.

    `only=(ps_id, num_ps)` reads just the arrays that shard will hold (`shard_state` of the
    result is the same); shapes of all variables are still known. Raises CheckpointError when
    there is no valid checkpoint, the version is incomplete, or the shard files are unreadable
    or inconsistent.
    """
    wanted = keep_rows = None
    if only is not None:
        target, targets = only

        def wanted(name: str) -> bool:
            return ps_of(name, targets) == target

        def keep_rows(ids: np.ndarray) -> np.ndarray:
            return embedding_shard(ids, targets) == target

    return _load(directory, version, wanted, keep_rows)


def check_directory(
    directory: str,
    expected: Mapping[str, Sequence[int]],
    model_def: str = "",
    version: int | None = None,
) -> int:
    """Check checkpoint `version` (default: the latest valid one) in `directory` against a
    model's variables (stable name -> shape) reading only the files' headers; returns its
    version. Raises CheckpointError like `load_all` and `check_model`. For a master that builds
    the model before starting parameter servers (they cannot build a subclassed model without
    data)."""
    loaded = _load(directory, version, lambda _: False, tables=False)
    check_model(loaded, expected, model_def)
    return loaded.version


def _load(
    directory: str,
    version: int | None,
    wanted: Callable[[str], bool] | None,
    keep_rows: Callable[[np.ndarray], np.ndarray] | None = None,
    tables: bool = True,
) -> Checkpoint:
    if version is not None:
        return _load_version(directory, version, wanted, keep_rows, tables)
    # The newest intact one, by the rule the master used to choose it (`newest_intact`), so
    # that every PS restores the same version: a damaged newer one is passed over with a line.
    version, skipped = newest_intact(directory)
    for passed in skipped:
        _log.warning(
            "skipping checkpoint version %d in %s: %s (%s)",
            passed.version,
            directory,
            passed.reason,
            passed.path,
        )
    if version is not None:
        loaded = _load_version(directory, version, wanted, keep_rows, tables)
        loaded.skipped = skipped
        return loaded
    fs, root = _fs(directory)
    found = _versions_on_disk(fs, root)
    what = f"only incomplete versions {found}" if found else "no version-* directories"
    damaged = [s for s in skipped if not s.reason.startswith("incomplete")]
    if damaged:
        what = "; ".join(f"version {s.version} is {s.reason}" for s in damaged)
    raise CheckpointError(
        f"no valid checkpoint in {directory} ({what}): check the checkpoint directory "
        "(wrong --checkpoint_dir_for_init?)"
    )


def _load_version(
    directory: str,
    version: int,
    wanted: Callable[[str], bool] | None,
    keep_rows: Callable[[np.ndarray], np.ndarray] | None,
    tables: bool,
) -> Checkpoint:
    fs, root = _fs(directory)
    folder = posixpath.join(root, version_dirname(version))
    sets = _complete_sets(_listing(fs, folder))
    if not sets:
        raise CheckpointError(
            f"checkpoint {directory} version {version} is incomplete or missing "
            "(not every parameter server's shard file is there)"
        )
    num_ps = _newest_complete_set(fs, folder, sets, directory)
    merged = Checkpoint(directory, version, num_ps, "", {}, {}, {}, [], [])
    for ps_id in range(num_ps):
        path = posixpath.join(folder, shard_filename(ps_id, num_ps))
        header, state, shapes = _read_shard(fs, path, directory, wanted, keep_rows, tables)
        problem = ""
        if (header.get("ps_id"), header.get("num_ps"), state.version) != (ps_id, num_ps, version):
            problem = (
                f"its header says shard {header.get('ps_id')} of {header.get('num_ps')}, "
                f"version {state.version}"
            )
        misplaced = [n for n in shapes if ps_of(n, num_ps) != ps_id]
        if misplaced:
            problem = f"it holds variables of other shards: {misplaced[:3]}"
        owners = {slot_owner(k) for k in state.slots} - set(shapes)
        if owners:
            problem = f"it holds optimizer slots of unknown variables: {sorted(owners)[:3]}"
        if keep_rows is None and (
            foreign := embedding_checkpoint.misplaced(state.embeddings, ps_id, num_ps)
        ):
            problem = f"it holds embedding rows of other shards in tables {foreign[:3]}"
        if problem:
            raise CheckpointDamaged(
                f"checkpoint {directory}: {path} is inconsistent: {problem}",
                f"inconsistent ({problem})",
            )
        merged.model_def = merged.model_def or str(header.get("model_def", ""))
        merged.variable_shapes.update(shapes)
        merged.trainable.update(state.trainable)
        merged.non_trainable.update(state.non_trainable)
        merged.slots.update(state.slots)
        merged.optimizer.append(state.optimizer)
        merged.progress.append(state.progress)
        for info in header.get("embedding_tables", []):
            name = str(info["name"])
            merged.embedding_rows[name] = merged.embedding_rows.get(name, 0) + int(info["rows"])
        try:
            embedding_checkpoint.merge(merged.embeddings, state.embeddings)
        except ValueError as error:
            raise CheckpointError(f"checkpoint {directory}: {path}: {error}") from None
    return merged


def shard_state(checkpoint: Checkpoint, ps_id: int, num_ps: int) -> ShardState:
    """The part of `checkpoint` that shard `ps_id` of `num_ps` holds (re-sharded by `ps_of`)."""
    if not 0 <= ps_id < num_ps:
        raise ValueError(f"ps_id must be in [0, {num_ps}), got {ps_id}")

    def mine(name: str) -> bool:
        return ps_of(name, num_ps) == ps_id

    if num_ps == checkpoint.num_ps:
        optimizer = checkpoint.optimizer[ps_id]
        progress = dict(checkpoint.progress[ps_id])
    else:
        iterations = [int(o.get("iterations", 0)) for o in checkpoint.optimizer]
        optimizer = checkpoint.optimizer[iterations.index(max(iterations))]
        tasks = set().union(*checkpoint.progress)
        progress = {t: min(p.get(t, 0) for p in checkpoint.progress) for t in tasks}
        progress = {t: r for t, r in progress.items() if r > 0}
    return ShardState(
        version=checkpoint.version,
        trainable={n: v for n, v in checkpoint.trainable.items() if mine(n)},
        non_trainable={n: v for n, v in checkpoint.non_trainable.items() if mine(n)},
        slots={k: v for k, v in checkpoint.slots.items() if mine(slot_owner(k))},
        optimizer=dict(optimizer),
        progress=progress,
        embeddings=embedding_checkpoint.select(checkpoint.embeddings, ps_id, num_ps),
    )


def check_model(
    checkpoint: Checkpoint, expected: Mapping[str, Sequence[int]], model_def: str = ""
) -> None:
    """Raise CheckpointError unless the checkpoint holds exactly the model's variables
    (`expected`: stable name -> shape, trainable and non-trainable)."""
    held = checkpoint.shapes()
    wanted = {name: tuple(shape) for name, shape in expected.items()}
    missing = sorted(set(wanted) - set(held))
    unknown = sorted(set(held) - set(wanted))
    reshaped = sorted(n for n in set(held) & set(wanted) if held[n] != wanted[n])
    if not (missing or unknown or reshaped):
        return
    problems = []
    if missing:
        problems.append(f"{len(missing)} model variables are not in it (e.g. {missing[:3]})")
    if unknown:
        problems.append(
            f"{len(unknown)} of its variables are not in the model (e.g. {unknown[:3]})"
        )
    if reshaped:
        name = reshaped[0]
        problems.append(
            f"{len(reshaped)} variables have other shapes (e.g. {name!r}: checkpoint "
            f"{held[name]}, model {wanted[name]})"
        )
    written = f" (written for model_def {checkpoint.model_def!r})" if checkpoint.model_def else ""
    model = f" {model_def!r}" if model_def else ""
    raise CheckpointError(
        f"checkpoint {checkpoint.directory} version {checkpoint.version}{written} does not "
        f"match the model{model}: {'; '.join(problems)}. Is it another model's checkpoint "
        "(wrong --checkpoint_dir_for_init or --checkpoint_dir)?"
    )


# ---------------------------------------------------------------------------------------------
# Pruning


def prune(directory: str, ps_id: int, num_ps: int, keep: int) -> list[int]:
    """Delete this shard's files in versions older than the newest `keep` valid ones.

    Also removes this shard's leftover temporary files anywhere and, from shard 0, files that
    another num_ps left in those old versions. A version directory left empty is removed (by
    whichever shard empties it), and so is any empty one found (a failed write's). `keep` <= 0
    keeps everything. Returns the versions this call removed files from.
    """
    if keep <= 0:
        return []
    fs, root = _fs(directory)
    on_disk = _versions_on_disk(fs, root)
    listings = {v: _listing(fs, posixpath.join(root, version_dirname(v))) for v in on_disk}
    valid = [v for v in on_disk if _complete_sets(listings[v])]
    cutoff = valid[-keep] if len(valid) >= keep else None
    mine = shard_filename(ps_id, num_ps)
    pruned = []
    for version in on_disk:
        folder = posixpath.join(root, version_dirname(version))
        names = listings[version]
        doomed = [n for n in names if n.startswith(f"{mine}.tmp-")]
        if cutoff is not None and version < cutoff:
            doomed += [n for n in names if n == mine]
            if ps_id == 0:
                doomed += [
                    n for n in names if (m := _SHARD_FILE.match(n)) and int(m.group(2)) != num_ps
                ]
        for name in doomed:
            try:
                fs.rm(posixpath.join(folder, name))
            except FileNotFoundError:
                pass
        if cutoff is not None and version < cutoff:
            pruned.append(version)
        if not names or doomed:
            _remove_if_empty(fs, folder)
    return pruned


# ---------------------------------------------------------------------------------------------
# Background writing


class CheckpointWriter:
    """Writes one shard's checkpoints in a background thread, pruning after each write.

    A shard prunes only by versions already valid, so the shard that finishes a version first
    leaves its file of the version that then drops out; its next write (or `close`) removes it.

    `submit` queues a state (captured by the caller) and returns at once, unless `max_pending`
    states already wait: then it blocks until one is written (back-pressure instead of unbounded
    memory). A failed write is logged in one line (the shard file and the cause) and counted:
    `failures` in all, `failed_in_a_row` since the last written one, `last_error` and
    `last_failed_version`; training goes on (the master reads these through the liveness
    probe's answer and decides, runtime/master/checkpoint_health.py).
    """

    def __init__(
        self,
        directory: str,
        ps_id: int,
        num_ps: int,
        keep: int = 3,
        model_def: str = "",
        max_pending: int = 2,
    ) -> None:
        self.directory = directory
        self.ps_id = ps_id
        self.num_ps = num_ps
        self.keep = keep
        self.model_def = model_def
        self.written: list[int] = []
        self.failures = 0
        self.failed_in_a_row = 0
        self.last_error = ""
        self.last_failed_version = -1
        self.last_write_s = 0.0
        self._queue: queue.Queue[ShardState | None] = queue.Queue(max_pending)
        self._idle = threading.Condition()
        self._outstanding = 0
        self._thread = threading.Thread(target=self._run, name=f"ps{ps_id}-checkpoint", daemon=True)
        self._thread.start()

    def submit(self, state: ShardState) -> None:
        """Queue `state` for writing (blocks while `max_pending` states wait)."""
        with self._idle:
            self._outstanding += 1
        self._queue.put(state)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted state is written (or failed); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._outstanding == 0, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Write what is queued (within `timeout` seconds), prune once more (other shards may
        have completed versions since this one last pruned), then stop the thread; False when
        writes were still going on at the timeout (the daemon thread goes on with them)."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        try:
            self._queue.put(None, timeout=None if deadline is None else max(0.0, timeout))
        except queue.Full:
            return False
        self._thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            return False
        if self.written:
            try:
                prune(self.directory, self.ps_id, self.num_ps, self.keep)
            except Exception:  # noqa: BLE001 - best effort at shutdown
                _log.exception("parameter server %d: pruning %s failed", self.ps_id, self.directory)
        return True

    def _run(self) -> None:
        while (state := self._queue.get()) is not None:
            try:
                self.write(state)
                self.failed_in_a_row = 0
            except Exception as error:  # noqa: BLE001 - a failed checkpoint must not stop training
                if not isinstance(error, CheckpointError):
                    error = CheckpointWriteError(
                        f"cannot write checkpoint version {state.version} to {self.directory}: "
                        f"{type(error).__name__}: {error}"
                    )
                self.failures += 1
                self.failed_in_a_row += 1
                self.last_error = str(error)
                self.last_failed_version = state.version
                _log.error("parameter server %d: %s", self.ps_id, error)
            finally:
                with self._idle:
                    self._outstanding -= 1
                    self._idle.notify_all()

    def write(self, state: ShardState) -> None:
        """Write `state` now (in the calling thread), then prune."""
        start = time.perf_counter()
        save_shard(self.directory, state.version, self.ps_id, self.num_ps, state, self.model_def)
        self.last_write_s = time.perf_counter() - start
        self.written.append(state.version)
        _log.info(
            "parameter server %d: checkpoint of version %d written to %s in %.3f s",
            self.ps_id,
            state.version,
            self.directory,
            self.last_write_s,
        )
        try:
            prune(self.directory, self.ps_id, self.num_ps, self.keep)
        except Exception as error:  # noqa: BLE001 - the version is written; pruning retries
            _log.warning("parameter server %d: pruning %s: %s", self.ps_id, self.directory, error)
