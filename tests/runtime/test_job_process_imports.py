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


MASTER = """
import sys
{mark}
from elasticdl.runtime.master.options import TrainOptions
from elasticdl.runtime.master.training_job import TrainingJob
options = TrainOptions(model_def="regressor.DNN", training_data={data!r}, output={out!r},
                       params="no_such_param=1")
try:
    TrainingJob(options).run()
except ValueError as error:
    print("refused:", "no_such_param" in str(error))
print("sklearn" in sys.modules)
"""


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="needs scikit-learn")
@pytest.mark.parametrize(
    ("mark", "sklearn"),
    [
        ("from elasticdl.runtime import keras_mode; keras_mode.mark_own_process()", "False"),
        ("", "True"),  # a program of the user's: Keras as it imports itself
    ],
)
def test_the_command_line_master_imports_keras_without_scikit_learn(tmp_path, mark, sklearn):
    from elasticdl.runtime.data import generate

    generate.generate("regression", str(tmp_path / "data"), 8)
    program = MASTER.format(mark=mark, data=str(tmp_path / "data"), out=str(tmp_path / "out"))
    done = subprocess.run(
        [sys.executable, "-P", "-c", program], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-3:-1] == ["refused: True", sklearn], done.stdout
