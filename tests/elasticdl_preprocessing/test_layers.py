"""`elasticdl_preprocessing`'s layers and feature column, in both Kerases.

The expectations live in tests/support/compat_checks.py (one function per layer, from the
layer's docstring and ElasticDL's own tests of it). Keras 3: each check in this process.
Keras 2: every check, with the Keras-2-only ones (feature columns in `DenseFeatures`,
ElasticDL's `Embedding` among TF ops on Keras tensors, a LearningRateScheduler in tf_keras's
`fit`), in one child process started with `TF_USE_LEGACY_KERAS=1`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import compat_checks
import pytest

SUPPORT = Path(compat_checks.__file__).parent


@pytest.mark.parametrize("name", sorted(compat_checks.CHECKS))
def test_in_keras3(name):
    compat_checks.CHECKS[name]()


def test_every_check_in_keras2():
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "PYTHONPATH": str(SUPPORT)}
    done = subprocess.run(
        [sys.executable, "-P", "-m", "compat_checks"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    failed = [line for line in lines if line.startswith("FAIL")]
    assert not failed, "\n".join(failed) + "\n" + done.stderr[-3000:]
    expected = sorted({**compat_checks.CHECKS, **compat_checks.KERAS2_CHECKS})
    assert sorted(line.split()[1] for line in lines) == expected, done.stdout
    assert done.returncode == 0, done.stderr[-3000:]
