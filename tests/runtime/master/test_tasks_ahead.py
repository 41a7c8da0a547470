"""A training task held ahead of the one a worker trains (task_manager.py's module docstring)."""

from elasticdl.runtime.data.shards import Shard, plan_shards
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig, TaskType

FILES = [("a", 30), ("b", 30)]  # six tasks of 10 records


def manager(**overrides) -> TaskManager:
    config = TaskManagerConfig(records_per_task=10, shuffle=False, **overrides)
    return TaskManager(plan_shards(FILES, 10), config)


def test_a_task_is_held_ahead_only_beside_one_training_task_in_progress():
    tm = manager()
    assert tm.get_ahead(1, 0.0) is None  # nothing in progress: ask for a task, not ahead
    current = tm.get(1, 0.0)
    ahead = tm.get_ahead(1, 0.0)
    assert ahead is not None and ahead.type == TaskType.TRAINING
    assert ahead.task_id != current.task_id
    assert tm.get_ahead(1, 0.0) is None  # one ahead at most
    assert {t.task_id for t in tm.doing(1)} == {current.task_id, ahead.task_id}


def test_the_task_held_ahead_is_the_next_one_and_its_clock_starts_when_confirmed():
    tm = manager(task_timeout_s=5.0)
    current = tm.get(1, 0.0)
    ahead = tm.get_ahead(1, 0.0)
    assert tm.expired(4.0) == []
    tm.report_progress(1, current.task_id, 5, 4.0)
    assert tm.expired(8.0) == []  # the task held ahead waits without a clock
    tm.report_result(1, current.task_id, "", 8.0)
    assert tm.get(1, 8.0, held_ahead=ahead.task_id) is ahead
    assert tm.expired(12.0) == []
    assert [t.task_id for _, t in tm.expired(13.5)] == [ahead.task_id]


def test_a_worker_always_holding_a_task_ahead_trains_every_record_once():
    tm = manager(num_epochs=2)
    seen: list[tuple[int, Shard]] = []
    task = tm.get(1, 0.0)
    while task is not None:
        ahead = tm.get_ahead(1, 0.0)
        seen.append((task.epoch, task.shard))
        tm.report_result(1, task.task_id, "", 0.0)
        task = tm.get(1, 0.0, held_ahead=ahead.task_id if ahead else 0)
        if ahead is not None:
            assert task is ahead
    assert tm.finished
    assert sorted(seen) == sorted((e, s) for e in range(2) for s in plan_shards(FILES, 10))
    assert [e.trained for e in tm.epochs] == [60, 60] and tm.records_redone == 0


def test_a_dead_worker_gives_its_task_held_ahead_back_untouched():
    tm = manager()
    current = tm.get(1, 0.0)
    ahead = tm.get_ahead(1, 0.0)
    tm.report_progress(1, current.task_id, 4, 1.0)
    requeued = tm.recover_worker(1, 2.0, cause="worker 1 killed")
    assert [(t.shard, t.skip) for t in requeued] == [(current.shard, 4)]
    assert [e.kind for e in tm.events] == ["task_requeued"]  # one, for the remainder
    assert tm.get(2, 3.0).shard == current.shard  # the remainder first
    again = tm.get(2, 3.0)
    assert again is ahead and again.skip == 0  # then the task held ahead, as it was


def test_a_task_held_ahead_counts_no_failure_when_its_worker_dies():
    tm = manager(max_task_retries=0)
    current = tm.get(1, 0.0)
    tm.get_ahead(1, 0.0)
    tm.report_progress(1, current.task_id, 10, 1.0)  # its last minibatch was reported
    assert tm.recover_worker(1, 2.0, cause="worker 1 killed") == []
    assert tm.failure is None


def test_queued_evaluations_go_before_the_task_held_ahead():
    tm = manager()
    current = tm.get(1, 0.0)
    ahead = tm.get_ahead(1, 0.0)
    [lineage] = tm.add_tasks([Shard("a", 0, 10)], TaskType.EVALUATION, model_version=3)
    tm.report_result(1, current.task_id, "", 1.0)
    evaluation = tm.get(1, 1.0, held_ahead=ahead.task_id)
    assert evaluation.type == TaskType.EVALUATION and evaluation.lineage == lineage
    assert tm.get_ahead(1, 1.0) is None  # an evaluation is no task to hold ahead beside
    tm.report_result(1, evaluation.task_id, "", 2.0)
    assert tm.get(1, 2.0) is ahead  # back at the head of the training tasks


def test_stopping_training_drops_the_task_held_ahead():
    tm = manager()
    current = tm.get(1, 0.0)
    ahead = tm.get_ahead(1, 0.0)
    tm.stop_training("MaxStepsStopping", 1.0)
    assert tm.get_ahead(1, 1.0) is None
    tm.report_result(1, current.task_id, "", 2.0)
    assert tm.get(1, 2.0, held_ahead=ahead.task_id) is None
    assert tm.training_finished and tm.finished


def test_no_task_is_held_ahead_when_another_worker_would_go_without():
    tm = manager()  # six tasks
    holding = [tm.get(w, 0.0) for w in (1, 2, 3, 4)]  # two left, four workers hold one
    assert all(holding)
    assert tm.get_ahead(1, 0.0) is None
    tm.report_result(4, holding[3].task_id, "", 1.0)
    tm.report_result(3, holding[2].task_id, "", 1.0)  # two left, two holders
    assert tm.get_ahead(1, 1.0) is not None
    assert tm.get_ahead(2, 1.0) is None  # one left, two holders


def test_a_task_held_ahead_is_confirmed_only_for_its_holder():
    tm = manager()
    tm.get(1, 0.0)
    mine = tm.get(2, 0.0)
    ahead = tm.get_ahead(1, 0.0)
    tm.report_result(2, mine.task_id, "", 1.0)
    other = tm.get(2, 1.0, held_ahead=ahead.task_id)  # not worker 2's to start
    assert other is not None and other.task_id != ahead.task_id


def test_a_task_held_ahead_that_the_worker_does_not_name_goes_back():
    """The answer to the worker's ahead request was lost (a deadline): it asks plainly."""
    tm = manager()
    current = tm.get(1, 0.0)
    ahead = tm.get_ahead(1, 0.0)
    tm.report_result(1, current.task_id, "", 1.0)
    assert tm.get(1, 1.0) is ahead  # back at the head of the queue, handed out plainly
    assert len(tm.doing(1)) == 1
