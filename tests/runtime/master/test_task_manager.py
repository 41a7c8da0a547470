import pytest

from elasticdl.runtime.data.shards import plan_shards
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig, TaskType
from elasticdl.runtime.master.task_timeout import ProgressTimes, TimeoutConfig, no_progress_limit

TRAINING, EVALUATION, PREDICTION = (int(t) for t in TaskType)

FILES = [("a", 25), ("b", 10)]


def manager(**overrides) -> TaskManager:
    config = TaskManagerConfig(records_per_task=10, **overrides)
    return TaskManager(plan_shards(FILES, 10), config)


def drain(tm: TaskManager, worker: int = 0, now: float = 0.0) -> list:
    done = []
    while (task := tm.get(worker, now)) is not None:
        tm.report_result(worker, task.task_id, "", now)
        done.append(task)
    return done


def visiting_order(task) -> list[int]:
    """The record indexes a worker visits for `task` (same rule as the worker)."""
    from elasticdl.runtime.worker.order import visiting_order as order

    return [task.shard.start + i for i in order(task.shard.num_records, task.shuffle_seed)][
        task.skip :
    ]


def covered(tasks) -> dict[tuple[str, int], int]:
    counts: dict[tuple[str, int], int] = {}
    for task in tasks:
        for r in visiting_order(task):
            counts[(task.shard.file, r)] = counts.get((task.shard.file, r), 0) + 1
    return counts


def test_every_record_once_per_epoch_and_shuffled_epochs():
    tm = manager(num_epochs=3, seed=7)
    tasks = drain(tm)
    assert tm.finished
    for epoch in range(3):
        counts = covered(t for t in tasks if t.epoch == epoch)
        assert len(counts) == 35 and set(counts.values()) == {1}
    orders = [[t.shard for t in tasks if t.epoch == e] for e in range(3)]
    assert orders[0] != orders[1] or orders[1] != orders[2]
    assert [e.trained for e in tm.epochs] == [35, 35, 35]
    assert tm.records_redone == 0


def test_no_shuffle_keeps_file_order():
    tm = manager(shuffle=False)
    tasks = drain(tm)
    assert [t.shard for t in tasks] == plan_shards(FILES, 10)
    assert all(t.shuffle_seed == 0 for t in tasks)
    assert visiting_order(tasks[0]) == list(range(10))


def test_shuffled_tasks_visit_their_records_in_a_seeded_order():
    tasks = drain(manager(seed=1))
    orders = [visiting_order(t) for t in tasks]
    assert any(order != sorted(order) for order in orders)
    assert all(sorted(visiting_order(t)) == list(range(t.shard.start, t.shard.end)) for t in tasks)
    assert [t.shuffle_seed for t in tasks] == [t.shuffle_seed for t in drain(manager(seed=1))]


def test_dead_worker_gives_back_only_the_unfinished_remainder():
    tm = manager(shuffle=False)
    first = tm.get(1, 0.0)
    other = tm.get(2, 0.0)
    assert tm.report_progress(1, first.task_id, 4, 1.0)
    requeued = tm.recover_worker(1, 5.0, cause="worker 1 killed", detected_at=4.5)
    assert [(t.shard, t.skip, t.num_records) for t in requeued] == [(first.shard, 4, 6)]
    assert tm.events[-1].kind == "task_requeued"
    assert tm.events[-1].seconds == pytest.approx(0.5)
    # The requeued remainder is handed out next, to anyone.
    again = tm.get(3, 6.0)
    assert (again.shard, again.skip) == (first.shard, 4)
    assert again.lineage == first.task_id
    assert set(visiting_order(first)[4:]) == set(visiting_order(again))
    tm.report_result(3, again.task_id, "", 7.0)
    tm.report_result(2, other.task_id, "", 7.0)
    drain(tm, 3)
    assert tm.finished
    assert tm.epochs[0].trained == 35 and tm.epochs[0].redone == 0


@pytest.mark.parametrize(("reported", "applied"), [(4, 6), (6, 2)])
def test_a_dead_workers_remainder_starts_after_what_the_ps_applied_or_reported(reported, applied):
    """Records the PS applied beyond the last report are in the model: trained once, not
    again; a PS count below the report (its progress came from elsewhere) changes nothing."""
    tm = manager(shuffle=False)
    task = tm.get(1, 0.0)
    tm.report_progress(1, task.task_id, reported, 1.0)
    (remainder,) = tm.recover_worker(1, 2.0, cause="killed", applied={task.task_id: applied})
    reached = max(reported, applied)
    assert (remainder.skip, remainder.num_records) == (reached, 10 - reached)
    assert visiting_order(remainder) == visiting_order(task)[reached:]
    drain(tm, 2)
    assert tm.finished
    assert tm.epochs[0].redone == 0
    assert tm.epochs[0].trained == 35 == tm.epochs[0].planned


def test_a_dead_workers_task_the_ps_applied_whole_is_finished_not_requeued():
    tm = manager(shuffle=False)
    task, other = tm.get(1, 0.0), tm.get(2, 0.0)
    assert tm.recover_worker(1, 2.0, cause="killed", applied={task.task_id: 10}) == []
    tm.report_result(2, other.task_id, "", 3.0)
    assert tm.finished_tasks == 2
    drain(tm, 2)
    assert tm.finished and tm.epochs[0].trained == 35 and tm.records_redone == 0


def test_stale_reports_from_a_dead_worker_are_ignored():
    tm = manager(shuffle=False)
    task = tm.get(1, 0.0)
    tm.recover_worker(1, 1.0, cause="killed")
    assert not tm.report_progress(1, task.task_id, 10, 2.0)
    tm.report_result(1, task.task_id, "", 2.0)
    assert tm.epochs[0].trained == 0
    assert not tm.finished


def test_retry_cap_fails_the_job_with_a_clear_message():
    tm = manager(shuffle=False, max_task_retries=2)
    for attempt in range(3):
        task = tm.get(0, float(attempt))
        assert task.shard.start == 0 and task.shard.file == "a"
        tm.report_result(0, task.task_id, "ValueError: bad record", float(attempt))
    assert tm.failure is not None
    assert "a records [0, 10)" in tm.failure and "bad record" in tm.failure
    assert "--max_task_retries=2" in tm.failure
    assert tm.get(0, 9.0) is None
    assert not tm.finished


def test_remainder_retries_share_the_cap():
    tm = manager(shuffle=False, max_task_retries=1)
    task = tm.get(0, 0.0)
    tm.report_progress(0, task.task_id, 3, 0.0)
    tm.recover_worker(0, 1.0, cause="killed")
    task = tm.get(1, 1.0)
    assert task.skip == 3
    tm.recover_worker(1, 2.0, cause="killed")
    assert tm.failure is not None


# (times seen, task type, first, reported) -> limit; floor 10 s, factor 5, first floor x2,
# 120 s for a first task before any first task reported.
LIMITS = [
    ("nothing seen, training task that reported", {}, TRAINING, False, True, 10.0),
    ("nothing seen, later task not yet reported", {}, TRAINING, False, False, 10.0),
    ("nothing seen, a worker's first task", {}, TRAINING, True, False, 120.0),
    ("fast minibatches: the floor", {"gap": 0.05, "lead": 0.3}, TRAINING, False, True, 10.0),
    ("slow minibatches raise it", {"gap": 4.0}, TRAINING, False, True, 20.0),
    (
        "a slow lead counts only before the first report",
        {"gap": 1.0, "lead": 3.0},
        TRAINING,
        False,
        True,
        10.0,
    ),  # fmt: skip
    ("... and before it", {"gap": 1.0, "lead": 3.0}, TRAINING, False, False, 15.0),
    (
        "slow tracing does not stretch later tasks",
        {"gap": 0.1, "first_lead": 40.0},
        TRAINING,
        False,
        False,
        10.0,
    ),  # fmt: skip
    (
        "a first task once one traced: x5 the slowest",
        {"first_lead": 30.0},
        TRAINING,
        True,
        False,
        150.0,
    ),  # fmt: skip
    (
        "a first task once one traced fast: twice the floor",
        {"first_lead": 2.0},
        TRAINING,
        True,
        False,
        20.0,
    ),  # fmt: skip
    (
        "a first task after its first report: a minibatch",
        {"gap": 0.1, "first_lead": 30.0},
        TRAINING,
        True,
        True,
        10.0,
    ),  # fmt: skip
    ("evaluation before any finished", {"gap": 0.1}, EVALUATION, False, False, 120.0),
    (
        "evaluation after some finished",
        {"durations": {EVALUATION: 30.0}},
        EVALUATION,
        False,
        False,
        150.0,
    ),  # fmt: skip
    (
        "prediction, fast tasks: the floor",
        {"durations": {PREDICTION: 0.5}},
        PREDICTION,
        False,
        False,
        10.0,
    ),  # fmt: skip
    (
        "prediction, a worker's first task: twice the floor",
        {"durations": {PREDICTION: 0.5}},
        PREDICTION,
        True,
        False,
        20.0,
    ),  # fmt: skip
]


@pytest.mark.parametrize(
    ("name", "seen", "task_type", "first", "reported", "limit"), LIMITS, ids=[r[0] for r in LIMITS]
)
def test_no_progress_limit(name, seen, task_type, first, reported, limit):
    config = TimeoutConfig(floor_s=10.0, factor=5.0, first_floor_factor=2.0)
    assert no_progress_limit(config, ProgressTimes(**seen), task_type, first, reported) == limit
    fixed = TimeoutConfig(fixed_s=7.0)
    assert no_progress_limit(fixed, ProgressTimes(**seen), task_type, first, reported) == 7.0


def test_a_hung_worker_is_caught_a_floor_after_its_last_minibatch():
    """Minibatch reports feed the limit: after a slow first task, a hang mid-task is caught
    at the floor, a new worker's first task gets x5 the slowest tracing seen."""
    tm = manager(shuffle=False, timeout_floor_s=10.0, num_epochs=3)
    warmup = tm.get(0, 0.0)
    assert tm.timeout_of(warmup.task_id) == 120.0  # nothing tells how long tracing takes
    assert tm.expired(119.0) == []
    tm.report_progress(0, warmup.task_id, 4, 12.0)  # 12 s of tracing, then minibatches
    tm.report_progress(0, warmup.task_id, 8, 12.5)
    tm.report_result(0, warmup.task_id, "", 13.0)
    assert tm.progress_times == ProgressTimes(gap=0.5, first_lead=12.0)
    hung = tm.get(0, 13.0)
    tm.report_progress(0, hung.task_id, 4, 13.3)
    fresh = tm.get(1, 13.3)  # a new worker's first task
    assert tm.timeout_of(hung.task_id) == 10.0 and tm.timeout_of(fresh.task_id) == 60.0
    assert tm.expired(23.2) == []
    assert [(w, t.task_id) for w, t in tm.expired(23.4)] == [(0, hung.task_id)]
    tm.report_progress(1, fresh.task_id, 2, 50.0)  # traced in 36.7 s: within its 60 s
    assert tm.timeout_of(fresh.task_id) == 10.0
    assert sorted(w for w, _ in tm.expired(60.1)) == [0, 1]


def test_slow_minibatches_raise_the_limit_and_a_ps_outage_restarts_the_clocks():
    tm = manager(shuffle=False, timeout_floor_s=10.0)
    task = tm.get(0, 0.0)
    tm.report_progress(0, task.task_id, 2, 1.0)
    tm.report_progress(0, task.task_id, 4, 5.0)  # a 4 s minibatch
    assert tm.timeout_of(task.task_id) == 20.0
    assert tm.expired(24.9) == []
    tm.restart_clocks(24.0)  # a parameter server was down until now
    assert tm.expired(43.9) == [] and len(tm.expired(44.1)) == 1


def test_a_fixed_task_timeout_overrides_the_derived_one():
    tm = manager(shuffle=False, task_timeout_s=3.0)
    task = tm.get(0, 0.0)
    assert tm.timeout_of(task.task_id) == 3.0
    assert tm.expired(2.9) == [] and len(tm.expired(3.1)) == 1


def test_evaluation_tasks_time_out_after_their_slowest_finished_peer():
    tm = manager(shuffle=False, timeout_floor_s=10.0)
    tm.add_tasks(plan_shards([("v", 20)], 10), TaskType.EVALUATION, model_version=3)
    first = tm.get(0, 0.0)
    assert first.type == TaskType.EVALUATION and tm.timeout_of(first.task_id) == 120.0
    tm.report_result(0, first.task_id, "", 8.0)
    second = tm.get(0, 8.0)
    assert tm.timeout_of(second.task_id) == 40.0
    assert tm.progress_times.gap is None  # evaluation reports are not minibatch gaps


def test_success_with_missing_records_is_requeued_not_dropped():
    tm = manager(shuffle=False)
    task = tm.get(0, 0.0)
    tm.report_result(0, task.task_id, "", 1.0, records_done=7)
    again = tm.get(0, 1.0)
    assert (again.shard, again.skip) == (task.shard, 7)


def test_empty_data_is_an_error():
    with pytest.raises(ValueError, match="no records"):
        TaskManager([], TaskManagerConfig(records_per_task=4))
