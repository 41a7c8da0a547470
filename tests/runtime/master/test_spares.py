"""Warm spare workers: the rule for starting them, what the servicer answers them, and how
the report shows a promotion (runtime/master/spares.py)."""

from __future__ import annotations

import pytest

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.runtime.data.shards import plan_shards
from elasticdl.runtime.master.events import (
    EventLog,
    InstanceLost,
    SpareLaunched,
    SparePromoted,
    WorkerLaunched,
    WorkerTraining,
)
from elasticdl.runtime.master.report import failures_section, workers_section
from elasticdl.runtime.master.servicer import MasterServicer
from elasticdl.runtime.master.spares import MAX_SPARE_LOSSES, spares_to_start
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig
from elasticdl.runtime.master.task_state import TaskState


@pytest.mark.parametrize(
    ("wanted", "standing", "tasks_finished", "finishing", "losses", "start"),
    [
        (0, 0, 5, False, 0, 0),  # no spares asked for
        (1, 0, 0, False, 0, 0),  # training not under way: the job's workers start first
        (1, 0, 1, False, 0, 1),
        (2, 1, 7, False, 0, 1),  # one was promoted: start one in its place
        (1, 1, 7, False, 0, 0),
        (1, 0, 7, True, 0, 0),  # the job is finishing
        (1, 0, 7, False, MAX_SPARE_LOSSES - 1, 1),
        (1, 0, 7, False, MAX_SPARE_LOSSES, 0),  # spares keep dying: go on without
    ],
)
def test_when_spares_start(wanted, standing, tasks_finished, finishing, losses, start):
    assert spares_to_start(wanted, standing, tasks_finished, finishing, losses) == start


def _servicer() -> tuple[MasterServicer, TaskState]:
    tasks = TaskManager(plan_shards([("f", 40)], 10), TaskManagerConfig(records_per_task=10))
    servicer = MasterServicer(tasks)
    return servicer, TaskState(servicer)


def test_a_spare_gets_warm_up_records_and_no_task_until_promoted():
    servicer, state = _servicer()
    servicer.offer_warm_up("f", 0, 4)
    state.set_standby({1})
    answer = servicer._next_task(1)
    assert (answer.task_id, answer.type) == (0, pb.WAIT)
    assert (answer.shard_name, answer.start, answer.end) == ("f", 0, 4)
    assert servicer.tasks.doing(1) == []
    assert servicer._next_task(0).task_id > 0  # the job's worker trains meanwhile
    state.set_standby(set())
    promoted = servicer._next_task(1)
    assert promoted.task_id > 0 and promoted.type == pb.TRAINING


def test_a_spare_leaves_when_the_job_has_no_more_work():
    servicer, state = _servicer()
    state.set_standby({1})
    while (task := servicer._next_task(0)).task_id:
        servicer.tasks.report_result(0, task.task_id, "", 0.0)
    answer = servicer._next_task(1)
    assert (answer.task_id, answer.type) == (0, pb.TASK_TYPE_UNSPECIFIED)


def test_the_report_shows_a_promoted_spare_and_how_soon_it_trained():
    log, t0 = EventLog(), 100.0
    log.add(WorkerLaunched(t0, worker_id=0))
    log.add(SpareLaunched(t0 + 3.0, worker_id=1))
    log.add(
        InstanceLost(
            t0 + 9.0,
            role="worker",
            id=0,
            exit_kind="killed",
            cause="killed by SIGKILL",
            action="relaunch_budget",
            detected_at=t0 + 9.0,
            failure=True,
            relaunched_as=1,
        )
    )
    log.add(SparePromoted(t0 + 9.1, worker_id=1, replaces=0, seconds=0.1))
    log.add(WorkerTraining(t0 + 9.6, worker_id=1))
    log.add(SpareLaunched(t0 + 9.2, worker_id=2))
    workers = workers_section(log, t0, initial=1, min_workers=1, target=1)
    spare, unused = workers["instances"][1:]
    assert (spare["replaces"], spare["spare"]) == (0, {"promoted_at": 9.1})
    assert (unused["replaces"], unused["spare"]) == (None, {"promoted_at": None})
    assert "spare" not in workers["instances"][0]
    assert (workers["launched"], workers["relaunched"]) == (3, 1)
    (failure,) = failures_section(log, t0)
    assert (failure["relaunched_as"], failure["training_again_s"]) == (1, 0.6)
