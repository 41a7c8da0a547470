"""The built-in mnist models, in every style, train a step on `elasticdl data gen` output."""

from __future__ import annotations

import numpy as np
import pytest
from zoo_steps import one_gradient_step

from elasticdl.runtime.data.generate import generate
from elasticdl.runtime.data.planner import plan_tasks
from elasticdl.runtime.data.recordio import read_records
from elasticdl.runtime.model_spec import load_model_spec


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    out = tmp_path_factory.mktemp("digits")
    files = generate("digits", str(out), 64, records_per_file=40)
    return out, files


@pytest.mark.parametrize(
    ("model_def", "style"),
    [
        ("mnist.mnist_functional_api.custom_model", "functions"),
        ("mnist.mnist_subclass.CustomModel", "functions"),
        ("mnist.mnist_spec.MnistSpec", "spec"),
        ("mnist.mnist_v02.custom_model", "functions"),
    ],
)
def test_mnist_styles_train_one_step_on_generated_digits(digits, model_def, style):
    _, files = digits
    spec = load_model_spec(model_def, None, "lr=0.05")
    assert spec.style == style
    assert spec.zoo.is_builtin
    records = list(read_records(files[0], 0, 16))
    loss_before, loss_after, predictions = one_gradient_step(spec, records, batch_size=16)
    assert predictions.shape == (16, 10)
    assert np.isfinite(loss_before) and np.isfinite(loss_after)


def test_planner_covers_generated_files(digits):
    out, files = digits
    shards = plan_tasks(str(out), 16)
    assert {s.file for s in shards} == set(files)
    assert sum(s.num_records for s in shards) == 64
    assert max(s.num_records for s in shards) == 16
