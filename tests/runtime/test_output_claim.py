"""One job per --output (runtime/output_claim.py): the claim, its holder, a dead holder's
takeover, and two real training jobs started at the same instant on one output."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import fsspec
import pytest
from job_checks import report_of
from paced_jobs import FAULT_ZOO

from elasticdl.runtime import output_claim
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.output_claim import Holder, OutputClaim, OutputClaimed

HOLD = """
import sys, time
from elasticdl.runtime.output_claim import OutputClaim
claim = OutputClaim(sys.argv[1], sys.argv[2])
claim.acquire()
print("claimed", flush=True)
time.sleep(600)
"""


def _holding(output: Path, job: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(output), job], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "claimed"
    return holder


def test_a_second_claim_is_refused_naming_the_holder_and_since_when(tmp_path):
    output = tmp_path / "model"
    with OutputClaim(str(output), "train-first") as first:
        claim_file = tmp_path / ".model.claim"
        held = json.loads(claim_file.read_text())
        assert held["job"] == "train-first" and held["pid"] == os.getpid()
        with pytest.raises(OutputClaimed) as refused:
            OutputClaim(str(output), "train-second").acquire()
        text = str(refused.value)
        assert "\n" not in text
        assert f"job train-first (process {os.getpid()} on " in text
        assert text.endswith(f"since {first.me.since}); give this job another --output")
        assert not output.exists(), "claiming creates nothing in --output"
    assert not claim_file.exists(), "released: the claim file goes"
    with OutputClaim(str(output), "train-third") as third:
        assert third.taken_over is None


def test_a_dead_holders_claim_is_taken_over_with_a_line(tmp_path, caplog):
    output = tmp_path / "model"
    holder = _holding(output, "train-killed")
    with pytest.raises(OutputClaimed, match="train-killed"):
        OutputClaim(str(output), "train-next").acquire()
    # A killed job also left its staging beside the output: removed with the claim taken.
    staging = tmp_path / ".model.staging-predict-1234"
    staging.mkdir()
    (staging / "part-0").write_text("partial")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    caplog.set_level(logging.WARNING, "elasticdl.output")
    with OutputClaim(str(output), "train-next") as claim:
        assert claim.taken_over is not None and claim.taken_over.job == "train-killed"
        assert claim.taken_over.pid == holder.pid
    lines = [r.getMessage() for r in caplog.records]
    assert any(
        "taking over the claim of job train-killed" in line and "that job is gone" in line
        for line in lines
    ), lines
    assert not staging.exists()
    assert any(f"removed {staging}, left by a job that did not finish" in x for x in lines)


def test_claims_started_at_the_same_instant_have_one_winner(tmp_path):
    output, start = tmp_path / "model", threading.Barrier(8)
    won: list[OutputClaim] = []
    refused: list[str] = []

    def race(i: int) -> None:
        claim = OutputClaim(str(output), f"job-{i}")
        start.wait()
        try:
            claim.acquire()
            won.append(claim)
        except OutputClaimed as err:
            refused.append(str(err))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(refused) == 7, (won, refused)
    assert all(won[0].job_name in text for text in refused)
    won[0].release()


def test_an_object_store_claim_is_refused_while_renewed_and_taken_over_when_stale(monkeypatch):
    fs = fsspec.filesystem("memory")
    url = "memory://claims/models/m1"
    with OutputClaim(url, "train-a"):
        assert fs.exists("/claims/models/.m1.claim")
        with pytest.raises(OutputClaimed, match="job train-a"):
            OutputClaim(url, "train-b").acquire()
    assert not fs.exists("/claims/models/.m1.claim")
    stale = Holder("train-gone", "elsewhere", 7, "2026-01-01T00:00:00+00:00", time.time() - 301)
    fs.pipe_file("/claims/models/.m1.claim", stale.to_json())
    with OutputClaim(url, "train-c") as claim:
        assert claim.taken_over == stale
    monkeypatch.setattr(output_claim, "STALE_S", 3600.0)
    fs.pipe_file("/claims/models/.m1.claim", stale.to_json())
    with pytest.raises(OutputClaimed, match="train-gone"):
        OutputClaim(url, "train-d").acquire()
    fs.rm("/claims", recursive=True)


def test_a_job_run_in_a_child_process_runs_under_its_parents_claim(tmp_path):
    output = tmp_path / "model"
    child = (
        "import sys; from elasticdl.runtime.output_claim import OutputClaim\n"
        "with OutputClaim(sys.argv[1], sys.argv[2]) as claim: print(claim.taken_over)\n"
    )
    with OutputClaim(str(output), "train-same"):
        done = subprocess.run(
            [sys.executable, "-c", child, str(output), "train-same"], capture_output=True, text=True
        )
        assert done.returncode == 0 and done.stdout.strip() == "None", done.stderr
        assert (tmp_path / ".model.claim").exists(), "the child leaves the parent's claim"
        other = subprocess.run(
            [sys.executable, "-c", child, str(output), "train-other"],
            capture_output=True,
            text=True,
        )
        assert other.returncode == 1 and "is in use by job train-same" in other.stderr


@pytest.mark.slow
def test_two_jobs_started_at_the_same_instant_on_one_output(tmp_path):
    """One exits 2 within seconds, in one line; the other succeeds, and what it published
    (checkpoints, progress journal, report) is its own alone."""
    data, output = tmp_path / "data", tmp_path / "model"
    gen.generate("regression", str(data), 512, records_per_file=512)
    argv = [
        sys.executable,
        "-m",
        "elasticdl.cli",
        "train",
        "--model_zoo",
        str(FAULT_ZOO),
        "--model_def",
        "faulty.custom_model",
        "--data",
        str(data),
        "--output",
        str(output),
        "--num_workers",
        "1",
        "--records_per_task",
        "128",
        "--minibatch_size",
        "32",
        "--num_epochs",
        "2",
        "--checkpoint_steps",
        "4",
    ]
    jobs = [
        subprocess.Popen(
            [*argv, "--log_dir", str(tmp_path / f"logs{i}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    started = time.monotonic()
    ended: dict[int, float] = {}
    while len(ended) < 2:
        for i, job in enumerate(jobs):
            if i not in ended and job.poll() is not None:
                ended[i] = time.monotonic() - started
        assert time.monotonic() - started < 400
        time.sleep(0.05)
    outs = [job.communicate() for job in jobs]
    codes = sorted((job.returncode, i) for i, job in enumerate(jobs))
    assert [c for c, _ in codes] == [0, 2], outs
    winner, loser = codes[0][1], codes[1][1]
    assert ended[loser] < ended[winner], "the loser ends before the winner's job is over"
    lines = [line for line in outs[loser][1].splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"elasticdl: error: --output {str(output)!r}")
    assert "is in use by job train-" in lines[0] and "since " in lines[0], lines
    assert not (tmp_path / f"logs{loser}").exists(), "the loser started nothing"
    report = report_of(output)
    assert report["status"] == "succeeded"
    assert report == report_of(tmp_path / f"logs{winner}")
    journal = (output / "checkpoints" / "progress-journal.jsonl").read_text().splitlines()
    runs = {json.loads(line)["run"] for line in journal}
    assert runs == {1}, "one job's journal"
    on_disk = sorted(p.name for p in (output / "checkpoints").glob("version-*"))
    listed = sorted(Path(c["path"]).name for c in report["checkpoints"])
    assert on_disk == listed and on_disk, (on_disk, listed)
    assert not list(tmp_path.glob(".model.*")), "no claim or staging left beside the output"


def test_a_released_claim_leaves_no_directory_it_created(tmp_path):
    output = tmp_path / "models" / "deep" / "m1"
    with OutputClaim(str(output), "train-a"):
        assert (tmp_path / "models" / "deep" / ".m1.claim").is_file()
    assert list(tmp_path.iterdir()) == []
    with OutputClaim(str(output), "train-b"):
        output.mkdir()  # published
    assert output.is_dir() and not (tmp_path / "models" / "deep" / ".m1.claim").exists()
