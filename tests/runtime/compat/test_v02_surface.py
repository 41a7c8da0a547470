"""ElasticDL v0.2's module surface and what `callbacks()` asks of a job (no processes)."""

from __future__ import annotations

import importlib

import keras
import numpy as np
import pytest
from v02_zoo import COMMON

from elasticdl.runtime.callbacks import CallbackError, EarlyStopper, EarlyStopping, job_callbacks
from elasticdl.runtime.data.recordio import read_records, write_records
from elasticdl.runtime.data.shards import plan_shards
from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig, TaskType
from elasticdl.runtime.ps.learning_rate import ScheduledLearningRate
from elasticdl.runtime.ps.parameters import Parameters

V02_NAMES = {
    "elasticdl.python.common.constants": [
        "Mode",
        "MaxComputeConfig",
        "ODPSConfig",
        "JobType",
        "MetricsDictKey",
        "ReaderType",
        "DistributionStrategy",
        "SaveModelConfig",
        "GRPC",
    ],
    "elasticdl.python.common.log_utils": ["default_logger", "get_logger"],
    "elasticdl.python.elasticdl.callbacks": [
        "LearningRateScheduler",
        "MaxStepsStopping",
        "SavedModelExporter",
    ],
    "elasticdl.callbacks": ["LearningRateScheduler", "MaxStepsStopping", "SavedModelExporter"],
    "elasticdl.python.worker.prediction_outputs_processor": ["BasePredictionOutputsProcessor"],
    "elasticdl.python.data.odps_io": ["ODPSWriter", "ODPSReader", "is_odps_configured"],
    "elasticdl.python.data.reader.recordio_reader": ["RecordIODataReader"],
    "elasticdl.python.data.reader.data_reader": [
        "AbstractDataReader",
        "Metadata",
        "check_required_kwargs",
    ],
    "elasticdl.python.elasticdl.layers.embedding": ["Embedding"],
    "elasticdl.python.elasticdl.feature_column.feature_column": ["embedding_column"],
}


@pytest.mark.parametrize("module", sorted(V02_NAMES))
def test_every_v02_module_path_imports_with_its_names(module):
    imported = importlib.import_module(module)
    missing = [name for name in V02_NAMES[module] if not hasattr(imported, name)]
    assert missing == []


def test_constants_keep_v02_values():
    from elasticdl.python.common.constants import MaxComputeConfig, Mode

    assert Mode.TRAINING == "training" and Mode.PREDICTION == "prediction"
    assert (MaxComputeConfig.PROJECT_NAME, MaxComputeConfig.ACCESS_ID) == (
        "MAXCOMPUTE_PROJECT",
        "MAXCOMPUTE_AK",
    )


def test_odps_is_configured_only_with_its_environment_and_is_refused_clearly(monkeypatch):
    from elasticdl.python.data.odps_io import ODPSUnsupportedError, ODPSWriter, is_odps_configured

    for name in ("MAXCOMPUTE_PROJECT", "MAXCOMPUTE_AK", "MAXCOMPUTE_SK"):
        monkeypatch.delenv(name, raising=False)
    assert not is_odps_configured()
    monkeypatch.setenv("MAXCOMPUTE_PROJECT", "p")
    monkeypatch.setenv("MAXCOMPUTE_AK", "a")
    assert not is_odps_configured()
    monkeypatch.setenv("MAXCOMPUTE_SK", "s")
    assert is_odps_configured()
    with pytest.raises(ODPSUnsupportedError, match="ODPSWriter: MaxCompute .* not supported"):
        ODPSWriter("p", "a", "s", "e", "table", columns=["f0"], column_types=["double"])


def test_base_processor_requires_process():
    from elasticdl.python.worker.prediction_outputs_processor import (
        BasePredictionOutputsProcessor,
    )

    class Incomplete(BasePredictionOutputsProcessor):
        pass

    with pytest.raises(TypeError):
        Incomplete()


@pytest.fixture
def recordio_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for i, count in enumerate((5, 3)):
        write_records(str(folder / f"part-{i}.recordio"), [b"%d-%d" % (i, n) for n in range(count)])
    return folder


@pytest.mark.parametrize("location", ["dir", "glob", "file"])
def test_recordio_data_reader_reads_a_file_a_directory_or_a_glob(recordio_dir, location):
    from elasticdl.python.data.reader.data_reader import ReaderTask
    from elasticdl.python.data.reader.recordio_reader import RecordIODataReader

    first = str(recordio_dir / "part-0.recordio")
    origin = {"dir": str(recordio_dir), "glob": f"{recordio_dir}/*.recordio", "file": first}
    reader = RecordIODataReader(data_dir=origin[location])
    shards = reader.create_shards()
    expected = {first: (0, 5), str(recordio_dir / "part-1.recordio"): (0, 3)}
    assert shards == ({first: (0, 5)} if location == "file" else expected)
    task = ReaderTask(first, 1, 4)
    assert (task.shard.name, task.shard.start, task.shard.end) == (first, 1, 4)
    assert list(reader.read_records(task)) == list(read_records(first, 1, 4))
    with pytest.raises(ValueError, match="missing: data_dir"):
        RecordIODataReader(path=first)


def test_custom_readers_read_tasks_through_the_model_files_reader(recordio_dir):
    from elasticdl.python.data.reader.recordio_reader import RecordIODataReader
    from elasticdl.runtime.worker.custom_reader import CustomReaders

    class Upper(RecordIODataReader):
        def preprocess_records(self, records):
            return (r.upper() + b"!" for r in records)

    seen = []

    def custom_data_reader(data_origin, records_per_task=None, **kwargs):
        seen.append((data_origin, records_per_task))
        return Upper(data_dir=data_origin)

    readers = CustomReaders(custom_data_reader, 7)
    url = str(recordio_dir / "part-1.recordio")
    assert list(readers.get(url).read(0, 2)) == [b"1-0!", b"1-1!"]
    assert list(readers.get(url).read(2, 3)) == [b"1-2!"]
    assert seen == [(url, 7)]


def test_elasticdl_and_keras_callbacks_are_interpreted():
    from elasticdl.python.elasticdl.callbacks import (
        LearningRateScheduler,
        MaxStepsStopping,
        SavedModelExporter,
    )

    found = job_callbacks(
        [
            LearningRateScheduler(lambda version: 0.1 if version < 10 else 0.01),
            MaxStepsStopping(max_steps=50),
            SavedModelExporter(None, None, None),
            keras.callbacks.EarlyStopping(monitor="val_accuracy", patience=2, min_delta=0.01),
            keras.callbacks.TensorBoard(log_dir="/tmp/tb"),
        ]
    )
    assert found.max_steps == 50 and found.tensorboard_dir == "/tmp/tb"
    assert [found.learning_rate(v, 100, 0.5) for v in (0, 9, 10)] == [0.1, 0.1, 0.01]
    found.check_metrics(["accuracy", "loss"], has_validation=True)
    assert found.early_stopping == EarlyStopping("accuracy", "max", 0.01, 2, None, 0)
    with pytest.raises(CallbackError, match="needs evaluations: pass --validation_data"):
        job_callbacks([keras.callbacks.EarlyStopping()]).check_metrics(["mse"], False)
    with pytest.raises(CallbackError, match="monitors 'val_loss', .* \\(mse\\)"):
        job_callbacks([keras.callbacks.EarlyStopping()]).check_metrics(["mse"], True)


def test_keras_learning_rate_scheduler_is_by_epoch_and_compounds():
    found = job_callbacks([keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5)])
    rates = [found.learning_rate(v, 10, 0.8) for v in (0, 9, 10, 25, 5)]
    assert rates == [0.4, 0.4, 0.2, 0.1, 0.4]
    by_epoch = job_callbacks(
        [keras.callbacks.LearningRateScheduler(lambda epoch: 1.0 / (1 + epoch))]
    )
    assert by_epoch.learning_rate(30, 10, 0.8) == 0.25


@pytest.mark.parametrize(
    "callback, words",
    [
        (keras.callbacks.Callback(), r"keras\.src\.callbacks\.callback\.Callback is not supported"),
        (keras.callbacks.ModelCheckpoint("/tmp/m.keras"), "use --checkpoint_steps"),
        (keras.callbacks.CSVLogger("/tmp/log.csv"), "CSVLogger is not supported"),
        (
            keras.callbacks.EarlyStopping(restore_best_weights=True),
            "restore_best_weights=True. is not supported",
        ),
    ],
)
def test_any_other_callback_is_refused_by_name(callback, words):
    with pytest.raises(CallbackError, match=words) as caught:
        job_callbacks([callback])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "mode, values, stops_after",
    [
        ("min", [1.0, 0.9, 0.9, 0.9], 4),  # patience 2: two rounds without improvement
        ("min", [1.0, 0.9, 0.8, 0.7, 0.6], None),
        ("max", [0.5, 0.6, 0.55, 0.58], 4),
        ("min", [1.0, 0.999, 0.998], 3),  # min_delta 0.01: not an improvement
    ],
)
def test_early_stopper_follows_keras_rule(mode, values, stops_after):
    stopper = EarlyStopper(EarlyStopping("m", mode, 0.01, 2))
    reasons = [stopper.observe({"m": v}) for v in values]
    stopped = [i + 1 for i, r in enumerate(reasons) if r]
    assert (stopped[0] if stopped else None) == stops_after


def test_early_stopper_waits_for_start_from_and_baseline():
    stopper = EarlyStopper(EarlyStopping("m", "min", 0.0, 2, baseline=0.5, start_from=1))
    assert stopper.observe({"m": 9.0}) is None  # round 0 ignored (start_from)
    assert stopper.observe({"m": 0.9}) is None  # better than best, not than the baseline
    assert stopper.observe({"m": 0.8}) == (
        "EarlyStopping: m did not improve for 2 evaluation(s) (best 0.8)"
    )


def test_a_stopped_training_hands_out_no_more_training_tasks():
    config = TaskManagerConfig(records_per_task=10, num_epochs=3, shuffle=False)
    tm = TaskManager(plan_shards([("a", 40)], 10), config)
    first = tm.get(1, 0.0)
    tm.stop_training("MaxStepsStopping: version 5", 1.0)
    assert tm.get(2, 1.0) is None
    assert not tm.finished
    tm.report_progress(1, first.task_id, 4, 1.5)
    assert tm.recover_worker(1, 2.0, cause="killed", detected_at=2.0)  # remainder requeued ...
    assert tm.get(2, 2.0) is None  # ... but not trained again
    assert tm.finished and tm.training_stopped == "MaxStepsStopping: version 5"
    tm.add_tasks(plan_shards([("v", 5)], 10), TaskType.EVALUATION, 5)
    assert tm.get(2, 3.0).type == TaskType.EVALUATION
    assert [e.kind for e in tm.events].count("training_stopped") == 1


def test_scheduled_learning_rate_is_the_one_applied_at_each_version():
    """SGD with lr 0.1 up to version 3, then 0: the parameters stop moving at version 3."""
    initial = {"w": np.ones(3, np.float32)}
    grads = {"w": np.full(3, 1.0, np.float32)}
    params = Parameters(lambda: keras.optimizers.SGD(0.5))
    params.learning_rate_at = ScheduledLearningRate(lambda v, initial: 0.1 if v < 3 else 0.0)
    params.initialize(initial)
    seen = []
    for version in range(6):
        params.push_gradients(grads, version)
        seen.append(float(params.values()["w"][0]))
    np.testing.assert_allclose(seen, [0.9, 0.8, 0.7, 0.7, 0.7, 0.7], rtol=1e-6)
    assert params.version == 6


def test_scheduled_learning_rate_needs_a_numeric_rate():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9)
    params = Parameters(lambda: keras.optimizers.SGD(schedule))
    params.learning_rate_at = ScheduledLearningRate(lambda v, initial: 0.1)
    params.initialize({"w": np.ones(3, np.float32)})
    with pytest.raises(TypeError, match="learning rate is a number"):
        params.push_gradients({"w": np.ones(3, np.float32)}, 0)


def test_early_stopping_ends_training_when_the_evaluations_stop_improving():
    """The master's evaluation rounds (real servicer, task manager and round bookkeeping):
    the second round without improvement (patience 1) ends training; evaluations go on."""
    from elasticdl.runtime.master.events import EventLog
    from elasticdl.runtime.master.servicer import MasterServicer
    from elasticdl.runtime.master.task_state import TaskState
    from elasticdl.runtime.master.training_plugin import Evaluations
    from elasticdl.runtime.model_spec import EvalMetrics

    config = TaskManagerConfig(records_per_task=10, num_epochs=5, shuffle=False)
    tm = TaskManager(plan_shards([("train", 40)], 10), config)
    servicer = MasterServicer(tm, hold_workers=True)
    tasks = TaskState(servicer)
    metrics = EvalMetrics(functions={"mse": lambda labels, predictions: None})
    evaluations = Evaluations(plan_shards([("valid", 5)], 10), metrics, 2, 2, EventLog())
    evaluations.stopper = EarlyStopper(EarlyStopping("mse", "min", 0.0, 1))
    for version, mse in ((2, 1.0), (4, 0.5), (6, 0.5)):
        assert tm.training_stopped == ""
        servicer.stats.model_version = version
        evaluations.on_pass(tasks)  # starts the round of this version
        task = tm.get(1, float(version))
        assert task.type == TaskType.EVALUATION
        servicer.evaluations.report(task.lineage, {"fn/mse": np.array([5 * mse, 5.0])})
        tm.report_result(1, task.task_id, "", float(version))
        evaluations.on_pass(tasks)  # the round is complete: the rule sees mse
    assert (
        tm.training_stopped == "EarlyStopping: mse did not improve for 1 evaluation(s) (best 0.5)"
    )
    assert tm.get(1, 7.0) is None and tm.training_finished


def test_a_job_refuses_an_unsupported_callback_before_starting_anything(tmp_path):
    import elasticdl
    from elasticdl.runtime.data import generate as gen

    zoo = tmp_path / "zoo"
    zoo.mkdir()
    refused = "def callbacks():\n    return [tf.keras.callbacks.ModelCheckpoint('m.keras')]\n"
    (zoo / "refused.py").write_text(f"{COMMON}\n\n{refused}")
    gen.generate("regression", str(tmp_path / "data"), 64)
    with pytest.raises(ValueError) as caught:
        elasticdl.train(
            model_zoo=str(zoo),
            model_def="refused.custom_model",
            data=str(tmp_path / "data"),
            output=str(tmp_path / "out"),
        )
    assert str(caught.value) == (
        "callbacks(): keras.src.callbacks.model_checkpoint.ModelCheckpoint is not supported in "
        "an elastic job; use --checkpoint_steps N (checkpoints on the parameter servers)"
    )
    assert not (tmp_path / "out").exists()
