"""The data plan's progress, journaled beside the checkpoints, so a resumed job trains only
what its checkpoint does not hold.

Why a journal: a checkpoint's shard files record, per task id, how many records' gradients
are in its values (the PS's applied progress, captured with the values under one lock). A task
id means nothing without the master's plan (which records of which file, in which epoch, from
where in the range's visiting order), and the master keeps its plan in memory. So the master
appends, once per loop pass, the training tasks it handed out and how far each record range
got (`TaskManager.progress_since`), to `<checkpoint_dir>/progress-journal.jsonl`. The PS's
pruning and validity checks look only at `version-*` directories, so they ignore it.

File format: one JSON object per line, each line written whole and then flushed (a SIGKILL
leaves at most a torn last line, which is ignored; a bad line elsewhere is an error):

    {"kind": "run", "run": 2, "plan": "<fingerprint>", "from_version": 300,
     "first_task_id": 1001, "covered": [[epoch, file, start, end, n], ...],
     "trained": [[epoch, file, start, end, n], ...]}
    {"kind": "pass", "run": 2, "tasks": [[task_id, epoch, file, start, end, skip], ...],
     "trained": [[epoch, file, start, end, n], ...]}

A "run" line opens each run of the job (a resumed run carries what its checkpoint held as
`covered` and what earlier runs trained as `trained`); "pass" lines follow. Task ids are unique
across the runs of one journal (each run starts after the largest id seen), so the checkpoint's
progress keys name one journaled task each.

Resuming from checkpoint version V (`coverage`, pure): a range's covered prefix is the largest
of the `covered` of runs that started at or before V and, for each journaled task that V's
progress names, its skip plus its applied records; ranges are prefixes of their visiting order
because a retry's remainder starts where the earlier attempt's reported progress ended. Only
runs whose plan fingerprint (shards, seed, shuffle) equals the resumed job's count: another
plan visits records in another order. On local disk lines are appended; on other fsspec
filesystems (no append) the whole journal is rewritten each pass (written to a temporary name,
then moved).

Wiring in the master (only when the job checkpoints):

    plan = plan_fingerprint(shards, seed, shuffle)
    point = resume_point(init_dir, init_version, plan) if init_dir else None  # version: of
    journal = ProgressJournal(checkpoint_dir)        # check_directory(init_dir, ...)
    resumed = journal.open_run(plan, point.from_version if point else -1,
                               point.resumed if point else None)
    tasks = TaskManager(shards, config, now=..., resumed=resumed)
    ...each loop pass: delta = tasks.progress_since(cursor) (under the servicer lock);
       journal.append(delta); cursor = delta.cursor

The report's counts then add up: `records_trained - records_redone == records_planned` at the
end, `records_trained` including what earlier runs trained, `records_covered` what the
checkpoint held, and records earlier runs trained beyond the checkpoint, trained again, redone.
Limits: records applied to the PS but not yet journaled when the master died (the last pass)
are trained again; a PS relaunched from `--checkpoint_dir_for_init` drops the applied progress
it restored (`ps/servicer.restore_at_start`), so in a job resumed in place, a PS relaunch makes
a later resume train again what the relaunched shard had restored (counted as redone).
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from elasticdl.runtime.data.shards import Shard
from elasticdl.runtime.master.task_manager import ProgressDelta, Resumed, ShardKey

log = logging.getLogger("elasticdl.master")

JOURNAL_NAME = "progress-journal.jsonl"


class JournalError(ValueError):
    """The journal cannot be read (one line naming the file and the line)."""


# -- pure -------------------------------------------------------------------------------------


def plan_fingerprint(shards: Sequence[Shard], seed: int, shuffle: bool) -> str:
    """What fixes the tasks' record ranges and visiting orders (not the number of epochs)."""
    text = json.dumps([seed, bool(shuffle), [[s.file, s.start, s.end] for s in shards]])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parse_lines(text: str, where: str = JOURNAL_NAME) -> list[dict[str, Any]]:
    """The journal's entries. What follows the last newline is a line torn by a kill mid-write
    and is dropped; a bad line before it raises JournalError."""
    complete = text.rpartition("\n")[0]
    entries = []
    for number, line in enumerate(complete.split("\n") if complete else [], 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or entry.get("kind") not in ("run", "pass"):
                raise ValueError("not a journal entry")
        except ValueError as error:
            raise JournalError(
                f"{where} line {number} is corrupt ({error}); remove the file to train every "
                "record again"
            ) from None
        entries.append(entry)
    return entries


def applied_in(progress_per_shard: Sequence[Mapping[int, int]]) -> dict[int, int]:
    """Task id -> records in every shard's values (a checkpoint's per-shard progress)."""
    if not progress_per_shard:
        return {}
    tasks = set().union(*progress_per_shard)
    return {t: min(int(p.get(t, 0)) for p in progress_per_shard) for t in tasks}


def _ranges(rows: Iterable[Sequence[Any]]) -> dict[ShardKey, int]:
    return {ShardKey(int(e), str(f), int(s), int(t)): int(n) for e, f, s, t, n in rows}


def _rows(counts: Mapping[ShardKey, int]) -> list[list[Any]]:
    return [[k.epoch, k.file, k.start, k.end, n] for k, n in counts.items() if n > 0]


def _raise(counts: dict[ShardKey, int], key: ShardKey, n: int) -> None:
    n = min(n, key.end - key.start)
    if n > counts.get(key, 0):
        counts[key] = n


def coverage(
    entries: Sequence[Mapping[str, Any]], version: int, applied: Mapping[int, int], plan: str
) -> Resumed:
    """Where a job with plan fingerprint `plan` resumes from checkpoint `version`, whose
    shards hold `applied` (task id -> records, see `applied_in`); see the module docstring."""
    runs = {e["run"] for e in entries if e["kind"] == "run" and e["plan"] == plan}
    covered: dict[ShardKey, int] = {}
    trained: dict[ShardKey, int] = {}
    last_id = 0
    for entry in entries:
        last_id = max(last_id, int(entry.get("first_task_id", 1)) - 1)
        for task in entry.get("tasks", ()):
            last_id = max(last_id, int(task[0]))
        if entry["run"] not in runs:
            continue
        for key, n in _ranges(entry.get("trained", ())).items():
            _raise(trained, key, n)
        if entry["kind"] == "run" and int(entry["from_version"]) <= version:
            for key, n in _ranges(entry.get("covered", ())).items():
                _raise(covered, key, n)
        for task_id, epoch, file, start, end, skip in entry.get("tasks", ()):
            done = applied.get(int(task_id), 0)
            if done > 0:
                _raise(covered, ShardKey(int(epoch), str(file), int(start), int(end)), skip + done)
    for key, n in covered.items():
        _raise(trained, key, n)
    return Resumed(covered, trained, last_id + 1)


def run_line(run: int, plan: str, from_version: int, resumed: Resumed) -> str:
    entry = {
        "kind": "run",
        "run": run,
        "plan": plan,
        "from_version": from_version,
        "first_task_id": resumed.first_task_id,
        "covered": _rows(resumed.covered),
        "trained": _rows(resumed.trained),
    }
    return json.dumps(entry, separators=(",", ":")) + "\n"


def pass_line(run: int, delta: ProgressDelta) -> str:
    entry = {
        "kind": "pass",
        "run": run,
        "tasks": [[t, k.epoch, k.file, k.start, k.end, skip] for t, k, skip in delta.handouts],
        "trained": _rows(delta.trained),
    }
    return json.dumps(entry, separators=(",", ":")) + "\n"


# -- I/O --------------------------------------------------------------------------------------


def _fs(directory: str) -> tuple[Any, str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(directory)
    return fs, posixpath.join(path.rstrip("/") or "/", JOURNAL_NAME)


def read_journal(directory: str) -> list[dict[str, Any]]:
    """The entries of the journal in `directory` ([] when there is none)."""
    fs, path = _fs(directory)
    try:
        with fs.open(path, "rb") as file:
            text = file.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return []
    return parse_lines(text, f"{directory.rstrip('/')}/{JOURNAL_NAME}")


def checkpoint_progress(directory: str, version: int) -> dict[int, int]:
    """Task id -> records in all shards of checkpoint `version` (reads the headers only)."""
    from elasticdl.runtime.ps import checkpoint

    # The headers alone: no array is read (`check_directory` reads them the same way).
    loaded = checkpoint._load(directory, version, lambda _: False)
    return applied_in(loaded.progress)


@dataclass(frozen=True)
class ResumePoint:
    resumed: Resumed
    from_version: int
    journaled: bool
    """False when `directory` has no journal (or none for this plan): everything is planned."""


def resume_point(directory: str, version: int, plan: str) -> ResumePoint:
    """What checkpoint `version` in `directory` covers of the plan `plan`."""
    entries = read_journal(directory)
    if not any(e["kind"] == "run" and e["plan"] == plan for e in entries):
        first = coverage(entries, version, {}, plan).first_task_id
        return ResumePoint(Resumed(first_task_id=first), version, False)
    resumed = coverage(entries, version, checkpoint_progress(directory, version), plan)
    return ResumePoint(resumed, version, True)


class ProgressJournal:
    """Appends the job's progress to the journal in its checkpoint directory.

    `open_run` starts a run (numbered `run` after the runs already in the file, which a job
    resumed in place continues); `append` writes one pass line when there is progress. Not
    thread-safe: the job loop owns it."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fs, self._path = _fs(directory)
        self._local = "file" in _protocols(self._fs)
        self._text = ""
        self.run = 0

    def open_run(
        self, plan: str, from_version: int = -1, resumed: Resumed | None = None
    ) -> Resumed:
        """Write this run's first line (`from_version`: the checkpoint it resumes from, -1 for
        none; `resumed`: what it covers). Returns `resumed` with a first task id after every id
        in the journal: build the TaskManager with it, so checkpoint progress keys stay unique.
        """
        entries = read_journal(self.directory)
        self.run = max((int(e["run"]) for e in entries), default=0) + 1
        resumed = resumed or Resumed()
        unused = coverage(entries, -1, {}, plan).first_task_id
        resumed = replace(resumed, first_task_id=max(resumed.first_task_id, unused))
        if not self._local:
            self._text = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
        else:
            self._fs.makedirs(posixpath.dirname(self._path), exist_ok=True)
            self._drop_torn_tail()
        self._write(run_line(self.run, plan, from_version, resumed))
        return resumed

    def append(self, delta: ProgressDelta) -> None:
        if delta:
            self._write(pass_line(self.run, delta))

    def _write(self, line: str) -> None:
        if self._local:
            with open(self._path, "a", encoding="utf-8") as file:
                file.write(line)
                file.flush()
            return
        self._text += line
        temporary = f"{self._path}.tmp-{uuid.uuid4().hex[:8]}"
        self._fs.pipe(temporary, self._text.encode("utf-8"))
        self._fs.mv(temporary, self._path)

    def _drop_torn_tail(self) -> None:
        """Cut a line torn by a kill mid-write, so the next line starts on its own."""
        try:
            with open(self._path, "rb+") as file:
                data = file.read()
                if data and not data.endswith(b"\n"):
                    file.truncate(data.rfind(b"\n") + 1)
        except FileNotFoundError:
            pass


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def open_journal(
    shards: Sequence[Shard],
    seed: int,
    shuffle: bool,
    checkpoint_dir: str,
    init_dir: str,
    from_version: int | None,
) -> tuple[ProgressJournal | None, Resumed]:
    """A run's progress journal beside its checkpoints (None without `checkpoint_dir`), and,
    when it resumes from version `from_version` of `init_dir`, what that checkpoint already
    holds of the plan (those records are not trained again)."""
    plan = plan_fingerprint(shards, seed, shuffle)
    point = None
    if init_dir and from_version is not None:
        point = resume_point(init_dir, from_version, plan)
        if not point.journaled:
            log.info("no progress journal in %s: every record is trained again", init_dir)
    if not checkpoint_dir:
        return None, point.resumed if point else Resumed()
    journal = ProgressJournal(checkpoint_dir)
    resumed = journal.open_run(
        plan, point.from_version if point else -1, point.resumed if point else None
    )
    return journal, resumed
