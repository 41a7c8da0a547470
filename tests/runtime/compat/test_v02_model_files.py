"""Model files written for ElasticDL v0.2 train unchanged: real jobs of PS and worker processes.

* `v02_functional`: callbacks (a learning rate by model version, Keras TensorBoard,
  SavedModelExporter), a PredictionOutputsProcessor on the ODPS fallback path, the v0.2
  imports; trains with 2 workers and 2 PS to a low error, then predicts;
* `v02_reader`: a `custom_data_reader` whose reader the workers read every task through;
* `v02_steps`: MaxStepsStopping, and a learning rate of 0 from version 4: the model stops
  moving at version 4 (checkpoints every 4 versions show it) and training stops at max_steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from job_checks import assert_report_valid
from v02_zoo import COMMON

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.ps import checkpoint

pytestmark = pytest.mark.slow


FUNCTIONAL = (
    COMMON
    + """
from elasticdl.python.data.odps_io import ODPSWriter, is_odps_configured
from elasticdl.python.elasticdl.callbacks import LearningRateScheduler, SavedModelExporter
from elasticdl.python.worker.prediction_outputs_processor import (
    BasePredictionOutputsProcessor,
)


def callbacks():
    def _schedule(model_version):
        return 0.05 if model_version < 40 else 0.02

    return [
        LearningRateScheduler(_schedule),
        SavedModelExporter(None, None, None),
        tf.keras.callbacks.TensorBoard(log_dir=os.environ["V02_TENSORBOARD"]),
    ]


class PredictionOutputsProcessor(BasePredictionOutputsProcessor):
    def __init__(self):
        if is_odps_configured():
            self.odps_writer = ODPSWriter(
                os.environ[MaxComputeConfig.PROJECT_NAME],
                os.environ[MaxComputeConfig.ACCESS_ID],
                os.environ[MaxComputeConfig.ACCESS_KEY],
                os.environ[MaxComputeConfig.ENDPOINT],
                "v02_prediction_outputs",
                columns=["f0"],
                column_types=["double"],
            )
        else:
            self.odps_writer = None

    def process(self, predictions, worker_id):
        values = predictions.numpy()
        logger.info("worker %d: %d predictions", worker_id, len(values))
        path = os.path.join(os.environ["V02_PROCESSED"], "worker-%d.log" % worker_id)
        with open(path, "a") as out:
            out.write("%d\\n" % len(values))
"""
)

READER = (
    COMMON
    + """
from elasticdl.python.data.reader.recordio_reader import RecordIODataReader


class CustomDataReader(RecordIODataReader):
    def read_records(self, task):
        with open(os.environ["V02_READS"], "a") as out:
            out.write("%s %d %d\\n" % (task.shard.name, task.shard.start, task.shard.end))
        yield from RecordIODataReader.read_records(self, task)


def custom_data_reader(data_origin, records_per_task=None, **kwargs):
    return CustomDataReader(data_dir=data_origin)
"""
)

STEPS = (
    COMMON
    + """
from elasticdl.python.elasticdl.callbacks import LearningRateScheduler, MaxStepsStopping


def callbacks():
    return [
        LearningRateScheduler(lambda model_version: 0.05 if model_version < 4 else 0.0),
        MaxStepsStopping(max_steps=10),
    ]
"""
)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("zoo")
    for name, text in (("v02_functional", FUNCTIONAL), ("v02_reader", READER)):
        (root / f"{name}.py").write_text(text)
    (root / "v02_steps.py").write_text(STEPS)
    return root


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("data")
    gen.generate("regression", str(out / "train"), 2000, records_per_file=1000)
    gen.generate("regression", str(out / "valid"), 400, records_per_file=400, seed=7)
    return {"train": out / "train", "valid": out / "valid"}


def report_of(output: Path) -> dict:
    report = json.loads((output / "job_report.json").read_text())
    assert_report_valid(report)
    return report


def test_a_v02_functional_model_with_callbacks_trains_on_2_ps_and_predicts(
    zoo, data, tmp_path, monkeypatch
):
    for name in ("MAXCOMPUTE_PROJECT", "MAXCOMPUTE_AK", "MAXCOMPUTE_SK"):
        monkeypatch.delenv(name, raising=False)
    board = tmp_path / "board"
    processed = tmp_path / "processed"
    processed.mkdir()
    monkeypatch.setenv("V02_TENSORBOARD", str(board))
    monkeypatch.setenv("V02_PROCESSED", str(processed))
    output = tmp_path / "model"
    result = elasticdl.train(
        model_zoo=str(zoo),
        model_def="v02_functional.custom_model",
        data=str(data["train"]),
        validation_data=str(data["valid"]),
        output=str(output),
        num_workers=2,
        num_ps=2,
        minibatch_size=32,
        records_per_task=250,
    )
    assert result.succeeded, result.error
    report = report_of(output)
    assert report["records"]["trained"] == 2000
    assert report["metrics"]["mse"] < 0.3  # the label's variance is about 24
    assert list(board.glob("events.out.tfevents.*")), "the TensorBoard log dir has no events"
    assert (output / "saved_model").is_dir()

    predicted = elasticdl.predict(
        data=str(data["valid"]),
        trained_model=str(output),
        output=str(tmp_path / "predictions"),
        num_workers=1,
        records_per_task=100,
    )
    assert predicted.status == "succeeded", predicted
    counts = [int(n) for log in processed.glob("worker-*.log") for n in log.read_text().split()]
    assert sum(counts) == 400 and len(counts) == 4  # one call per task of 100 records


def test_a_custom_data_reader_reads_every_task(zoo, data, tmp_path, monkeypatch):
    reads = tmp_path / "reads.log"
    monkeypatch.setenv("V02_READS", str(reads))
    output = tmp_path / "model"
    result = elasticdl.train(
        model_zoo=str(zoo),
        model_def="v02_reader.custom_model",
        data=str(data["train"]),
        validation_data=str(data["valid"]),
        output=str(output),
        num_workers=1,
        num_ps=1,
        minibatch_size=32,
        records_per_task=500,
        num_epochs=2,
    )
    assert result.succeeded, result.error
    report = report_of(output)
    assert report["metrics"]["mse"] < 0.3
    ranges = [line.split() for line in reads.read_text().splitlines()]
    trained = sum(int(end) - int(start) for name, start, end in ranges if "train" in name)
    assert trained >= 4000  # every training task (and evaluation tasks: the valid files)
    assert any("valid" in name for name, _, _ in ranges)


def test_max_steps_stops_training_and_a_zero_rate_freezes_the_model(zoo, data, tmp_path):
    output = tmp_path / "model"
    checkpoints = tmp_path / "checkpoints"
    result = elasticdl.train(
        model_zoo=str(zoo),
        model_def="v02_steps.custom_model",
        data=str(data["train"]),
        output=str(output),
        num_workers=1,
        num_ps=1,
        minibatch_size=32,
        records_per_task=64,
        checkpoint_steps=4,
        keep_checkpoint_max=10,
        checkpoint_dir=str(checkpoints),
    )
    assert result.succeeded, result.error
    report = report_of(output)
    # One worker, two minibatches a task: no task is handed out once the master saw version
    # 10 (a worker reports the version it pulled, one behind the PS), so at most 2 + 1 more.
    assert 10 <= report["model_version"] <= 13
    assert report["records"]["trained"] < report["records"]["planned"]
    stopped = [e for e in report["tasks"]["events"] if e["kind"] == "training_stopped"]
    assert len(stopped) == 1 and "MaxStepsStopping" in stopped[0]["detail"]

    final = dict(np.load(output / "params.npz"))
    at_4 = checkpoint.load_all(str(checkpoints), version=4).trainable
    at_8 = checkpoint.load_all(str(checkpoints), version=8).trainable
    for name, value in at_4.items():
        np.testing.assert_array_equal(final[name], value)
        np.testing.assert_array_equal(at_8[name], value)
