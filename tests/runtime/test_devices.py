"""Which GPUs a job's process uses (runtime/devices.py): the table, and how it is applied."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import pytest

from elasticdl.runtime import devices
from elasticdl.runtime.devices import DevicePlan, ProcessRole, apply_plan, device_plan

R = ProcessRole
HIDDEN = DevicePlan(visible=())
DEFAULT = devices.TENSORFLOW_DEFAULT


@pytest.mark.parametrize(
    ("role", "gpus", "local", "worker_id", "plan"),
    [
        (R.MASTER, 2, True, 0, HIDDEN),
        (R.MASTER, 2, False, 0, HIDDEN),
        (R.MASTER_IN_PROGRAM, 2, True, 0, DevicePlan(memory_growth=True)),
        (R.MASTER_IN_PROGRAM, 2, False, 0, DEFAULT),
        (R.PS, 4, True, 0, HIDDEN),
        (R.PS, 1, False, 0, DEFAULT),
        (R.WORKER, 2, True, 0, DevicePlan(visible=(0,), memory_growth=True)),
        (R.WORKER, 2, True, 1, DevicePlan(visible=(1,), memory_growth=True)),
        (R.WORKER, 2, True, 5, DevicePlan(visible=(1,), memory_growth=True)),
        (R.WORKER, 1, True, 3, DevicePlan(visible=(0,), memory_growth=True)),
        (R.WORKER, 8, False, 3, DEFAULT),
    ],
)
def test_the_table(role: ProcessRole, gpus: int, local: bool, worker_id: int, plan: DevicePlan):
    assert device_plan(role, gpus, local, worker_id) == plan


@pytest.mark.parametrize("role", list(ProcessRole))
@pytest.mark.parametrize("local", [True, False])
def test_no_gpu_nothing_to_decide(role: ProcessRole, local: bool):
    assert device_plan(role, 0, local, worker_id=3) == DEFAULT


@dataclass
class _Config:
    """`tf.config`'s two calls the plan makes, recorded; `fail` raises as TensorFlow does once
    the process ran an op."""

    fail: bool = False
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def experimental(self) -> _Config:
        return self

    def set_visible_devices(self, chosen: list[Any], kind: str) -> None:
        if self.fail:
            raise RuntimeError("Visible devices cannot be modified after being initialized")
        self.calls.append(("visible", [g.name for g in chosen], kind))

    def set_memory_growth(self, gpu: Any, on: bool) -> None:
        self.calls.append(("growth", gpu.name, on))


@dataclass(frozen=True)
class _Gpu:
    name: str


GPUS = [_Gpu("/physical_device:GPU:0"), _Gpu("/physical_device:GPU:1")]


def test_a_local_worker_sees_its_one_gpu_and_grows_into_it():
    config = _Config()
    plan = device_plan(R.WORKER, len(GPUS), local=True, worker_id=3)
    assert apply_plan(plan, GPUS, config, R.WORKER)
    assert config.calls == [
        ("visible", ["/physical_device:GPU:1"], "GPU"),
        ("growth", "/physical_device:GPU:1", True),
    ]


def test_a_local_ps_and_the_master_see_no_gpu():
    for role in (R.PS, R.MASTER):
        config = _Config()
        assert apply_plan(device_plan(role, 2, local=True), GPUS, config, role)
        assert config.calls == [("visible", [], "GPU")]


def test_the_users_program_keeps_its_gpus_with_memory_as_needed():
    config = _Config()
    assert apply_plan(device_plan(R.MASTER_IN_PROGRAM, 2, True), GPUS, config, R.MASTER)
    assert config.calls == [("growth", g.name, True) for g in GPUS]


def test_a_pod_keeps_tensorflows_default():
    config = _Config(fail=True)  # not even asked
    assert apply_plan(device_plan(R.WORKER, 2, local=False), GPUS, config, R.WORKER)
    assert config.calls == []


def test_devices_initialized_already_keep_their_settings_with_a_warning(caplog):
    config = _Config(fail=True)
    with caplog.at_level(logging.WARNING, logger="elasticdl.devices"):
        applied = apply_plan(device_plan(R.PS, 2, local=True), GPUS, config, R.PS)
    assert not applied and config.calls == []
    [record] = caplog.records
    assert "parameter server keeps TensorFlow's GPU settings" in record.getMessage()
    assert "set_memory_growth" in record.getMessage()


def test_tensorflows_own_config_takes_the_calls():
    """The calls as the plan makes them, on the real `tf.config` (this machine has no GPU:
    hiding none is the one change it can take)."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    assert apply_plan(HIDDEN, gpus, tf.config, R.PS)
    assert tf.config.get_visible_devices("GPU") == []
    assert devices.use_devices(R.WORKER, local=True, worker_id=1)


def test_local_processes_are_told_they_share_the_machine():
    from elasticdl.runtime.ps.main import parse_args as ps_args
    from elasticdl.runtime.worker.main import parse_args as worker_args

    ps = ["--config", "c", "--ps_id", "0", "--port", "0"]
    worker = ["--config", "c", "--worker_id", "0", "--master_addr", "127.0.0.1:1"]
    assert ps_args([*ps, devices.LOCAL_JOB_FLAG]).local_job
    assert not ps_args(ps).local_job
    assert worker_args([*worker, devices.LOCAL_JOB_FLAG]).local_job
    assert not worker_args(worker).local_job


def test_a_local_job_in_the_users_program_takes_gpu_memory_as_needed_while_it_runs(monkeypatch):
    monkeypatch.delenv(devices.GROWTH_ENV, raising=False)
    with devices.master_devices(local=True, own_process=False):
        assert os.environ[devices.GROWTH_ENV] == "true"
    assert devices.GROWTH_ENV not in os.environ
    monkeypatch.setenv(devices.GROWTH_ENV, "false")  # the user's own choice stays
    with devices.master_devices(local=True, own_process=False):
        assert os.environ[devices.GROWTH_ENV] == "false"
    assert os.environ[devices.GROWTH_ENV] == "false"


def test_a_cluster_job_or_elasticdls_own_master_leaves_the_environment(monkeypatch):
    monkeypatch.delenv(devices.GROWTH_ENV, raising=False)
    for local, own in ((False, False), (True, True), (False, True)):
        with devices.master_devices(local=local, own_process=own):
            assert devices.GROWTH_ENV not in os.environ
