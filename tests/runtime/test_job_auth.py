"""A rogue gRPC client on this machine against a real training job (issue 13, finding 1).

Before: a client calling get_task / report_task_result as an invented worker 77 took most of
the tasks, the job reported every record trained, and an early call crashed the master. Now
every call needs the job's secret, task calls need a live worker id the job launched, and the
job's report counts only what its own workers did.
"""

from __future__ import annotations

import logging
import stat
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from job_checks import assert_records_accounted, context_of, report_of
from tls_certs import self_signed

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime import auth
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.master.options import TrainOptions
from elasticdl.runtime.master.training_job import TrainingJob
from elasticdl.runtime.ps.client import PSClient, PSError

pytestmark = pytest.mark.slow

FAULT_ZOO = Path(__file__).resolve().parents[1] / "support" / "fault_zoo"


def _refused(call) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


class Rogue:
    """What the probe did, from right after "master on HOST:PORT" until the job ends."""

    def __init__(self, job: TrainingJob, logs: Path) -> None:
        self.job, self.logs = job, logs
        self.codes: dict[str, set[grpc.StatusCode]] = {}
        self.ps_codes: set[object] = set()
        self.stop = threading.Event()

    def note(self, what: str, code: grpc.StatusCode) -> None:
        self.codes.setdefault(what, set()).add(code)

    def run(self) -> None:
        address = self.job.master_addr
        secret = auth.read_secret(self.logs / "job.secret")  # a same-user reader of the 0600 file
        while not self.stop.is_set():
            for name, credentials in (("none", None), ("wrong", auth.new_auth()), ("job", secret)):
                with auth.channel(address, credentials) as channel:
                    stub = elasticdl_pb2_grpc.MasterStub(channel)
                    self.note(
                        f"{name} get_task",
                        _refused(lambda s=stub: s.get_task(pb.GetTaskRequest(worker_id=77))),
                    )
                    for task_id in range(1, 21):
                        result = pb.ReportTaskResultRequest(
                            worker_id=77, task_id=task_id, exec_counters={"records_done": 64}
                        )
                        self.note(
                            f"{name} report_task_result",
                            _refused(lambda s=stub, r=result: s.report_task_result(r)),
                        )
                    progress = pb.ReportProgressRequest(worker_id=77, task_id=1, records_done=64)
                    self.note(
                        f"{name} report_progress",
                        _refused(lambda s=stub, p=progress: s.report_progress(p)),
                    )
            if self.job.ps_addrs:
                with PSClient(self.job.ps_addrs, timeout_s=5) as client:
                    for call in (
                        client.pull,
                        lambda c=client: c.push_model({"x": np.zeros(2, np.float32)}),
                    ):
                        try:
                            call()
                            self.ps_codes.add("OK")
                        except PSError as err:
                            self.ps_codes.add(err.code)
            time.sleep(0.05)


def test_a_rogue_client_gets_nothing_and_the_report_stays_honest(tmp_path, caplog):
    data = tmp_path / "data"
    gen.generate("regression", str(data), 1024, records_per_file=1024)
    output, logs = tmp_path / "model", tmp_path / "logs"
    job = TrainingJob(
        TrainOptions(
            model_def="faulty.custom_model",
            model_zoo=str(FAULT_ZOO),
            training_data=str(data),
            output=str(output),
            log_dir=str(logs),
            num_workers=2,
            records_per_task=64,
            minibatch_size=32,
        )
    )
    results = []
    caplog.set_level(logging.INFO)
    thread = threading.Thread(target=lambda: results.append(job.run()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not job.master_addr:
        assert thread.is_alive() and time.monotonic() < deadline, "the master did not start"
        time.sleep(0.01)
    rogue = Rogue(job, logs)
    attacker = threading.Thread(target=rogue.run, daemon=True)
    attacker.start()
    thread.join(timeout=240)
    rogue.stop.set()
    attacker.join(timeout=30)
    assert not thread.is_alive(), "the job did not end"

    (result,) = results
    assert result.succeeded, result.error
    report = report_of(output)
    context = context_of(report, "records", "tasks", "failures")
    assert set(report["tasks"]["by_worker"]) <= {"0", "1"}, context
    assert sum(report["tasks"]["by_worker"].values()) == 16, context
    assert_records_accounted(report)
    assert report["records"]["trained"] == report["records"]["planned"] == 1024, context

    # UNAVAILABLE: a PS not listening yet, or the job already over; CANCELLED: a call in flight
    # as the master's server stopped at the end (never OK, never an answer).
    down = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
    unauthenticated = {grpc.StatusCode.UNAUTHENTICATED}
    for call in ("get_task", "report_task_result", "report_progress"):
        assert rogue.codes[f"none {call}"] - down == unauthenticated, rogue.codes
        assert rogue.codes[f"wrong {call}"] - down == unauthenticated, rogue.codes
        # Even with the secret, an id the job did not launch is no worker of it.
        assert rogue.codes[f"job {call}"] - down == {grpc.StatusCode.PERMISSION_DENIED}
    assert rogue.ps_codes - down == unauthenticated, rogue.ps_codes

    assert "Traceback" not in caplog.text
    secret = (logs / "job.secret").read_text()
    assert stat.S_IMODE((logs / "job.secret").stat().st_mode) == 0o600
    for path in [*logs.rglob("*"), *output.rglob("*")]:
        if path.is_file() and path.name != "job.secret" and path.suffix in (".log", ".json"):
            assert secret not in path.read_text(errors="replace"), path
    assert secret not in caplog.text


def test_a_job_over_tls_trains_and_plain_clients_are_shut_out(tmp_path):
    data = tmp_path / "data"
    gen.generate("regression", str(data), 256, records_per_file=256)
    self_signed(tmp_path / "tls")
    output, logs = tmp_path / "model", tmp_path / "logs"
    job = TrainingJob(
        TrainOptions(
            model_def="faulty.custom_model",
            model_zoo=str(FAULT_ZOO),
            training_data=str(data),
            output=str(output),
            log_dir=str(logs),
            num_workers=1,
            records_per_task=64,
            minibatch_size=32,
            tls_dir=str(tmp_path / "tls"),
        )
    )
    results, codes = [], set()
    thread = threading.Thread(target=lambda: results.append(job.run()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not job.master_addr:
        assert thread.is_alive() and time.monotonic() < deadline, "the master did not start"
        time.sleep(0.01)
    secret_only = auth.read_secret(logs / "job.secret")  # the secret, but no TLS
    with auth.channel(job.master_addr, secret_only) as channel:
        stub = elasticdl_pb2_grpc.MasterStub(channel)
        codes.add(_refused(lambda: stub.get_task(pb.GetTaskRequest(worker_id=0), timeout=5)))
    thread.join(timeout=240)
    assert not thread.is_alive(), "the job did not end"
    (result,) = results
    assert result.succeeded, result.error
    assert codes == {grpc.StatusCode.UNAVAILABLE}, codes
    report = report_of(output)
    assert report["records"]["trained"] == 256 and set(report["tasks"]["by_worker"]) == {"0"}
    assert "tls.key" not in (logs / "job.json").read_text()
