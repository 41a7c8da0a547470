"""How often workers may call the master (runtime/master/call_budget.py): the rule as a table,
and a real servicer on loopback gRPC naming it in what it hands out."""

from __future__ import annotations

import grpc
import pytest

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime.data.shards import plan_shards
from elasticdl.runtime.master.call_budget import CallBudget, CallMeter, Pace, pace
from elasticdl.runtime.master.servicer import MasterServicer, serve_master
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig

BUDGET = CallBudget(calls_per_s=600, progress_share=0.25)


@pytest.mark.parametrize(
    ("workers", "other_calls", "progress_s", "wait_s"),
    [
        (0, 0, 0.1, 0.2),  # nothing known yet: the worker's own defaults
        (4, 30, 0.1, 0.2),  # a small job is never slowed down
        (30, 0, 0.1, 0.2),  # up to 30 workers keep both defaults
        (60, 0, 0.1, 0.4),  # up to 60 report every 0.1 s; waits share a quarter: 60 / 150
        (300, 0, 0.5, 2.0),  # the budget shared: 300 / 600
        (300, 300, 1.0, 2.0),  # half the budget taken by task calls: reports get the rest
        (1000, 500, 6.667, 6.667),  # task calls beyond the budget: reports get a quarter
        (1000, 5000, 6.667, 6.667),
        (5000, 2500, 30.0, 10.0),  # at the ceilings
        (20000, 0, 30.0, 10.0),
    ],
)
def test_the_pace_shares_the_budget(workers, other_calls, progress_s, wait_s) -> None:
    assert pace(BUDGET, workers, other_calls) == Pace(progress_s, wait_s)


def test_the_total_stays_within_the_budget_while_task_calls_leave_room() -> None:
    for workers in (100, 500, 900):
        other = workers * 3 / 6.0  # three calls per 6-s task
        found = pace(BUDGET, workers, other)
        assert other + workers / found.progress_every_s <= BUDGET.calls_per_s + 1e-6


def test_the_meter_gives_a_smoothed_rate_once_a_window_passed() -> None:
    meter = CallMeter(window_s=1.0, smoothing=0.5)
    assert meter.rate_at(0.0) is None  # starts the first window
    for _ in range(100):
        meter.count()
    assert meter.rate_at(0.5) is None
    assert meter.rate_at(1.0) == pytest.approx(100.0)  # the first window as it was
    for _ in range(200):
        meter.count()
    assert meter.rate_at(2.0) == pytest.approx(150.0)  # then half-way to each new one
    assert meter.rate_at(3.0) == pytest.approx(75.0)  # a quiet second


def test_tasks_and_waits_name_the_pace_and_timeouts_allow_for_it() -> None:
    """A servicer of 30 workers on a budget of 10 calls a second, all taken by other calls:
    its tasks ask for a report every 30 / (10 / 4) = 12 s at most, its WAITs (the whole budget
    theirs here) to ask again after 30 / 10 = 3 s, and the no-progress limit of a task that
    reported is 5 x 12 s."""
    tasks = TaskManager(plan_shards([("f", 30)], 10), TaskManagerConfig(records_per_task=10))
    servicer = MasterServicer(tasks, hold_workers=True)
    servicer.budget = CallBudget(calls_per_s=10, progress_share=0.25, wait_share=1.0)
    server, port = serve_master(servicer, "127.0.0.1", 0)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = elasticdl_pb2_grpc.MasterStub(channel)
            first = stub.get_task(pb.GetTaskRequest(worker_id=0), timeout=10)
            assert first.type == pb.TRAINING
            assert (first.progress_every_s, first.wait_s) == pytest.approx((0.1, 0.2))
            with servicer.lock:
                assert servicer.pace(30, 0.0) == Pace()  # the meter's first window starts
            for _ in range(10):  # 10 calls that are no progress reports in that second
                unknown = pb.ReportTaskResultRequest(worker_id=7, task_id=999)
                stub.report_task_result(unknown, timeout=10)
            with servicer.lock:
                assert servicer.pace(30, 1.0) == Pace(progress_every_s=12.0, wait_s=3.0)
            second = stub.get_task(pb.GetTaskRequest(worker_id=1), timeout=10)
            assert second.progress_every_s == pytest.approx(12.0)
            report = pb.ReportProgressRequest(worker_id=1, task_id=second.task_id, records_done=1)
            stub.report_progress(report, timeout=10)
            with servicer.lock:
                assert tasks.timeout_of(second.task_id) == pytest.approx(5 * 12.0)
            stub.get_task(pb.GetTaskRequest(worker_id=2), timeout=10)
            wait = stub.get_task(pb.GetTaskRequest(worker_id=3), timeout=10)
            assert (wait.type, wait.wait_s) == (pb.WAIT, pytest.approx(3.0))
    finally:
        server.stop(None)
