"""The progress journal: torn writes, resume planning as tables, a real checkpoint's progress."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from elasticdl.runtime.data.shards import plan_shards
from elasticdl.runtime.master.progress_journal import (
    JOURNAL_NAME,
    JournalError,
    ProgressJournal,
    applied_in,
    coverage,
    parse_lines,
    plan_fingerprint,
    read_journal,
    resume_point,
)
from elasticdl.runtime.master.task_manager import (
    Resumed,
    ShardKey,
    TaskManager,
    TaskManagerConfig,
    plan_epoch,
)
from elasticdl.runtime.ps import checkpoint
from elasticdl.runtime.ps.partition import ps_of

FILES = [("a", 25), ("b", 10)]
SHARDS = plan_shards(FILES, 10)  # a[0,10) a[10,20) a[20,25) b[0,10)
PLAN = plan_fingerprint(SHARDS, seed=0, shuffle=True)


def key(epoch: int, file: str, start: int, end: int) -> ShardKey:
    return ShardKey(epoch, file, start, end)


# -- torn lines ------------------------------------------------------------------------------

LINE_A = '{"kind":"run","run":1,"plan":"p","from_version":-1,"first_task_id":1}\n'
LINE_B = '{"kind":"pass","run":1,"tasks":[[1,0,"a",0,10,0]],"trained":[[0,"a",0,10,4]]}\n'


@pytest.mark.parametrize("cut", range(len(LINE_B)))
def test_a_line_torn_anywhere_is_dropped(cut):
    assert [e["kind"] for e in parse_lines(LINE_A + LINE_B[:cut])] == ["run"]


def test_complete_lines_and_blank_lines_parse():
    assert [e["kind"] for e in parse_lines(LINE_A + "\n" + LINE_B)] == ["run", "pass"]
    assert parse_lines("") == []


@pytest.mark.parametrize("bad", ["{not json\n", '["a list"]\n', '{"kind": "other"}\n'])
def test_a_bad_line_before_the_last_is_a_one_line_error(bad):
    with pytest.raises(JournalError, match=r"line 2 is corrupt .* remove the file"):
        parse_lines(LINE_A + bad + LINE_B)


def test_a_journal_written_by_a_killed_process_reads_back(tmp_path):
    """A real writer SIGKILLed mid-stream: every line it completed is read, none other."""
    script = (
        "import sys\n"
        "from elasticdl.runtime.master.progress_journal import ProgressJournal\n"
        "from elasticdl.runtime.master.task_manager import ProgressDelta, ShardKey\n"
        "journal = ProgressJournal(sys.argv[1])\n"
        "journal.open_run('plan')\n"
        "n = 0\n"
        "while True:\n"
        "    n += 1\n"
        "    rows = {ShardKey(0, 'f' * 300, i, i + 10): 5 for i in range(0, 400, 10)}\n"
        "    journal.append(ProgressDelta(n, [(n, ShardKey(0, 'a', 0, 10), 0)], rows))\n"
        "    if n == 20: print('ready', flush=True)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-P", "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    entries = read_journal(str(tmp_path))
    tasks = [e["tasks"][0][0] for e in entries if e["kind"] == "pass"]
    assert len(tasks) >= 20 and tasks == list(range(1, len(tasks) + 1))
    # The next run continues the file after a clean cut, whatever was torn.
    with open(tmp_path / JOURNAL_NAME, "a") as file:
        file.write('{"kind":"pass","run":1,"tasks":[[99')
    journal = ProgressJournal(str(tmp_path))
    assert journal.open_run("plan").first_task_id == len(tasks) + 1  # ids stay unique
    assert journal.run == 2
    entries = read_journal(str(tmp_path))
    assert entries[-1]["kind"] == "run" and entries[-1]["run"] == 2
    assert len(entries) == len(tasks) + 2


# -- planning a resumed epoch ------------------------------------------------------------------

PLANS = [
    (
        "nothing covered: every range from its start",
        {},
        [("a", 0, 0), ("a", 10, 0), ("a", 20, 0), ("b", 0, 0)],
    ),  # fmt: skip
    (
        "a range partly covered starts after its prefix",
        {key(0, "a", 10, 20): 7},
        [("a", 0, 0), ("a", 10, 7), ("a", 20, 0), ("b", 0, 0)],
    ),  # fmt: skip
    (
        "a fully covered range has no task",
        {key(0, "a", 20, 25): 5, key(0, "b", 0, 10): 10},
        [("a", 0, 0), ("a", 10, 0)],
    ),  # fmt: skip
    (
        "another epoch's coverage does not count",
        {key(1, "a", 0, 10): 10},
        [("a", 0, 0), ("a", 10, 0), ("a", 20, 0), ("b", 0, 0)],
    ),  # fmt: skip
]


@pytest.mark.parametrize(("name", "covered", "expected"), PLANS, ids=[p[0] for p in PLANS])
def test_plan_epoch_skips_what_is_covered(name, covered, expected):
    for shuffle in (False, True):
        full = plan_epoch(SHARDS, 0, shuffle, seed=3)
        planned = plan_epoch(SHARDS, 0, shuffle, seed=3, covered=covered)
        assert sorted((s.file, s.start, skip) for s, _, skip in planned) == expected
        # Same order and visiting orders as the plan without coverage.
        seeds = {s: seed for s, seed, _ in full}
        assert [(s, seed) for s, seed, _ in planned] == [
            (s, seeds[s]) for s, _, _ in full if s in {p for p, _, _ in planned}
        ]


# -- what a checkpoint covers -------------------------------------------------------------------


def run_entry(run, from_version, first_task_id=1, covered=(), trained=(), plan=PLAN):
    entry = {"kind": "run", "run": run, "plan": plan, "from_version": from_version}
    return {**entry, "first_task_id": first_task_id, "covered": [*covered], "trained": [*trained]}


def pass_entry(run, tasks=(), trained=()):
    return {"kind": "pass", "run": run, "tasks": list(tasks), "trained": list(trained)}


RUN1 = [
    run_entry(1, -1),
    pass_entry(1, tasks=[[1, 0, "a", 0, 10, 0], [2, 0, "a", 10, 20, 0]]),
    pass_entry(
        1, tasks=[[3, 0, "a", 10, 20, 6]], trained=[[0, "a", 0, 10, 10], [0, "a", 10, 20, 6]]
    ),
    pass_entry(1, trained=[[0, "a", 10, 20, 9]]),
]
RUN2 = [
    run_entry(
        2,
        40,
        4,
        covered=[[0, "a", 0, 10, 10], [0, "a", 10, 20, 8]],
        trained=[[0, "a", 0, 10, 10], [0, "a", 10, 20, 9]],
    ),  # fmt: skip
    pass_entry(
        2, tasks=[[4, 0, "a", 10, 20, 8], [5, 0, "b", 0, 10, 0]], trained=[[0, "b", 0, 10, 3]]
    ),  # fmt: skip
]
COVERAGE = [
    ("a checkpoint with no progress covers nothing", RUN1, 10, {}, {}, 4),
    (
        "progress maps to the journaled tasks; a remainder adds its skip",
        RUN1,
        10,
        {1: 10, 2: 6, 3: 2},
        {key(0, "a", 0, 10): 10, key(0, "a", 10, 20): 8},
        4,
    ),  # fmt: skip
    ("a first attempt's progress alone", RUN1, 10, {2: 4}, {key(0, "a", 10, 20): 4}, 4),
    ("progress of an unknown task is ignored", RUN1, 10, {77: 5}, {}, 4),
    (
        "a run's carried coverage counts for checkpoints at or after its start",
        RUN1 + RUN2,
        50,
        {5: 2},
        {key(0, "a", 0, 10): 10, key(0, "a", 10, 20): 8, key(0, "b", 0, 10): 2},
        6,
    ),  # fmt: skip
    ("... not for an older checkpoint", RUN1 + RUN2, 30, {1: 10}, {key(0, "a", 0, 10): 10}, 6),
    (
        "another plan's runs count for nothing",
        [run_entry(1, -1, plan="other"), *RUN1[1:]],
        10,
        {1: 10},
        {},
        4,
    ),  # fmt: skip
]


@pytest.mark.parametrize(
    ("name", "entries", "version", "applied", "covered", "first_id"),
    COVERAGE,
    ids=[c[0] for c in COVERAGE],
)
def test_coverage_of_a_checkpoint(name, entries, version, applied, covered, first_id):
    resumed = coverage(entries, version, applied, PLAN)
    assert dict(resumed.covered) == covered
    assert resumed.first_task_id == first_id
    assert all(resumed.trained[k] >= n for k, n in covered.items())


def test_trained_is_what_workers_reported_of_this_plan():
    resumed = coverage(RUN1, 10, {1: 10}, PLAN)
    assert dict(resumed.trained) == {key(0, "a", 0, 10): 10, key(0, "a", 10, 20): 9}


def test_applied_in_takes_the_minimum_over_shards():
    assert applied_in([{1: 10, 2: 4}, {1: 8}]) == {1: 8, 2: 0}
    assert applied_in([]) == {}


# -- a resumed task manager ------------------------------------------------------------------


def drain(tm: TaskManager, worker: int = 0) -> list:
    done = []
    while (task := tm.get(worker, 0.0)) is not None:
        tm.report_result(worker, task.task_id, "", 0.0)
        done.append(task)
    return done


def test_a_resumed_job_trains_only_the_rest_and_its_counts_add_up():
    covered = {key(0, "a", 0, 10): 10, key(0, "a", 10, 20): 4, key(1, "b", 0, 10): 10}
    trained = {**covered, key(0, "a", 10, 20): 9, key(0, "b", 0, 10): 2}
    tm = TaskManager(
        SHARDS,
        TaskManagerConfig(records_per_task=10, num_epochs=2),
        resumed=Resumed(covered, trained, first_task_id=50),
    )
    tasks = drain(tm)
    assert min(t.task_id for t in tasks) == 50
    assert sum(t.num_records for t in tasks) == 2 * 35 - 24
    assert {(t.epoch, t.shard.file, t.shard.start, t.skip) for t in tasks if t.skip} == {
        (0, "a", 10, 4)
    }
    first, second = tm.epochs
    assert (first.planned, first.covered, second.covered) == (35, 14, 10)
    # Records 4..9 of a[10,20) and 0..2 of b[0,10) were trained before the kill but were not
    # in the checkpoint: trained again, they count as redone.
    assert (first.redone, second.redone) == (5 + 2, 0)
    assert tm.records_trained - tm.records_redone == tm.records_planned
    assert tm.finished


def test_a_fully_covered_job_is_finished_at_once():
    covered = {ShardKey(0, s.file, s.start, s.end): s.num_records for s in SHARDS}
    tm = TaskManager(
        SHARDS, TaskManagerConfig(records_per_task=10), resumed=Resumed(covered, covered)
    )
    assert tm.get(0, 0.0) is None and tm.finished and tm.records_trained == 35


def test_progress_since_a_cursor_gives_new_handouts_and_advanced_prefixes():
    tm = TaskManager(SHARDS, TaskManagerConfig(records_per_task=10, shuffle=False))
    first = tm.get(0, 0.0)
    tm.report_progress(0, first.task_id, 4, 1.0)
    delta = tm.progress_since(0)
    assert delta.handouts == [(first.task_id, key(0, "a", 0, 10), 0)]
    assert delta.trained == {key(0, "a", 0, 10): 4}
    assert not tm.progress_since(delta.cursor)
    tm.report_progress(0, first.task_id, 6, 2.0)
    tm.recover_worker(0, 3.0, cause="killed", applied={first.task_id: 8})
    again = tm.get(1, 4.0)
    later = tm.progress_since(delta.cursor)
    # The PS had two records more: they are in the model, the remainder starts after them.
    assert later.handouts == [(again.task_id, key(0, "a", 0, 10), 8)]
    assert later.trained == {key(0, "a", 0, 10): 8}


def save(directory: str, version: int, ps_id: int, progress: dict[int, int]) -> None:
    name = next(n for n in (f"w{i}" for i in range(100)) if ps_of(n, 2) == ps_id)
    state = checkpoint.ShardState(version, {name: np.zeros(2, np.float32)}, progress=progress)
    checkpoint.save_shard(directory, version, ps_id, 2, state)


def test_the_journal_round_trip_resumes_where_the_checkpoint_is(tmp_path):
    """Journal a run, write a checkpoint whose progress covers part of it, resume from it."""
    directory = str(tmp_path)
    config = TaskManagerConfig(records_per_task=10, shuffle=False)
    tm = TaskManager(SHARDS, config)
    journal = ProgressJournal(directory)
    assert journal.open_run(PLAN) == Resumed() and journal.run == 1
    cursor = 0
    a, b = tm.get(0, 0.0), tm.get(1, 0.0)
    tm.report_progress(0, a.task_id, 10, 1.0)
    tm.report_progress(1, b.task_id, 6, 1.0)
    delta = tm.progress_since(cursor)
    journal.append(delta)
    cursor = delta.cursor
    # The checkpoint holds a's 10 records and 3 of b's on one shard, 4 on the other.
    for ps_id, progress in enumerate(
        [{a.task_id: 10, b.task_id: 3}, {a.task_id: 10, b.task_id: 4}]
    ):
        save(directory, 7, ps_id, progress)
    point = resume_point(directory, 7, PLAN)
    assert point.journaled and point.from_version == 7
    assert dict(point.resumed.covered) == {key(0, "a", 0, 10): 10, key(0, "a", 10, 20): 3}
    assert point.resumed.trained[key(0, "a", 10, 20)] == 6
    assert point.resumed.first_task_id == 3
    # The journal is no checkpoint version: pruning and validity checks leave it alone.
    assert checkpoint.valid_versions(directory) == [7]
    for ps_id in range(2):
        save(directory, 8, ps_id, {})
    for ps_id in range(2):
        checkpoint.prune(directory, ps_id, 2, keep=1)
    assert checkpoint.valid_versions(directory) == [8]
    assert checkpoint.latest_valid_version(directory) == 8
    assert (tmp_path / JOURNAL_NAME).exists()
    lines = (tmp_path / JOURNAL_NAME).read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["run", "pass"]
    # Another plan (other data or seed) resumes nothing; a directory without journal neither.
    other = plan_fingerprint(SHARDS, seed=1, shuffle=False)
    assert not resume_point(directory, 7, other).journaled
    assert resume_point(directory, 7, other).resumed.covered == {}
    assert not resume_point(str(tmp_path / "none"), 7, PLAN).journaled


def records_of(task) -> list[tuple[int, str, int]]:
    from elasticdl.runtime.worker.order import visiting_order

    order = visiting_order(task.shard.num_records, task.shuffle_seed)
    return [(task.epoch, task.shard.file, task.shard.start + i) for i in order][task.skip :]


@pytest.mark.parametrize("shuffle", [False, True])
def test_killed_twice_every_record_is_in_the_model_exactly_once(tmp_path, shuffle):
    """Run 1 trains part of 2 epochs and dies; run 2 resumes in place from a checkpoint, trains
    more and dies; run 3 resumes from run 2's checkpoint and finishes. The records in each
    checkpoint plus those trained after it are every record of every epoch, once."""
    directory = str(tmp_path)
    config = TaskManagerConfig(records_per_task=10, num_epochs=2, shuffle=shuffle, seed=5)
    plan = plan_fingerprint(SHARDS, seed=5, shuffle=shuffle)
    model: list = []  # records whose gradients are in the PS, in order
    in_checkpoint: dict[int, list] = {}
    applied: dict[int, int] = {}  # the PS's progress: task id -> records
    resumed, version = None, -1
    for run, (steps, checkpoint_at) in enumerate([(5, 3), (4, 2), (99, None)], 1):
        journal = ProgressJournal(directory)
        resumed = journal.open_run(plan, version, resumed)
        tm = TaskManager(SHARDS, config, resumed=resumed)
        applied = {}  # a PS restored from checkpoint_dir_for_init starts without progress
        cursor = 0
        for step in range(steps):
            task = tm.get(0, float(step))
            if task is None:
                break
            last_run = checkpoint_at is None
            half = task.num_records if last_run else task.num_records // 2 or task.num_records
            model.extend(records_of(task)[:half])
            applied[task.task_id] = half
            if last_run:
                tm.report_result(0, task.task_id, "", float(step))
            else:  # half done, then the worker is preempted
                tm.report_progress(0, task.task_id, half, float(step))
                tm.recover_worker(0, float(step), cause="preempted", count_failure=False)
            delta = tm.progress_since(cursor)
            journal.append(delta)
            cursor = delta.cursor
            if step == checkpoint_at:
                version = 10 * run
                in_checkpoint[version] = list(model)
                save(directory, version, 0, dict(applied))
                save(directory, version, 1, dict(applied))
        if checkpoint_at is None:
            assert tm.finished
            break
        model = list(in_checkpoint[version])  # the master is killed: back to the checkpoint
        point = resume_point(directory, version, plan)
        assert point.journaled
        resumed = point.resumed
        assert tm.records_trained - tm.records_redone <= tm.records_planned
    everything = [(e, f, r) for e in range(2) for f, n in FILES for r in range(n)]
    assert sorted(model) == sorted(everything)
    assert tm.records_trained - tm.records_redone == tm.records_planned
    assert tm.records_covered == len(in_checkpoint[20]) and tm.records_redone > 0
