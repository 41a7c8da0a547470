"""A killed parameter server is relaunched on a fresh port, and the workers follow it
(issue 13 §5): the test takes the old port as soon as the PS is gone, so a relaunch on the old
port could not bind it; the job still finishes with every record accounted for.

The test waits on conditions only: the PS's "listening on" line, then binding the port (which
fails while the PS listens and succeeds once it is dead), then the job's end.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path

import pytest
from job_checks import assert_records_accounted, context_of, report_of

import elasticdl
from elasticdl.runtime.data import generate as gen

pytestmark = pytest.mark.slow

LISTENING = re.compile(r"parameter server 0 listening on 127\.0\.0\.1:(\d+)")


def _ports_in_log(log: Path) -> list[int]:
    try:
        return [int(p) for p in LISTENING.findall(log.read_text(errors="replace"))]
    except FileNotFoundError:
        return []


def _take_port(port: int, until: threading.Event, deadline: float) -> socket.socket | None:
    """Bind and listen on `port` as soon as it is free (the PS died), or None."""
    while time.monotonic() < deadline and not until.is_set():
        taker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Connections of the dead PS may linger in TIME_WAIT; a live listener still blocks.
        taker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taker.bind(("127.0.0.1", port))
            taker.listen()
            return taker
        except OSError:
            taker.close()
            time.sleep(0.01)
    return None


def test_a_relaunched_ps_moves_to_a_fresh_port_when_its_old_one_is_taken(tmp_path, monkeypatch):
    data, logs = tmp_path / "data", tmp_path / "logs"
    gen.generate("regression", str(data), 512, records_per_file=512)
    monkeypatch.chdir(tmp_path)
    outcome: dict = {}
    ended = threading.Event()

    def job() -> None:
        try:
            outcome["result"] = elasticdl.train(
                model_def="regressor.DNN",
                params="hidden_units=[8]",
                data=str(data),
                output="model",
                log_dir=str(logs),
                num_workers=2,
                minibatch_size=32,
                records_per_task=128,
                checkpoint_steps=2,
                chaos="ps0:kill@tasks=2",
            )
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            outcome["error"] = error
        finally:
            ended.set()

    thread = threading.Thread(target=job, name="job", daemon=True)
    thread.start()
    deadline = time.monotonic() + 300
    while not _ports_in_log(logs / "ps0.log") and not ended.is_set():
        assert time.monotonic() < deadline, "ps0 never listened"
        time.sleep(0.05)
    (old_port,) = _ports_in_log(logs / "ps0.log") or [None]
    assert old_port is not None, outcome
    taker = _take_port(old_port, ended, deadline)
    try:
        assert taker is not None, f"port {old_port} was never free: {outcome}"
        thread.join(max(1.0, deadline - time.monotonic()))
        assert ended.is_set(), "the job did not end"
    finally:
        if taker is not None:
            taker.close()
    assert "error" not in outcome, outcome
    result = outcome["result"]
    assert result.succeeded, result.error
    report = report_of(tmp_path / "model")
    context = context_of(report, "records", "failures", "events", "parameter_servers")
    assert_records_accounted(report, max_redone=2 * 32)
    (failure,) = report["failures"]
    assert (failure["role"], failure["id"]) == ("ps", 0), context
    assert report["parameter_servers"]["relaunched"] == 1, context
    ports = _ports_in_log(logs / "ps0.log")
    assert len(ports) == 2 and ports[0] == old_port and ports[1] != old_port, ports


def test_a_ps_whose_port_was_taken_before_it_bound_starts_elsewhere(tmp_path, monkeypatch):
    """The race ports.py makes rare: the master chose a port, another process bound it before
    the PS did. The PS never served, so even this job without checkpoints relaunches it on a
    fresh port (free of --max_ps_relaunches, 0 here) and the worker finds it there."""
    from elasticdl.runtime.master import instances

    data, logs = tmp_path / "data", tmp_path / "logs"
    gen.generate("regression", str(data), 512, records_per_file=512)
    monkeypatch.chdir(tmp_path)
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))  # bound, not listening: a connection to it is refused
    taken = holder.getsockname()[1]
    chosen: list[int] = []
    real_choose = instances.choose_port

    def first_one_taken(host: str, avoid: tuple[int, ...] = ()) -> int:
        port = taken if not chosen else real_choose(host, avoid=avoid)
        chosen.append(port)
        return port

    monkeypatch.setattr(instances, "choose_port", first_one_taken)
    try:
        result = elasticdl.train(
            model_def="regressor.DNN",
            params="hidden_units=[8]",
            data=str(data),
            output="model",
            log_dir=str(logs),
            num_workers=1,
            minibatch_size=32,
            records_per_task=128,
        )
    finally:
        holder.close()
    assert result.succeeded, result.error
    report = report_of(tmp_path / "model")
    context = context_of(report, "records", "failures", "events", "parameter_servers")
    assert_records_accounted(report)
    (failure,) = report["failures"]
    assert (failure["role"], failure["id"]) == ("ps", 0), context
    assert f"port {taken}" in failure["cause"] and "in use" in failure["cause"], context
    assert report["parameter_servers"]["relaunched"] == 1, context
    assert chosen[0] == taken and len(chosen) == 2 and chosen[1] != taken, chosen
    assert _ports_in_log(logs / "ps0.log") == [chosen[1]]
