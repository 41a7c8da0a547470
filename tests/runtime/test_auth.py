"""runtime/auth.py on real gRPC over 127.0.0.1: the secret check, live workers, TLS."""

from __future__ import annotations

import stat
import time

import grpc
import pytest
from tls_certs import self_signed

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime import auth
from elasticdl.runtime.data.shards import Shard
from elasticdl.runtime.master.servicer import MasterServicer, serve_master
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig

HOST = "127.0.0.1"


def _servicer() -> MasterServicer:
    shards = [Shard("f", 0, 10), Shard("f", 10, 20)]
    tasks = TaskManager(shards, TaskManagerConfig(records_per_task=10), now=time.monotonic())
    return MasterServicer(tasks)


@pytest.fixture
def master():
    credentials = auth.new_auth()
    servicer = _servicer()
    server, port = serve_master(servicer, HOST, 0, credentials)
    yield servicer, f"{HOST}:{port}", credentials
    server.stop(None)


def _code(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as failed:
        call()
    return failed.value.code()


def test_calls_without_the_secret_or_with_another_are_unauthenticated(master):
    servicer, address, credentials = master
    for client_auth in (None, auth.new_auth(), auth.JobAuth(credentials.secret[:-1])):
        with auth.channel(address, client_auth) as channel:
            stub = elasticdl_pb2_grpc.MasterStub(channel)
            ask = pb.GetTaskRequest(worker_id=0)
            assert _code(lambda stub=stub, ask=ask: stub.get_task(ask, timeout=5)) == (
                grpc.StatusCode.UNAUTHENTICATED
            )
            scale = pb.ScaleWorkersRequest(num_workers=3)
            assert _code(lambda stub=stub, s=scale: stub.scale_workers(s, timeout=5)) == (
                grpc.StatusCode.UNAUTHENTICATED
            )
    with auth.channel(address, credentials) as channel:
        task = elasticdl_pb2_grpc.MasterStub(channel).get_task(pb.GetTaskRequest(worker_id=0))
    assert task.task_id > 0 and task.shard_name == "f"
    assert servicer.tasks.doing(0), "only the authenticated call took a task"


def test_only_live_worker_ids_get_tasks_and_odd_calls_do_no_harm(master):
    servicer, address, credentials = master
    live = {3}
    servicer.admit_workers(live.__contains__)
    with auth.channel(address, credentials) as channel:
        stub = elasticdl_pb2_grpc.MasterStub(channel)
        for call in (
            lambda: stub.get_task(pb.GetTaskRequest(worker_id=77), timeout=5),
            lambda: stub.report_progress(pb.ReportProgressRequest(worker_id=77, task_id=1)),
            lambda: stub.report_task_result(pb.ReportTaskResultRequest(worker_id=77, task_id=1)),
            lambda: stub.finish_task(pb.ReportTaskResultRequest(worker_id=77, task_id=1)),
            lambda: stub.report_version(pb.ReportVersionRequest(worker_id=-1, model_version=9)),
        ):
            assert _code(call) == grpc.StatusCode.PERMISSION_DENIED
        # a live worker: a result for a task it never had, garbage metric states
        stub.report_task_result(pb.ReportTaskResultRequest(worker_id=3, task_id=12345))
        bad = pb.ReportEvaluationMetricsRequest(worker_id=3, task_id=1)
        bad.metric_states.add(name="x", dtype=pb.DT_FLOAT32, dims=[7], content=b"\x01")
        assert _code(lambda: stub.report_evaluation_metrics(bad)) == (
            grpc.StatusCode.INVALID_ARGUMENT
        )
        task = stub.get_task(pb.GetTaskRequest(worker_id=3))
        live.discard(3)  # the worker died
        done = pb.ReportTaskResultRequest(worker_id=3, task_id=task.task_id)
        assert _code(lambda: stub.report_task_result(done)) == grpc.StatusCode.PERMISSION_DENIED
        assert _code(lambda: stub.finish_task(done)) == grpc.StatusCode.PERMISSION_DENIED
    assert servicer.tasks.finished_tasks == 0 and servicer.stats.model_version == 0
    assert dict(servicer.stats.tasks_done) == {}


def test_the_secret_file_is_private_and_the_secret_stays_out_of_repr(tmp_path):
    credentials = auth.new_auth()
    path = auth.write_secret(tmp_path, credentials)
    assert path.name == "job.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert auth.read_secret(path) == credentials
    assert credentials.secret not in repr(credentials)
    assert len(credentials.secret) >= 40 and auth.new_auth().secret != credentials.secret
    with pytest.raises(auth.AuthError, match=r"cannot read the job's secret .*missing"):
        auth.read_secret(tmp_path / "missing")
    (tmp_path / "empty").write_text("")
    with pytest.raises(auth.AuthError, match="is empty"):
        auth.read_secret(tmp_path / "empty")
    assert auth.for_process(tmp_path / "job.json", "") is None
    assert auth.for_process(tmp_path / "job.json", "job.secret") == credentials


def test_tls_channels_carry_the_secret_and_plain_clients_are_shut_out(tmp_path):
    self_signed(tmp_path / "tls")
    tls = auth.load_tls(tmp_path / "tls")
    assert tls.ca == tls.cert and tls.server_name == "elasticdl"
    credentials = auth.new_auth(tls)
    server, port = serve_master(_servicer(), HOST, 0, credentials)
    address = f"{HOST}:{port}"
    try:
        with auth.channel(address, credentials) as channel:
            task = elasticdl_pb2_grpc.MasterStub(channel).get_task(
                pb.GetTaskRequest(worker_id=0), timeout=10
            )
        assert task.task_id > 0
        # TLS but not the secret; the secret without TLS; another CA
        self_signed(tmp_path / "other")
        others = [
            auth.new_auth(tls),
            auth.JobAuth(credentials.secret),
            auth.JobAuth(credentials.secret, auth.load_tls(tmp_path / "other")),
        ]
        for other, code in zip(
            others,
            [
                grpc.StatusCode.UNAUTHENTICATED,
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.UNAVAILABLE,
            ],
            strict=True,
        ):
            with auth.channel(address, other) as channel:
                stub = elasticdl_pb2_grpc.MasterStub(channel)
                ask = pb.GetTaskRequest(worker_id=1)
                assert _code(lambda s=stub, a=ask: s.get_task(a, timeout=5)) == code
    finally:
        server.stop(None)
    with pytest.raises(auth.AuthError, match=r"tls\.crt and tls\.key"):
        auth.load_tls(tmp_path / "nothing")


def test_finish_task_reports_a_result_and_hands_out_the_next_task_in_one_call(master):
    servicer, address, credentials = master
    servicer.admit_workers(lambda worker_id: worker_id == 3)
    with auth.channel(address, credentials) as channel:
        stub = elasticdl_pb2_grpc.MasterStub(channel)
        first = stub.get_task(pb.GetTaskRequest(worker_id=3))
        done = {"records_done": first.end - first.start}
        second = stub.finish_task(
            pb.ReportTaskResultRequest(worker_id=3, task_id=first.task_id, exec_counters=done)
        )
        assert second.task_id not in (0, first.task_id)
        assert servicer.tasks.finished_tasks == 1
        assert [t.task_id for t in servicer.tasks.doing(3)] == [second.task_id]
        # The same result twice (a retried call) counts once; nothing is left to hand out
        # while the worker's second task runs.
        again = stub.finish_task(
            pb.ReportTaskResultRequest(worker_id=3, task_id=first.task_id, exec_counters=done)
        )
        assert servicer.tasks.finished_tasks == 1 and again.type == pb.WAIT
        last = stub.finish_task(
            pb.ReportTaskResultRequest(worker_id=3, task_id=second.task_id, exec_counters=done)
        )
        assert (last.task_id, last.type) == (0, pb.TASK_TYPE_UNSPECIFIED), "no more work"
    assert servicer.tasks.finished and servicer.tasks.records_trained == 20
    assert dict(servicer.stats.tasks_done) == {3: 2}
