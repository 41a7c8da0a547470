"""Prediction and evaluation jobs on the local engine: real worker processes, a real model."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from job_checks import assert_report_valid
from tiny_zoo import tiny_zoo

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.data.recordio import read_records, write_records
from elasticdl.runtime.outputs import OutputError
from elasticdl.runtime.prediction_output import read_rows
from elasticdl.runtime.trained_model import TrainedModelError

pytestmark = pytest.mark.slow

FEATURES = [f"x{i}" for i in range(8)]

# A small functions-style zoo. Its PredictionOutputsProcessor logs every call and, when
# TINY_PROCESSOR_DIR is set, SIGKILLs the first worker that calls it: after that worker wrote
# its part, before it reported the task done. The retried task must replace that part.
ZOO = tiny_zoo(
    textwrap.dedent(
        """
        class PredictionOutputsProcessor:
            def process(self, predictions, worker_id, task=None):
                directory = os.environ.get("TINY_PROCESSOR_DIR")
                if not directory:
                    return
                with open(os.path.join(directory, "calls.log"), "a") as log:
                    log.write(f"{worker_id} {task['part']} {len(predictions)}\\n")
                try:
                    os.close(os.open(os.path.join(directory, "killed"), os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    return
                os.kill(os.getpid(), signal.SIGKILL)
        """
    )
)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("zoo")
    (root / "tiny.py").write_text(ZOO)
    return root


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("regression")
    # Two files of unequal size, so the part names cover two file indexes.
    gen.generate("regression", str(out), 1500, records_per_file=1000)
    return out


@pytest.fixture(scope="module")
def model(tmp_path_factory, zoo, data) -> Path:
    output = tmp_path_factory.mktemp("trained") / "model"
    result = elasticdl.train(
        model_zoo=str(zoo),
        model_def="tiny.custom_model",
        data=str(data),
        output=str(output),
        num_workers=1,
        minibatch_size=32,
        records_per_task=500,
    )
    assert result.succeeded, result.error
    return output


def all_records(data: Path) -> list[bytes]:
    return [r for f in sorted(data.glob("*.recordio")) for r in read_records(str(f))]


def saved_model_predictions(model: Path, records: list[bytes]) -> np.ndarray:
    """Single-process predictions from the exported SavedModel (not the worker's code path)."""
    spec = {name: tf.io.FixedLenFeature([1], tf.float32) for name in FEATURES}
    parsed = tf.io.parse_example(tf.constant(records), spec)
    x = tf.concat([parsed[name] for name in FEATURES], axis=1)
    loaded = tf.saved_model.load(str(model / "saved_model"))  # keep: serve uses its variables
    return loaded.serve(x).numpy().reshape(-1)


def test_prediction_with_a_killed_worker_writes_every_row_once(tmp_path, monkeypatch, model, data):
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv("TINY_PROCESSOR_DIR", str(calls))
    output = tmp_path / "predictions"
    result = elasticdl.predict(
        data=str(data),
        trained_model=str(model),
        output=str(output),
        num_workers=2,
        records_per_task=100,
        minibatch_size=64,
    )
    assert result.succeeded, result.error
    report = json.loads((output / "job_report.json").read_text())
    assert_report_valid(report)
    context = json.dumps({k: report[k] for k in ("workers", "tasks", "events")})[:3000]
    assert report["workers"]["failed"] == 1 and report["workers"]["relaunched"] == 1, context
    assert report["tasks"]["requeued"] == 1, context
    # The killed worker wrote its part, then died: the retry wrote the same part again.
    logged = [line.split() for line in (calls / "calls.log").read_text().splitlines()]
    parts_logged = [part for _, part, _ in logged]
    assert len(parts_logged) == 16 and len(set(parts_logged)) == 15, logged

    parts = sorted(output.glob("part-*.recordio"))
    assert len(parts) == 15
    rows = [row for part in parts for row in read_rows(str(part), "recordio")]
    assert report["records"] == {"input": 1500, "written": 1500}
    ids = [row["id"][0] for row in rows]
    assert ids == list(range(1500)), "each input row once, in input order"
    assert (output / "_SUCCESS").exists()
    assert not list(tmp_path.glob(".predictions.staging-*")), "staging renamed into place"

    predicted = np.array([row["prediction"][0] for row in rows], dtype=np.float32)
    expected = saved_model_predictions(model, all_records(data))
    np.testing.assert_allclose(predicted, expected, rtol=1e-5, atol=1e-5)


def test_csv_output_with_kept_columns(tmp_path, model, data):
    output = tmp_path / "csv"
    result = elasticdl.predict(
        data=str(data),
        trained_model=str(model),
        output=str(output),
        output_format="csv",
        keep_columns="id,x0",
        num_workers=1,
        records_per_task=1000,
    )
    assert result.succeeded, result.error
    parts = sorted(output.glob("part-*.csv"))
    assert [p.name for p in parts] == [
        "part-00000-0000000000-0000001000.csv",
        "part-00001-0000000000-0000000500.csv",
    ]
    rows = [row for part in parts for row in read_rows(str(part), "csv")]
    assert list(rows[0]) == ["id", "x0", "prediction"]
    assert [int(r["id"]) for r in rows] == list(range(1500))
    records = all_records(data)
    x0 = tf.io.parse_example(tf.constant(records), {"x0": tf.io.FixedLenFeature([1], tf.float32)})[
        "x0"
    ].numpy()
    np.testing.assert_array_equal([np.float32(r["x0"]) for r in rows], x0.reshape(-1))
    np.testing.assert_allclose(
        [float(r["prediction"]) for r in rows],
        saved_model_predictions(model, records),
        rtol=1e-5,
        atol=1e-5,
    )


def test_evaluate_merges_worker_metrics_into_whole_data_metrics(tmp_path, model, data):
    result = elasticdl.evaluate(
        data=str(data), trained_model=str(model), num_workers=2, records_per_task=300
    )
    assert result.succeeded, result.error
    records = all_records(data)
    labels = tf.io.parse_example(
        tf.constant(records), {"label": tf.io.FixedLenFeature([1], tf.float32)}
    )["label"].numpy()
    predicted = saved_model_predictions(model, records).reshape(-1, 1)
    assert result.metrics["mse"] == pytest.approx(float(np.mean((predicted - labels) ** 2)), 1e-4)
    assert result.metrics["mae"] == pytest.approx(float(np.mean(np.abs(predicted - labels))), 1e-4)
    assert result.report["metrics"] == result.metrics
    assert_report_valid(result.report)


def write_table(path: Path, columns: list[str], rows: int = 10) -> Path:
    examples = []
    for i in range(rows):
        example = tf.train.Example()
        for name in columns:
            example.features.feature[name].float_list.value.append(float(i))
        examples.append(example.SerializeToString())
    write_records(str(path), examples)
    return path


def test_bad_inputs_are_clear_and_leave_no_output(tmp_path, model, data):
    output = tmp_path / "out"
    common = dict(data=str(data), output=str(output), num_workers=1)
    with pytest.raises(TrainedModelError, match="does not exist"):
        elasticdl.predict(trained_model=str(tmp_path / "nope"), **common)
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "params.npz").write_bytes(b"")
    with pytest.raises(TrainedModelError, match="has no trained_model.pb"):
        elasticdl.predict(trained_model=str(unfinished), **common)
    (unfinished / "trained_model.pb").write_bytes(b"not a protobuf \xff\xff")
    with pytest.raises(TrainedModelError, match="is corrupt"):
        elasticdl.predict(trained_model=str(unfinished), **common)

    # Prediction data without a feature the model was trained on, and data without labels.
    partial = write_table(tmp_path / "partial.recordio", FEATURES[:-1])
    with pytest.raises(ValueError, match=r"lacks feature\(s\) the model was trained on: 'x7'"):
        elasticdl.predict(trained_model=str(model), **{**common, "data": str(partial)})
    unlabelled = write_table(tmp_path / "unlabelled.recordio", FEATURES)
    with pytest.raises(ValueError, match="no label column 'label'"):
        elasticdl.evaluate(trained_model=str(model), data=str(unlabelled))
    with pytest.raises(ValueError, match="--keep_columns nope: not in the data"):
        elasticdl.predict(trained_model=str(model), keep_columns="nope", **common)
    with pytest.raises(ValueError, match="--output_format"):
        elasticdl.predict(trained_model=str(model), output_format="parquet", **common)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("x")
    with pytest.raises(OutputError, match="already holds files"):
        elasticdl.predict(trained_model=str(model), **{**common, "output": str(taken)})
    assert not output.exists()
    assert not list(tmp_path.glob(".out.staging-*"))


def test_prediction_from_and_to_gcs(model, data):
    """gs:// model and output (a GCS emulator on 127.0.0.1): parts, report, then _SUCCESS."""
    from gcs_emulator import gcs_emulator

    with gcs_emulator(bucket="predict-test") as gcs:
        gcs.fs.put(str(model), f"{gcs.bucket}/model", recursive=True)
        result = elasticdl.predict(
            data=str(data),
            trained_model=gcs.url("model"),
            output=gcs.url("predictions"),
            num_workers=1,
            records_per_task=500,
        )
        assert result.succeeded, result.error
        names = sorted(p.rsplit("/", 1)[-1] for p in gcs.fs.ls(f"{gcs.bucket}/predictions"))
        assert names == [
            "_SUCCESS",
            "job_report.json",
            "part-00000-0000000000-0000000500.recordio",
            "part-00000-0000000500-0000001000.recordio",
            "part-00001-0000000000-0000000500.recordio",
        ]
        rows = read_rows(
            gcs.url("predictions/part-00001-0000000000-0000000500.recordio"), "recordio"
        )
        assert [r["id"][0] for r in rows] == list(range(1000, 1500))


def test_a_model_zoo_that_changed_since_training_is_refused(tmp_path, model, data):
    changed = tmp_path / "changed_zoo"
    changed.mkdir()
    (changed / "tiny.py").write_text(ZOO.replace("Dense(8,", "Dense(16,"))
    with pytest.raises(TrainedModelError, match="parameters do not fit the model"):
        elasticdl.predict(
            data=str(data),
            trained_model=str(model),
            output=str(tmp_path / "out"),
            model_zoo=str(changed),
        )
    assert not (tmp_path / "out").exists()
