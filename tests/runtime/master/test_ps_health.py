"""PS liveness: the pure core as tables, then a real PS process that is stopped and continued."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.master.ps_health import PSHealthMonitor, PSLiveness
from elasticdl.runtime.zoo_source import builtin_zoo_root

HOST = "127.0.0.1"

# Each script: (time, event) with events "send" (a probe to PS 0; probes are numbered in send
# order), "ok N" / "fail N" (probe N's outcome), "restart", "served" (seen serving other than
# by a probe: the model version advanced); then the status expected at the
# given time. timeout 5 s, start timeout 30 s, two failures needed.
SCRIPTS = [
    ("never answered, early", [], 10.0, "starting"),
    ("never answered, past the start timeout", [], 30.0, "unresponsive"),
    ("answered once", [(0, "send"), (0.1, "ok 0")], 100.0, "alive"),
    (
        "two failures, the first sent 5 s ago",
        [(0, "send"), (0, "ok 0"), (1, "send"), (2, "send"), (6, "fail 1"), (7, "fail 2")],
        7.0,
        "unresponsive",
    ),
    (
        "one failure is not enough",
        [(0, "send"), (0, "ok 0"), (1, "send"), (6, "fail 1")],
        60.0,
        "alive",
    ),
    (
        "failures, then a later probe answered (a pause shorter than the timeout)",
        [
            (0, "send"),
            (0, "ok 0"),
            (1, "send"),
            (2, "send"),
            (3, "send"),
            (6, "fail 1"),
            (7, "fail 2"),
            (7.5, "ok 3"),
        ],  # fmt: skip
        7.5,
        "alive",
    ),
    (
        "a late answer to an old probe does not clear newer failures",
        [
            (0, "send"),
            (0, "ok 0"),
            (1, "send"),
            (2, "send"),
            (3, "send"),
            (7, "fail 2"),
            (8, "fail 3"),
            (8.5, "ok 1"),
        ],  # fmt: skip
        8.5,
        "unresponsive",
    ),
    (
        "two quick failures (connection refused) wait for the timeout",
        [(0, "send"), (0, "ok 0"), (1, "send"), (1, "fail 1"), (2, "send"), (2, "fail 2")],
        5.9,
        "alive",
    ),
    (
        "answers to the previous incarnation are ignored after a restart",
        [(0, "send"), (1, "restart"), (1.5, "ok 0")],
        20.0,
        "starting",
    ),
    (
        "failures of the previous incarnation are ignored after a restart",
        [
            (0, "send"),
            (0, "ok 0"),
            (1, "send"),
            (2, "send"),
            (6, "fail 1"),
            (6.5, "restart"),
            (7, "fail 2"),
            (8, "send"),
            (8.2, "ok 3"),
        ],  # fmt: skip
        20.0,
        "alive",
    ),
    # A PS probed from before it listened, then stopped before a probe got through (a chaos
    # stop at the 4th task on a loaded machine): its pushes show it served, so it is hung
    # after the timeout, not the start timeout (it was: workers then timed out on it).
    (
        "seen serving without an answer, then silent",
        [
            (0, "send"),
            (0, "fail 0"),
            (1, "served"),
            (2, "send"),
            (3, "send"),
            (7, "fail 1"),
            (8, "fail 2"),
        ],
        8.0,
        "unresponsive",
    ),  # fmt: skip
    (
        "seen serving: probes failed before it do not count",
        [(0, "send"), (0.5, "send"), (1, "served"), (5, "fail 0"), (5.5, "fail 1")],
        20.0,
        "alive",
    ),
    (
        "seen serving without an answer, one failure is not enough",
        [(1, "served"), (2, "send"), (7, "fail 0")],
        25.0,
        "alive",
    ),
    (
        "seen serving after an answer changes nothing (the probes know better)",
        [
            (0, "send"),
            (0, "ok 0"),
            (1, "send"),
            (2, "send"),
            (3, "served"),
            (6, "fail 1"),
            (7, "fail 2"),
        ],
        7.0,
        "unresponsive",
    ),  # fmt: skip
    (
        "seen serving before a restart does not count for the new incarnation",
        [(1, "served"), (2, "restart"), (3, "send"), (4, "send"), (8, "fail 0"), (9, "fail 1")],
        20.0,
        "starting",
    ),
]


@pytest.mark.parametrize(("name", "events", "at", "expected"), SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_liveness_core(name, events, at, expected):
    core = PSLiveness(2, now=0.0, timeout_s=5.0, start_timeout_s=30.0, min_failures=2)
    probes = []
    for t, event in events:
        if event == "send":
            probes.append(core.sent(0, t))
        elif event == "restart":
            core.restart(0, t)
        elif event == "served":
            core.served(0, t)
        else:
            outcome, index = event.split()
            if outcome == "ok":
                core.answered(probes[int(index)])
            else:
                core.failed(probes[int(index)], "DEADLINE_EXCEEDED")
    assert core.status(0, at) == expected
    assert core.unresponsive(at) == ([0] if expected == "unresponsive" else []) + (
        [1] if at >= 30.0 else []
    )


def test_down_since_is_the_first_failed_probe_after_the_last_answer():
    core = PSLiveness(1, now=0.0, timeout_s=5.0)
    first = core.sent(0, 1.0)
    core.answered(first)
    assert core.down_since(0) is None
    late = [core.sent(0, t) for t in (2.0, 3.0)]
    core.failed(late[1])
    core.failed(late[0])
    assert core.down_since(0) == 2.0


def test_the_machines_load_stretches_the_start_timeout():
    """A PS starting on a loaded machine imports TensorFlow slowly; silence after it served is
    judged by hangs.py (a stopped PS is found as fast under load)."""
    core = PSLiveness(1, now=0.0, timeout_s=5.0, start_timeout_s=30.0, min_failures=2)
    assert core.status(0, 40.0, scale=2.0) == "starting"
    assert core.status(0, 60.0, scale=2.0) == "unresponsive"
    assert core.status(0, 40.0, scale=0.5) == "unresponsive", "never below the start timeout"
    core.answered(core.sent(0, 60.0))
    probes = [core.sent(0, t) for t in (61.0, 62.0, 63.0)]
    for probe in probes:
        core.failed(probe)
    assert core.status(0, 66.0, scale=3.0) == "unresponsive"


def test_served_by_an_earlier_incarnation_is_ignored():
    """A relaunch's `wait_serving` that returns after the PS was relaunched once more."""
    core = PSLiveness(1, now=0.0, timeout_s=5.0, start_timeout_s=30.0)
    old = core.generation(0)
    core.restart(0, 1.0)
    core.served(0, 2.0, generation=old)
    assert core.status(0, 20.0) == "starting"
    core.served(0, 3.0, generation=core.generation(0))
    assert core.status(0, 20.0) == "alive"


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="timeout_s > 0"):
        PSLiveness(1, now=0.0, timeout_s=0.0)


# -- a real parameter server process -----------------------------------------------------------


def _stderr_lines(process: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


@pytest.fixture(scope="module")
def ps_process(tmp_path_factory):
    """One real PS process (port 0: it logs the port it bound) and its address."""
    work = tmp_path_factory.mktemp("ps")
    config = JobConfig(
        job_name="ps-health-test",
        model_def="regressor.DNN",
        model_zoo_root=str(builtin_zoo_root()),
        params="hidden_units=[8, 4], learning_rate=0.05",
        num_ps=1,
    ).write(Path(work) / "job.json")
    command = [sys.executable, "-P", "-m", "elasticdl.runtime.ps.main", "--config", str(config),
               "--ps_id", "0", "--port", "0"]  # fmt: skip
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = _stderr_lines(process)
        deadline = time.monotonic() + 90
        address = ""
        while not address and time.monotonic() < deadline:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, "the PS exited during start-up"
            if "listening on" in line:
                address = line.rsplit("listening on", 1)[1].strip()
        assert address, "the PS did not start within 90 s"
        yield process, address
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
            process.wait()


def _wait_status(monitor: PSHealthMonitor, wanted: str, limit_s: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if monitor.status(0) == wanted:
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"PS not {wanted!r} within {limit_s} s (it is {monitor.status(0)!r})")


TIMEOUT_S, INTERVAL_S = 2.0, 0.25


def test_a_stopped_ps_is_found_and_a_continued_one_is_not(ps_process):
    process, address = ps_process
    # The timings below are the unloaded ones (other tests' load would stretch them).
    monitor = PSHealthMonitor(
        [address], timeout_s=TIMEOUT_S, interval_s=INTERVAL_S, load=lambda: 0.0
    )
    monitor.start()
    try:
        assert monitor.wait_serving(address, 10.0) < 10.0
        _wait_status(monitor, "alive", 5.0)
        # Stopped for less than the timeout, then continued: never flagged.
        os.kill(process.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        flagged = []
        while time.monotonic() - stopped < TIMEOUT_S * 0.6:
            flagged += monitor.unresponsive()
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGCONT)
        end = time.monotonic() + TIMEOUT_S * 2
        while time.monotonic() < end:
            flagged += monitor.unresponsive()
            time.sleep(0.05)
        assert flagged == []
        assert monitor.status(0) == "alive"
        # Stopped for good: flagged within the timeout plus two probe intervals (and slack
        # for a loaded machine), and its outage dates from about the stop.
        os.kill(process.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        seconds = _wait_status(monitor, "unresponsive", TIMEOUT_S + 2 * INTERVAL_S + 2.0)
        assert seconds >= TIMEOUT_S
        assert monitor.unresponsive() == [0]
        assert monitor.down_since(0) == pytest.approx(stopped, abs=INTERVAL_S + 0.5)
        # Continued: answers again; after a restart (as after a relaunch) it is alive again.
        os.kill(process.pid, signal.SIGCONT)
        assert monitor.wait_serving(address, 10.0) < 10.0
        monitor.set_address(0, address)
        assert monitor.status(0) == "starting"
        _wait_status(monitor, "alive", 5.0)
    finally:
        os.kill(process.pid, signal.SIGCONT)
        monitor.stop()


def test_a_busy_ps_is_not_flagged(ps_process):
    """Pushes from four threads keep the PS (and this 2-core machine) busy while it is probed."""
    import numpy as np

    from elasticdl.runtime.ps.client import PSClient

    _, address = ps_process
    values = {"w": np.zeros((256, 256), np.float32)}
    grads = {"w": np.ones((256, 256), np.float32)}
    stop = threading.Event()
    pushes = []

    def push() -> None:
        with PSClient([address], timeout_s=30) as client:
            client.push_model(values)
            while not stop.is_set():
                client.push_gradients(grads, -1)
                pushes.append(1)

    monitor = PSHealthMonitor([address], timeout_s=TIMEOUT_S, interval_s=INTERVAL_S)
    monitor.start()
    threads = [threading.Thread(target=push, daemon=True) for _ in range(4)]
    try:
        _wait_status(monitor, "alive", 10.0)
        for thread in threads:
            thread.start()
        flagged = []
        end = time.monotonic() + TIMEOUT_S * 3
        while time.monotonic() < end:
            flagged += monitor.unresponsive()
            time.sleep(0.05)
        assert flagged == []
        assert len(pushes) > 10
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        monitor.stop()


def test_wait_serving_times_out_with_one_line():
    monitor = PSHealthMonitor([f"{HOST}:1"], timeout_s=0.5)
    try:
        with pytest.raises(TimeoutError, match=r"did not answer within 0.3 s"):
            monitor.wait_serving(f"{HOST}:1", 0.3)
    finally:
        monitor.stop()


class _FailingServicer(elasticdl_pb2_grpc.ParameterServerServicer):
    """A PS that fails every probe at once: probe callbacks run all the time."""

    def __init__(self) -> None:
        self.probes = 0

    def get_applied_progress(self, request, context):
        self.probes += 1
        context.abort(grpc.StatusCode.UNAVAILABLE, "not now")


def _returns(call, limit_s: float) -> bool:
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(limit_s)
    return not thread.is_alive()


def test_relaunches_and_stop_while_probes_complete_do_not_deadlock():
    """Closing a channel waits for the callbacks of its calls, which take the monitor's lock:
    set_address and stop must not hold that lock while they close a channel (they did: a PS
    relaunch then hung the master now and then)."""
    servicer = _FailingServicer()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    elasticdl_pb2_grpc.add_ParameterServerServicer_to_server(servicer, server)
    ports = [server.add_insecure_port(f"{HOST}:0") for _ in range(2)]
    server.start()
    monitor = PSHealthMonitor([f"{HOST}:{ports[0]}"], timeout_s=30.0, interval_s=0.001)
    try:
        monitor.start()
        for i in range(1, 61):
            address = f"{HOST}:{ports[i % 2]}"
            assert _returns(lambda a=address: monitor.set_address(0, a), 20.0), "set_address hung"
            seen, deadline = servicer.probes, time.monotonic() + 20.0
            while servicer.probes <= seen + 2 and time.monotonic() < deadline:
                time.sleep(0.001)
        assert _returns(monitor.stop, 20.0), "stop hung"
    finally:
        server.stop(0)
