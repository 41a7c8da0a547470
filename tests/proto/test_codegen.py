"""The committed generated code must match proto/elasticdl.proto."""

import subprocess
import sys
from pathlib import Path

from elasticdl.proto import elasticdl_pb2

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_matches_proto(tmp_path):
    # protoc runs in its own process: in a process that has loaded TensorFlow it can crash.
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    generated = sorted(tmp_path.glob("elasticdl_pb2*"))
    assert len(generated) == 3
    for fresh in generated:
        committed = ROOT / "proto" / fresh.name
        assert committed.read_text() == fresh.read_text(), (
            f"{committed} is stale: run `python scripts/gen_proto.py` and commit the result"
        )


def test_trained_model_keeps_seed_field_numbers():
    fields = elasticdl_pb2.TrainedModel.DESCRIPTOR.fields_by_name
    expected = {
        "docker_commit_id": 1,
        "model_def": 2,
        "model_def_params": 3,
        "params_filename": 4,
        "input_function": 5,
        "loss": 6,
        "optimizer": 7,
    }
    assert {name: fields[name].number for name in expected} == expected
    assert all(f.number >= 8 for name, f in fields.items() if name not in expected)


def test_services_and_round_trip():
    services = elasticdl_pb2.DESCRIPTOR.services_by_name
    assert set(services["Master"].methods_by_name) == {
        "get_task",
        "report_progress",
        "report_task_result",
        "finish_task",
        "get_ps_addresses",
        "report_evaluation_metrics",
        "report_version",
        "scale_workers",
    }
    assert {"push_model", "pull_dense_parameters", "push_gradients"} <= set(
        services["ParameterServer"].methods_by_name
    )
    model = elasticdl_pb2.TrainedModel(model_def="regressor.DNN", metrics={"mse": 0.25})
    assert elasticdl_pb2.TrainedModel.FromString(model.SerializeToString()) == model
