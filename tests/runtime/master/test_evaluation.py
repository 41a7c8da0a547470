import numpy as np

from elasticdl.runtime.data.shards import Shard
from elasticdl.runtime.master.evaluation import EvaluationRounds
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig, TaskType


def state(total: float, count: float) -> dict:
    return {"fn/acc": np.array([total, count])}


def test_rounds_complete_in_start_order_and_retries_count_once():
    rounds = EvaluationRounds()
    rounds.start(10, [1, 2], 0.0)
    rounds.start(20, [3], 0.0)
    rounds.report(3, state(1, 2))
    assert rounds.pop_complete() == [], "round 20 waits for round 10"
    rounds.report(1, state(3, 4))
    rounds.report(1, state(3, 4))  # a retried task reporting again overwrites
    rounds.report(2, state(1, 4))
    done = rounds.pop_complete()
    assert [r.version for r, _ in done] == [10, 20]
    np.testing.assert_array_equal(done[0][1]["fn/acc"], [4, 8])
    assert rounds.pending == 0


def test_evaluation_tasks_go_first_and_stay_out_of_epoch_accounting():
    tm = TaskManager([Shard("train", 0, 10)], TaskManagerConfig(records_per_task=10))
    lineages = tm.add_tasks([Shard("valid", 0, 4), Shard("valid", 4, 8)], TaskType.EVALUATION, 7)
    first = tm.get(0, 0.0)
    assert first.type == TaskType.EVALUATION and first.model_version == 7
    assert tm.lineage_of(0, first.task_id) == lineages[0]
    tm.report_result(0, first.task_id, "", 1.0)
    second = tm.get(0, 1.0)
    tm.recover_worker(0, 2.0, cause="killed")
    again = tm.get(1, 2.0)
    assert again.type == TaskType.EVALUATION and again.lineage == second.lineage
    tm.report_result(1, again.task_id, "", 3.0)
    train = tm.get(1, 3.0)
    assert train.type == TaskType.TRAINING
    assert not tm.training_finished
    tm.report_result(1, train.task_id, "", 4.0)
    assert tm.training_finished and tm.finished
    assert tm.epochs[0].trained == 10 and tm.records_redone == 0
