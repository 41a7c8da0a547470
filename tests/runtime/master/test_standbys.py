"""Standby processes (runtime/standby.py, runtime/master/standbys.py): real processes that
import TensorFlow, then become a real parameter server, with real signals and exit statuses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.master.instances import job_env
from elasticdl.runtime.master.standbys import Standbys
from elasticdl.runtime.standby import parse_handoff, same_start
from elasticdl.runtime.zoo_source import builtin_zoo_root

GOOD = {"role": "ps", "argv": ["--ps_id", "0"], "env": {"A": "1"}, "cwd": "/w", "log": "/w/l"}


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"role": "master"}, "names a role of ['ps', 'worker']"),
        ({"argv": "--ps_id 0"}, "argv is a list of strings"),
        ({"argv": ["--port", 1]}, "argv is a list of strings"),
        ({"env": {"A": 1}}, "env maps strings to strings"),
        ({"cwd": ""}, "names its cwd"),
        ({"log": None}, "names its log"),
    ],
)
def test_a_bad_handoff_says_what_is_wrong(change, fragment):
    assert parse_handoff(json.dumps(GOOD)) == GOOD
    with pytest.raises(ValueError, match=fragment.replace("[", r"\[")):
        parse_handoff(json.dumps({**GOOD, **change}))


def test_only_tmpdir_may_change_between_start_and_role():
    started = {"PATH": "/bin", "TMPDIR": "/tmp"}
    assert same_start(started, {"PATH": "/bin", "TMPDIR": "/job/tmp/ps0"})
    assert same_start(started, {"PATH": "/bin"})
    assert not same_start(started, {"PATH": "/usr/bin", "TMPDIR": "/tmp"})
    assert not same_start(started, {"PATH": "/bin", "TF_USE_LEGACY_KERAS": "1"})


@pytest.fixture(scope="module")
def ps_config(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("standby")
    return JobConfig(
        job_name="standby-test",
        model_def="regressor.DNN",
        model_zoo_root=str(builtin_zoo_root()),
        params="hidden_units=[4]",
        num_ps=1,
    ).write(work / "job.json")


def _cmdline(pid: int) -> list[str]:
    """The arguments of /proc/PID/cmdline (a process title set in place is one)."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")


def _wait_for_line(log: Path, fragment: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if log.exists() and fragment in log.read_text():
            return
        assert process.poll() is None, f"exited {process.returncode}: {log.read_text()}"
        time.sleep(0.05)
    raise AssertionError(f"no {fragment!r} in {log} within 120 s")


def _run_ps(
    ps_config: Path, tmp_path: Path, extra_env: dict[str, str]
) -> tuple[list[str], str, int]:
    """A standby handed a PS role: (its command line while serving, its log, exit status
    after SIGTERM)."""
    standbys = Standbys(1, "3", os.environ)
    [standby] = standbys.pids
    log = tmp_path / "ps0.log"
    env = {**job_env("3", None, standbys.base), "TMPDIR": str(tmp_path), **extra_env}
    argv = ["--config", str(ps_config), "--ps_id", "0", "--port", "0"]
    process = standbys.take("ps", argv, env, tmp_path, log)
    assert process is not None and process.pid == standby, "the role runs in the standby"
    assert standbys.take("ps", argv, env, tmp_path, log) is None, "none left"
    try:
        _wait_for_line(log, "listening on", process)
        cmdline = _cmdline(process.pid)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return cmdline, log.read_text(), code


def test_a_standby_becomes_a_parameter_server_in_place(ps_config, tmp_path):
    cmdline, log, code = _run_ps(ps_config, tmp_path, {})
    [title] = cmdline  # set in place: the role's command line as one string
    assert f"-P -m elasticdl.runtime.ps.main --config {ps_config} --ps_id 0" in title, cmdline
    assert "parameter server 0 listening on 127.0.0.1:" in log
    assert "parameter server 0 stopping" in log
    assert code == 0, log


def test_a_standby_whose_environment_differs_starts_the_role_afresh(ps_config, tmp_path):
    cmdline, log, code = _run_ps(ps_config, tmp_path, {"ELASTICDL_TEST_MARK": "1"})
    # exec'd: its ordinary command line
    assert cmdline[1:5] == ["-P", "-m", "elasticdl.runtime.ps.main", "--config"], cmdline
    assert "parameter server 0 listening on" in log and code == 0, log


def test_an_unused_standby_exits_quietly_and_a_bad_handoff_says_why():
    command = [sys.executable, "-P", "-m", "elasticdl.runtime.standby"]
    unused = subprocess.run(command, input=b"", capture_output=True, timeout=120, check=False)
    assert (unused.returncode, unused.stderr) == (0, b"")
    bad = subprocess.run(command, input=b'{"role": "master"}\n', capture_output=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.decode().strip().splitlines()[-1] == (
        "standby process: a handoff names a role of ['ps', 'worker']"
    )


def test_a_dead_standby_is_skipped_and_close_ends_the_rest(tmp_path):
    standbys = Standbys(2, "3", os.environ)
    first, second = standbys.pids
    os.kill(first, signal.SIGKILL)
    while Path(f"/proc/{first}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)  # dead (a zombie until take reaps it)
    argv = ["--config", str(tmp_path / "missing.json"), "--ps_id", "0", "--port", "0"]
    env = {**standbys.env, "TMPDIR": str(tmp_path)}
    process = standbys.take("ps", argv, env, tmp_path, tmp_path / "ps0.log")
    assert process is not None and process.pid == second
    assert process.wait(timeout=120) == 1
    assert "cannot read job config" in (tmp_path / "ps0.log").read_text()
    assert not Path(f"/proc/{first}").exists(), "the dead one was reaped"
    late = Standbys(1, "3", os.environ)
    [waiting] = late.pids
    late.close()
    assert late.pids == [] and not Path(f"/proc/{waiting}").exists()
