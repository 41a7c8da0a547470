import pytest

from elasticdl.runtime.data.shards import plan_shards
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig

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


def test_records_applied_by_the_ps_beyond_progress_count_as_redone():
    tm = manager(shuffle=False)
    task = tm.get(1, 0.0)
    tm.report_progress(1, task.task_id, 4, 1.0)
    tm.recover_worker(1, 2.0, cause="killed", applied={task.task_id: 6})
    drain(tm, 2)
    assert tm.epochs[0].redone == 2
    assert tm.epochs[0].trained == 37 == tm.epochs[0].planned + 2


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


def test_timeout_has_a_floor_and_follows_observed_durations():
    tm = manager(shuffle=False, timeout_floor_s=10.0, timeout_factor=3.0)
    assert tm.task_timeout() == 10.0
    assert tm.task_timeout(first=True) == 20.0  # a worker's first task also traces
    task = tm.get(0, 0.0)
    tm.report_result(0, task.task_id, "", 8.0)
    assert tm.task_timeout(first=True) == 24.0
    slow = tm.get(1, 10.0)  # worker 1's first task
    tm.report_progress(1, slow.task_id, 2, 20.0)
    assert tm.expired(40.0) == []
    assert [(w, t.task_id) for w, t in tm.expired(45.0)] == [(1, slow.task_id)]


def test_a_slow_first_task_does_not_stretch_the_timeout_of_later_tasks():
    # A worker's first task includes tracing its dataset_fn and step: it is compared with
    # every task, a later task only with later tasks, so a hang is caught near the floor.
    tm = manager(shuffle=False, timeout_floor_s=3.0, timeout_factor=5.0, num_epochs=3)
    warmup = tm.get(0, 0.0)
    assert tm.timeout_of(warmup.task_id) == 6.0  # twice the floor before anything finished
    tm.report_result(0, warmup.task_id, "", 2.0)  # 2 s of tracing
    assert tm.task_timeout(first=True) == 10.0
    assert tm.task_timeout() == 3.0
    steady = tm.get(0, 2.0)
    tm.report_result(0, steady.task_id, "", 2.2)
    assert tm.task_timeout() == 3.0
    hung = tm.get(0, 2.2)
    fresh = tm.get(1, 2.2)  # a new worker's first task: it may trace for 10 s
    assert tm.timeout_of(hung.task_id) == 3.0 and tm.timeout_of(fresh.task_id) == 10.0
    assert tm.expired(5.0) == []
    assert [(w, t.task_id) for w, t in tm.expired(5.3)] == [(0, hung.task_id)]
    tm.report_progress(1, fresh.task_id, 1, 9.0)
    assert [w for w, _ in tm.expired(12.3)] == [0]
    assert sorted(w for w, _ in tm.expired(19.1)) == [0, 1]
    # A later task that was slow raises the later tasks' timeout (and the first tasks').
    tm.report_result(0, hung.task_id, "", 20.2)
    assert tm.task_timeout() == 90.0 and tm.task_timeout(first=True) == 90.0


def test_success_with_missing_records_is_requeued_not_dropped():
    tm = manager(shuffle=False)
    task = tm.get(0, 0.0)
    tm.report_result(0, task.task_id, "", 1.0, records_done=7)
    again = tm.get(0, 1.0)
    assert (again.shard, again.skip) == (task.shard, 7)


def test_empty_data_is_an_error():
    with pytest.raises(ValueError, match="no records"):
        TaskManager([], TaskManagerConfig(records_per_task=4))
