"""A resume whose newest checkpoint is damaged falls back to the newest intact version and says
which version it passed over and why (runtime/ps/checkpoint.py); a real job resumes past a
truncated newest checkpoint."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from job_checks import report_of
from paced_jobs import FAULT_ZOO

from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.ps import checkpoint as ckpt
from elasticdl.runtime.ps.partition import ps_of

NAMES = ("t000/dense/kernel", "t001/dense/bias", "t002/out/kernel", "t003/out/bias")


def write_version(directory: str, version: int, num_ps: int) -> None:
    for ps_id in range(num_ps):
        values = {
            n: np.full((64, 8), version, np.float32) for n in NAMES if ps_of(n, num_ps) == ps_id
        }
        state = ckpt.ShardState(
            version, trainable=values, slots={f"{n}/m": v for n, v in values.items()}
        )
        ckpt.save_shard(directory, version, ps_id, num_ps, state, "zoo.M")


def _shard(directory: Path, version: int, ps_id: int = 0, num_ps: int = 2) -> Path:
    return directory / ckpt.version_dirname(version) / ckpt.shard_filename(ps_id, num_ps)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_truncate, "truncated"),
        (lambda p: p.write_bytes(b"\x80\x04\x95random bytes, not a zip"), "not an elasticdl"),
        (lambda p: p.write_bytes(b""), "truncated (empty)"),
        (_flip, "corrupt"),
        (lambda p: p.unlink(), "incomplete (missing ps-1-of-2.npz)"),
    ],
)
def test_the_newest_intact_version_is_found_and_the_damaged_one_named(tmp_path, damage, reason):
    directory = tmp_path / "ckpt"
    for version in (10, 20, 30):
        write_version(str(directory), version, num_ps=2)
    damage(_shard(directory, 30, ps_id=1))
    version, skipped = ckpt.newest_intact(str(directory))
    assert version == 20
    [passed] = skipped
    assert passed.version == 30 and passed.reason.startswith(reason), passed


def test_a_not_pinned_restore_falls_back_with_a_line(tmp_path, caplog):
    directory = tmp_path / "ckpt"
    for version in (10, 20):
        write_version(str(directory), version, num_ps=2)
    _truncate(_shard(directory, 20, ps_id=0))
    caplog.set_level(logging.WARNING, "elasticdl.runtime.ps.checkpoint")
    loaded = ckpt.load_all(str(directory), only=(0, 2))
    assert loaded.version == 10 and [s.version for s in loaded.skipped] == [20]
    assert loaded.skipped[0].reason == "truncated"
    assert any("skipping checkpoint version 20" in r.getMessage() for r in caplog.records)
    moved = ckpt.set_aside(str(directory), loaded.skipped)
    assert [Path(m).name for m in moved] == ["damaged-version-000000000020"]
    assert ckpt.valid_versions(str(directory)) == [10]


@pytest.mark.slow
def test_a_resume_past_a_truncated_newest_checkpoint_succeeds_from_the_previous_one(tmp_path):
    data, first, second = tmp_path / "data", tmp_path / "m1", tmp_path / "m2"
    gen.generate("regression", str(data), 512, records_per_file=512)
    common = [sys.executable, "-m", "elasticdl.cli", "train", "--model_zoo", str(FAULT_ZOO)]
    common += ["--model_def", "faulty.custom_model", "--data", str(data)]
    common += ["--num_workers", "1", "--records_per_task", "128", "--minibatch_size", "32"]
    done = subprocess.run(
        [*common, "--output", str(first), "--num_epochs", "2", "--checkpoint_steps", "8"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    versions = ckpt.valid_versions(str(first / "checkpoints"))
    assert len(versions) >= 2, versions
    newest, previous = versions[-1], versions[-2]
    _truncate(_shard(first / "checkpoints", newest, num_ps=1))
    done = subprocess.run(
        [*common, "--output", str(second), "--num_epochs", "3"]
        + ["--checkpoint_dir_for_init", str(first / "checkpoints"), "--log_dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    line = (
        f"checkpoint version {newest} in {first / 'checkpoints'} is skipped: truncated "
        f"({_shard(first / 'checkpoints', newest, num_ps=1)})"
    )
    assert line in done.stderr, done.stderr[-3000:]
    report = report_of(second)
    assert report["resumed_from"]["model_version"] == previous
    assert report["resumed_from"]["skipped"] == [{"version": newest, "reason": "truncated"}]
    assert "resumed from model version" in done.stderr
    ps_log = (tmp_path / "ps0.log").read_text()
    assert f"restored version {previous} from" in ps_log, ps_log[-2000:]
    assert json.loads((second / "job_report.json").read_text())["status"] == "succeeded"
