"""A real parameter-server process with the job's secret: only callers that carry it get in."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from elasticdl.runtime import auth
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.master.ports import choose_port
from elasticdl.runtime.ps.client import PSClient, PSError
from elasticdl.runtime.zoo_source import builtin_zoo_root

HOST = "127.0.0.1"


def _config(tmp_path: Path) -> tuple[Path, auth.JobAuth]:
    config = JobConfig(
        job_name="ps-auth",
        model_def="regressor.DNN",
        model_zoo_root=str(builtin_zoo_root()),
        params="hidden_units=[4], learning_rate=0.05",
        num_ps=1,
    )
    config, credentials = auth.secure(config, tmp_path)
    return config.write(tmp_path / "job.json"), credentials


def _command(config: Path, port: int) -> list[str]:
    return [sys.executable, "-P", "-m", "elasticdl.runtime.ps.main", "--config", str(config),
            "--ps_id", "0", "--port", str(port)]  # fmt: skip


def test_the_ps_refuses_pushes_and_pulls_without_the_job_secret(tmp_path):
    config, credentials = _config(tmp_path)
    port = choose_port(HOST)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    log = (tmp_path / "ps.log").open("w")
    process = subprocess.Popen(_command(config, port), stderr=log, text=True, env=env)
    address = f"{HOST}:{port}"
    values = {"dense/kernel": np.ones((3, 4), np.float32)}
    try:
        with PSClient([address], timeout_s=60, credentials=credentials) as client:
            client.wait_ready(60)
            deadline = time.monotonic() + 60
            while "listening" not in (tmp_path / "ps.log").read_text():
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
            for rogue in (None, auth.new_auth()):
                with PSClient([address], timeout_s=10, credentials=rogue) as other:
                    for call in (
                        lambda o=other: o.push_model(values),
                        lambda o=other: o.pull(),
                        lambda o=other: o.push_gradients(values, 0),
                        lambda o=other: o.applied_progress([1]),
                    ):
                        with pytest.raises(PSError) as refused:
                            call()
                        assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
            assert client.pull().initialized is False, "nothing a rogue sent got in"
            client.push_model(values)
            pulled = client.pull()
            assert pulled.initialized and pulled.versions == [0]
            np.testing.assert_array_equal(pulled.values["dense/kernel"], values["dense/kernel"])
        text = (tmp_path / "ps.log").read_text()
        assert "refused a call to /" in text and credentials.secret not in text
        assert credentials.secret not in " ".join(_command(config, port))
    finally:
        process.kill()
        process.wait()
        log.close()


def test_a_ps_whose_secret_is_missing_says_so_and_exits_1(tmp_path):
    config, _ = _config(tmp_path)
    (tmp_path / "job.secret").unlink()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        _command(config, choose_port(HOST)), capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 1
    expected = f"parameter server 0: cannot read the job's secret {tmp_path / 'job.secret'}"
    assert done.stderr.strip().splitlines()[-1].startswith(expected), done.stderr
