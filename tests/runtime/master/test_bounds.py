"""Resource bounds: how many workers a job may ask for (issue 13, section 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.master.bounds import (
    MIB,
    PS_BYTES,
    WORKER_BYTES,
    WorkerBound,
    available_memory,
    check_num_workers,
    processes_fit,
    worker_bound,
)

GIB = 1 << 30


@pytest.mark.parametrize(
    ("available", "num_ps", "expected"),
    [
        (24 * GIB, 1, int((24 * GIB * 0.8 - PS_BYTES) // WORKER_BYTES)),
        (24 * GIB, 0, int(24 * GIB * 0.8 // WORKER_BYTES)),
        (1 * GIB, 1, 2),  # 819 MiB usable - 288 for the PS = 531: two 256 MiB workers
        (512 * MIB, 1, 0),
        (0, 0, 0),
        (100 * MIB, 4, 0),  # never negative
    ],
)
def test_processes_fit(available, num_ps, expected):
    assert processes_fit(available, num_ps) == expected


@pytest.mark.parametrize(
    ("tasks", "available", "num_ps", "limit", "reason_starts"),
    [
        (16, None, 1, 16, "the 16 tasks in an epoch"),
        (5000, None, 1, 1000, "the limit for one job"),
        (16, 24 * GIB, 1, 16, "the 16 tasks in an epoch"),
        (500, 24 * GIB, 1, 75, "the worker processes this machine's memory holds (24.0 GiB"),
        (500, 1 * GIB, 1, 2, "the worker processes this machine's memory holds (1.0 GiB"),
        (1, None, 1, 2, "the 1 tasks in an epoch (the default of 2 is always allowed)"),
        (2, None, 1, 2, "the 2 tasks in an epoch"),
    ],
)
def test_worker_bound(tasks, available, num_ps, limit, reason_starts):
    bound = worker_bound(tasks, "tasks in an epoch", num_ps, available, always_allowed=2)
    assert bound.limit == limit and bound.reason.startswith(reason_starts)


def test_check_num_workers_says_the_limit():
    check_num_workers(16, WorkerBound(16, "the 16 tasks in an epoch"))
    with pytest.raises(ValueError) as err:
        check_num_workers(500, WorkerBound(16, "the 16 tasks in an epoch"))
    assert str(err.value) == (
        "--num_workers 500 is more than 16, the 16 tasks in an epoch; give --num_workers 16 "
        "or fewer"
    )


def test_available_memory_reads_this_machine():
    available = available_memory()
    assert available is not None and 0 < available < 1 << 50


def test_a_job_with_more_workers_than_tasks_is_refused_before_anything_starts(tmp_path):
    data, logs = tmp_path / "data", tmp_path / "logs"
    gen.generate("regression", str(data), 256, records_per_file=256)
    with pytest.raises(ValueError) as err:
        elasticdl.train(
            model_def="regressor.DNN",
            params="hidden_units=[4]",
            data=str(data),
            output=str(tmp_path / "model"),
            log_dir=str(logs),
            num_workers=5,
            records_per_task=64,
            minibatch_size=64,  # tasks shrink to 2 a worker in whole minibatches: not below 64
        )
    assert str(err.value) == (
        "--num_workers 5 is more than 4, the 4 tasks in an epoch; give --num_workers 4 or fewer"
    )
    assert not (tmp_path / "model").exists() and not list(Path(logs).glob("*.log"))


def test_a_tiny_job_runs_with_the_default_workers(tmp_path):
    data = tmp_path / "data"
    gen.generate("regression", str(data), 64, records_per_file=64)
    result = elasticdl.train(
        model_def="regressor.DNN",
        params="hidden_units=[4]",
        data=str(data),
        output=str(tmp_path / "model"),
        log_dir=str(tmp_path / "logs"),
    )
    assert result.succeeded, result.error


def test_a_local_job_with_more_workers_than_memory_holds_is_refused(tmp_path):
    data, logs = tmp_path / "data", tmp_path / "logs"
    gen.generate("regression", str(data), 2000, records_per_file=2000)
    with pytest.raises(ValueError) as err:
        elasticdl.train(
            model_def="regressor.DNN",
            params="hidden_units=[4]",
            data=str(data),
            output=str(tmp_path / "model"),
            log_dir=str(logs),
            num_workers=1000,
            records_per_task=1,
        )
    message = str(err.value)
    assert message.startswith("--num_workers 1000 is more than ")
    assert "the worker processes this machine's memory holds" in message, message
    assert not list(Path(logs).glob("*.log"))
