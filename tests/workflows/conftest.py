"""Shared pieces of the pipeline tests: schema location, fake job steps, sample values."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

SCHEMAS = Path(__file__).parent.parent / "data" / "argo-schemas"
GOLDEN = Path(__file__).parent.parent / "data" / "golden"

TRAIN_VALUES = {
    "model_def": "regressor.DNN",
    "params": "hidden_units=[10, 100, 20, 5], learning_rate=0.01",
    "data": "gs://elasticdl-demo/employee/*.recordio",
    "output": "gs://elasticdl-demo/models/salary",
    "zoo_context": "gs://elasticdl-demo/zoo/context.tar.gz",
    "image_repository": "gcr.io/elasticdl-demo/zoo",
}
PREDICT_VALUES = {
    "data": "gs://elasticdl-demo/testdata/*.recordio",
    "trained_model": "gs://elasticdl-demo/models/salary",
    "output": "gs://elasticdl-demo/predictions/salary",
}


def write_model(directory: str, model_def: str = "regressor.DNN", image: str = "") -> None:
    """A minimal published model directory: trained_model.pb (+ a params file name)."""
    from elasticdl.proto import elasticdl_pb2 as pb

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / "params.npz").write_bytes(b"")
    trained = pb.TrainedModel(
        model_def=model_def,
        params_filename="params.npz",
        model_version=7,
        docker_commit_id=image,
        created_time="2026-01-01T00:00:00Z",
    )
    trained.metrics["mse"] = 0.25
    (path / "trained_model.pb").write_bytes(trained.SerializeToString())


class FakeJobs:
    """Stand-ins for the two elastic-job steps (real TensorFlow jobs take a minute): they parse
    the real step's flags with its own `add_arguments` and produce what the real job would."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def train_module(self) -> types.ModuleType:
        from elasticdl.steps import train

        module = types.ModuleType("fake_train_step")
        module.__dict__.update({k: v for k, v in vars(train).items() if not k.startswith("__")})

        def run_from_args(args: Any) -> Any:
            self.calls.append(("train", args))
            init = ""
            if args.init_from_latest:
                init = train.checkpoint_dir_from_latest(args.init_from_latest)
            write_model(args.output)
            (Path(args.output) / "checkpoints" / "version-1").mkdir(parents=True)
            return types.SimpleNamespace(succeeded=True, output=args.output, init=init)

        module.run_from_args = run_from_args
        return module

    def predict_module(self) -> types.ModuleType:
        from elasticdl.steps import predict

        module = types.ModuleType("fake_predict_step")
        module.__dict__.update({k: v for k, v in vars(predict).items() if not k.startswith("__")})

        def run_from_args(args: Any) -> Any:
            import numpy as np

            from elasticdl.runtime.data.planner import count_files
            from elasticdl.runtime.data.recordio import read_records
            from elasticdl.runtime.prediction_output import part_name, recordio_part, write_part

            self.calls.append(("predict", args))
            kept = args.keep_columns
            if kept == "*":
                kept = ",".join(predict.schema_columns(args.data))
            kept_list = [c for c in kept.split(",") if c]
            for index, (url, count) in enumerate(count_files(args.data)):
                records = list(read_records(url, 0, count))
                values = np.arange(count, dtype=np.float32).reshape(count, 1) * 10.0
                data = recordio_part(records, kept_list, {"prediction": values})
                write_part(args.output, part_name(index, 0, count, "recordio"), data)
            return types.SimpleNamespace(succeeded=True, output=args.output)

        module.run_from_args = run_from_args
        return module


@pytest.fixture
def fake_jobs(monkeypatch: pytest.MonkeyPatch) -> FakeJobs:
    """Replace the train and predict step modules (the elastic jobs) by fast fakes."""
    jobs = FakeJobs()
    monkeypatch.setitem(sys.modules, "elasticdl.steps.train", jobs.train_module())
    monkeypatch.setitem(sys.modules, "elasticdl.steps.predict", jobs.predict_module())
    return jobs


@pytest.fixture
def hr_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small SQLite HR database of its own: tables employee and testdata."""
    from elasticdl.runtime.data.employees import create_sample_database

    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'hr.db'}"
    create_sample_database(url, employees=60, testdata=20)
    return url


@pytest.fixture
def train_values() -> dict[str, str]:
    return dict(TRAIN_VALUES)


@pytest.fixture
def predict_values() -> dict[str, str]:
    return dict(PREDICT_VALUES)


@pytest.fixture
def schemas() -> Path:
    return SCHEMAS


@pytest.fixture
def model_writer() -> Any:
    return write_model
