"""A worker's next training task held ahead (runtime/worker/task_ahead.py) against a real master
servicer on loopback gRPC: asked once per task, prepared on a background thread, trained next
when `finish_task` names it, dropped when the master answers otherwise."""

from __future__ import annotations

import threading

import grpc
import pytest

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime.data.shards import Shard, plan_shards
from elasticdl.runtime.master.servicer import MasterServicer, serve_master
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig, TaskType
from elasticdl.runtime.worker.task_ahead import TaskAhead


@pytest.fixture
def master():
    tasks = TaskManager(
        plan_shards([("f", 60)], 10), TaskManagerConfig(records_per_task=10, shuffle=False)
    )
    servicer = MasterServicer(tasks)
    server, port = serve_master(servicer, "127.0.0.1", 0)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield servicer, elasticdl_pb2_grpc.MasterStub(channel)
    channel.close()
    server.stop(None)


def prepared_by(thread_names: list[str]):
    def prepare(task: pb.Task) -> list[bytes]:
        thread_names.append(threading.current_thread().name)
        return [f"{task.shard_name}:{i}".encode() for i in range(task.start, task.end)]

    return prepare


def finish(stub, task: pb.Task, ahead: TaskAhead) -> pb.Task:
    result = pb.ReportTaskResultRequest(
        worker_id=0,
        task_id=task.task_id,
        exec_counters={"records_done": task.end - task.start},
        ahead_task_id=ahead.held_id(),
    )
    return stub.finish_task(result, timeout=10)


def test_the_task_held_ahead_is_trained_next_with_its_prepared_records(master):
    servicer, stub = master
    dispatched: list[int] = []
    servicer.dispatch_hook = lambda worker, done: dispatched.append(sum(done.values()))
    threads: list[str] = []
    ahead = TaskAhead(stub, 0, prepared_by(threads))
    task = stub.get_task(pb.GetTaskRequest(worker_id=0), timeout=10)
    trained = []
    while task.task_id:
        records = ahead.take(task)
        if trained:  # every task but the first was held ahead and prepared
            assert records == [f"f:{i}".encode() for i in range(task.start, task.end)]
        ahead.ask(task.task_id)
        ahead.ask(task.task_id)  # once per task
        trained.append((task.start, task.end))
        task = finish(stub, task, ahead)
    assert trained == [(s.start, s.end) for s in plan_shards([("f", 60)], 10)]
    assert servicer.tasks.finished and servicer.tasks.records_trained == 60
    # Once per task, as it starts (chaos lands there: the task is still to be trained), with
    # the task reported in the same call counted; not when a task is handed ahead.
    assert dispatched == [0, 1, 2, 3, 4, 5]
    assert threads and all(name.startswith("task-ahead") for name in threads)


def test_a_task_held_ahead_is_dropped_when_an_evaluation_goes_first(master):
    servicer, stub = master
    ahead = TaskAhead(stub, 0, prepared_by([]))
    task = stub.get_task(pb.GetTaskRequest(worker_id=0), timeout=10)
    ahead.ask(task.task_id)
    held = ahead.held_id()
    assert held
    with servicer.lock:
        servicer.tasks.add_tasks([Shard("f", 0, 10)], TaskType.EVALUATION, model_version=1)
    answer = finish(stub, task, ahead)
    assert answer.type == pb.EVALUATION
    assert ahead.take(answer) is None and ahead.held_id() == 0
    assert [t.task_id for t in servicer.tasks.doing(0)] == [answer.task_id]
    servicer.tasks.report_result(0, answer.task_id, "", 1.0)
    assert stub.get_task(pb.GetTaskRequest(worker_id=0), timeout=10).task_id == held


def test_no_task_is_held_ahead_by_a_spare_or_when_preparing_fails(master, caplog):
    servicer, stub = master
    servicer.standby = {1}
    spare = TaskAhead(stub, 1, prepared_by([]))
    spare.ask(1)
    assert spare.held_id() == 0

    def broken(task: pb.Task) -> list[bytes]:
        raise OSError("the shard is gone")

    ahead = TaskAhead(stub, 0, broken)
    task = stub.get_task(pb.GetTaskRequest(worker_id=0), timeout=10)
    ahead.ask(task.task_id)
    answer = finish(stub, task, ahead)
    assert answer.task_id and ahead.take(answer) is None  # read again on the training thread
    assert "preparing task" in caplog.text
