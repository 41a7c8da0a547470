"""A job process imports TensorFlow and Keras without scikit-learn (job_config.py's
`configure_tensorflow`), and the worker and PS entry points import TensorFlow nowhere else
first: Keras 3 would import scikit-learn and with it scipy.stats (0.5 s of every process start)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

PROBE = """
import sys
import elasticdl.runtime.ps.main, elasticdl.runtime.worker.main
assert "tensorflow" not in sys.modules, "an entry point imported TensorFlow at import time"
from elasticdl.runtime.job_config import JobConfig, configure_tensorflow
configure_tensorflow(JobConfig("probe", "m.M", "/nonexistent"))
import keras
keras.layers.Dense(1)
print("sklearn" in sys.modules, "scipy.stats" in sys.modules)
import sklearn.base  # a model zoo may still import it
print(type(sklearn.base.BaseEstimator).__name__)
"""


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="needs scikit-learn")
def test_a_job_process_starts_without_scikit_learn_and_can_still_import_it():
    done = subprocess.run(
        [sys.executable, "-P", "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False", "type"]
