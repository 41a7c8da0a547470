"""A worker's progress reports (runtime/worker/progress.py) to a real master servicer on
loopback gRPC: at most one every `every_s` within a task, a task's first minibatch and its end
always, a report's loss the mean of the finite losses it covers."""

from __future__ import annotations

import math

import grpc
import pytest

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime.data.shards import plan_shards
from elasticdl.runtime.master.servicer import MasterServicer, serve_master
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig
from elasticdl.runtime.worker.progress import ProgressReports


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def master():
    tasks = TaskManager(plan_shards([("f", 100)], 50), TaskManagerConfig(records_per_task=50))
    servicer = MasterServicer(tasks)
    server, port = serve_master(servicer, "127.0.0.1", 0)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = elasticdl_pb2_grpc.MasterStub(channel)
    task = stub.get_task(pb.GetTaskRequest(worker_id=0), timeout=10)
    yield servicer, stub, task
    channel.close()
    server.stop(None)


def losses(servicer: MasterServicer) -> list[float]:
    return [round(p.loss, 6) for p in servicer.stats.losses]


def test_reports_come_at_most_every_period_with_the_mean_loss(master):
    servicer, stub, task = master
    clock = Clock()
    reports = ProgressReports(stub, 0, every_s=0.1, clock=clock)
    reports.minibatch(task.task_id, 0, 4.0, 1, first=True)  # always: the task's first
    for done, loss in [(10, 3.0), (20, math.nan), (30, 2.0)]:
        clock.now += 0.03
        reports.minibatch(task.task_id, done, loss, 2, first=False)
    reports.flush()
    assert losses(servicer) == [4.0]
    clock.now += 0.02  # 0.11 s since the last report
    reports.minibatch(task.task_id, 40, 1.0, 3, first=False)
    reports.flush()
    assert losses(servicer) == [4.0, 2.0]  # the mean of 3.0, 2.0 and 1.0; NaN left out
    assert servicer.tasks.doing(0)[0].task_id == task.task_id
    assert servicer.stats.model_version == 3


def test_a_tasks_tail_goes_with_its_result_and_a_leaving_worker_reports_at_once(master):
    """What a task's last report left out rides with its result (one call less a task); a
    worker leaving on SIGTERM, which sends no result, reports it at once."""
    servicer, stub, task = master
    clock = Clock()
    reports = ProgressReports(stub, 0, every_s=0.1, clock=clock)
    reports.minibatch(task.task_id, 0, 1.0, 1, first=True)
    reports.minibatch(task.task_id, 10, 0.5, 2, first=False)
    reports.minibatch(task.task_id, 20, 0.3, 2, first=False)
    reports.flush()
    assert losses(servicer) == [1.0]
    tail = reports.tail(version=2)
    assert tail == {"loss": pytest.approx(0.4), "model_version": 2}
    assert reports.tail(version=2) == {"model_version": 2}  # nothing left out now
    answer = stub.finish_task(
        pb.ReportTaskResultRequest(
            worker_id=0, task_id=task.task_id, exec_counters={"records_done": 50}, **tail
        ),
        timeout=10,
    )
    assert losses(servicer) == [1.0, 0.4] and servicer.tasks.records_trained == 50
    reports.minibatch(answer.task_id, 0, 2.0, 3, first=True)
    reports.minibatch(answer.task_id, 10, 1.0, 3, first=False)
    reports.task_end(answer.task_id, 30, 3)  # a worker leaving on SIGTERM
    reports.flush()
    assert losses(servicer) == [1.0, 0.4, 2.0, 1.0]
    stub.report_task_result(
        pb.ReportTaskResultRequest(worker_id=0, task_id=answer.task_id, err_message="stop"),
        timeout=10,
    )
    assert servicer.tasks.records_trained == 50 + 30


def test_the_interval_the_master_names_paces_the_reports(master):
    """`pace(seconds)`: what a task's `progress_every_s` says (0: the worker's default)."""
    servicer, stub, task = master
    clock = Clock()
    reports = ProgressReports(stub, 0, every_s=0.1, clock=clock)
    reports.pace(2.0)
    reports.minibatch(task.task_id, 0, 1.0, 1, first=True)
    for done in range(1, 20):
        clock.now = done / 10
        reports.minibatch(task.task_id, done, 1.0, 1, first=False)
    reports.flush()
    assert len(servicer.stats.losses) == 1  # 1.9 s after the first: none yet
    clock.now = 2.0
    reports.minibatch(task.task_id, 20, 1.0, 1, first=False)
    reports.pace(0.0)  # back to the default
    clock.now = 2.25
    reports.minibatch(task.task_id, 21, 1.0, 1, first=False)
    reports.flush()
    assert len(servicer.stats.losses) == 3
