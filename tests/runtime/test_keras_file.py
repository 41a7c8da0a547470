"""`model.keras` beside the SavedModel: written when the model can be serialised, loaded back
and checked; plain Keras (a process that never imports elasticdl) loads it and predicts the
same; otherwise no file, and the reason. (A whole job writing it: tests/test_readme.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import keras
import numpy as np

from elasticdl.runtime.master.export import KERAS_FILE, save_keras_file

PLAIN_KERAS = """
import json, sys
import keras, numpy as np
model = keras.saving.load_model(sys.argv[1])
features = np.asarray(json.loads(sys.argv[2]), dtype=np.float32)
print(json.dumps(model.predict(features, verbose=0).tolist()))
assert "elasticdl" not in sys.modules
"""


def _functional() -> keras.Model:
    inputs = keras.Input(shape=(3,), name="features")
    hidden = keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(1, name="out")(hidden))


def test_a_functional_model_is_written_and_plain_keras_predicts_the_same(tmp_path):
    model = _functional()
    features = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    path = tmp_path / KERAS_FILE
    assert save_keras_file(model, features, path) == ""
    done = subprocess.run(
        [sys.executable, "-P", "-c", PLAIN_KERAS, str(path), json.dumps(features.tolist())],
        capture_output=True,
        text=True,
        timeout=180,
        env={"PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2", "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reloaded = np.asarray(json.loads(done.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(reloaded, model(features).numpy(), rtol=1e-5, atol=1e-6)


class _NoConfig(keras.Model):
    """A subclassed model whose constructor takes an argument but which has no get_config:
    Keras cannot rebuild it."""

    def __init__(self, units: int) -> None:
        super().__init__()
        self.dense = keras.layers.Dense(units)

    def call(self, inputs):
        return self.dense(inputs)


def test_a_model_keras_cannot_rebuild_leaves_no_file_and_says_why(tmp_path):
    model = _NoConfig(2)
    features = np.ones((2, 3), np.float32)
    model(features)
    path = tmp_path / KERAS_FILE
    why = save_keras_file(model, features, path)
    assert why.startswith("the model cannot be saved as a Keras file: ")
    assert "\n" not in why and not path.exists()
