"""A job runs with a read-only root filesystem, as the pods of Pod Security "restricted" do.

The pods (runtime/k8s/manifests.py, the Argo steps) set `readOnlyRootFilesystem` and give the
code one writable emptyDir at /tmp, which is also HOME and TMPDIR. Here a real training job
and a prediction job (master, parameter server and worker processes) run in a private mount
namespace where / is read-only and only a scratch directory (HOME and TMPDIR) and the output
directory (the pod's output volume) are writable: whatever the code writes elsewhere fails
the job.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _read_only_root_works() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        [unshare, "-m", "sh", "-c", "mount -o remount,bind,ro / && ! touch /.ro-probe"],
        capture_output=True,
    )
    return probe.returncode == 0


def _run_read_only(argv: list[str], writable: list[Path], scratch: Path) -> str:
    """`argv` in a mount namespace of its own with / read-only, `writable` read-write."""
    binds = [
        f"mount --bind {shlex.quote(str(d))} {shlex.quote(str(d))} && "
        f"mount -o remount,bind,rw {shlex.quote(str(d))}"
        for d in (scratch, *writable)
    ]
    script = " && ".join(["mount -o remount,bind,ro /", *binds, f"exec {shlex.join(argv)}"])
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
    )
    assert done.returncode == 0, f"{shlex.join(argv)}:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout + done.stderr


@pytest.mark.skipif(not _read_only_root_works(), reason="needs root and mount namespaces")
def test_train_and_predict_with_a_read_only_root_filesystem(tmp_path):
    elasticdl = [sys.executable, "-P", "-m", "elasticdl"]
    data, out, scratch = tmp_path / "data", tmp_path / "out", tmp_path / "scratch"
    out.mkdir()
    scratch.mkdir()
    subprocess.run(
        [*elasticdl, "data", "gen", "regression", "--output", str(data), "--num_records", "600",
         "--records_per_file", "300"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    model = out / "model"
    _run_read_only(
        [*elasticdl, "train", "--model_def", "regressor.DNN", "--data", str(data),
         "--output", str(model), "--num_workers", "1", "--records_per_task", "300"],
        [out], scratch,
    )  # fmt: skip
    report = json.loads((model / "job_report.json").read_text())
    assert report["status"] == "succeeded" and report["records"]["trained"] == 600
    printed = _run_read_only(
        [*elasticdl, "predict", "--data", str(data), "--trained_model", str(model),
         "--output", str(out / "predictions"), "--num_workers", "1"],
        [out], scratch,
    )  # fmt: skip
    assert "600 prediction row(s)" in printed
