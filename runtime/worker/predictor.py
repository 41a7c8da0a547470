"""The worker's engine for prediction and evaluation jobs: a trained model, no parameter servers.

The model is rebuilt from the zoo the TrainedModel names and loaded from its parameters once
per process; tasks then run through the same traced pipelines as training (`pipeline.py`).
The `dataset_fn` sees the *training* data's metadata (kept in the TrainedModel), so a table
model parses prediction data with the columns it was trained on, whatever else the
prediction data holds.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import numpy as np
import tensorflow as tf

from elasticdl.mode import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.model_build import build_model
from elasticdl.runtime.trained_model import load_parameters, read_trained_model
from elasticdl.runtime.worker.pipeline import TaskPipelines, evaluation_states

log = logging.getLogger("elasticdl.worker")


class Predictor:
    """One replica of a trained model that predicts (or evaluates) task after task."""

    def __init__(self, config: JobConfig, worker_id: int) -> None:
        self.config = config
        self.worker_id = worker_id
        self._files = read_trained_model(config.trained_model)
        self.model_version = int(self._files.trained.model_version)
        self.instance = config.load_spec().instantiate(context={"worker_id": worker_id})
        self.model = self.instance.model
        self.mode = Mode.EVALUATION if config.job_type == "evaluate" else Mode.PREDICTION
        self._trained_metadata = self._files.input_metadata
        self._metadata: dict[str, DatasetMetadata] = {}
        self._pipelines = TaskPipelines(self.instance.dataset_fn, config.minibatch_size)
        self._eval_metrics: Any = None
        self._processor = _processor_of(self.instance.prediction_outputs_processor)
        self._built = False

        @tf.function(reduce_retracing=True)
        def predict(features: Any) -> Any:
            return self.model(features, training=False)

        self._predict = predict

    def ensure_built(self, records: list[bytes], metadata: DatasetMetadata) -> None:
        if self._built:
            return
        build_model(self.instance, records[:4], self.mode, metadata)
        load_parameters(self.model, self._files.params, self.config.trained_model)
        self._built = True

    def metadata_for(self, file: str, first_record: bytes) -> DatasetMetadata:
        """What `dataset_fn` is told about `file`: the training columns when they are known."""
        if file not in self._metadata:
            found = DatasetMetadata.for_file(file, first_record)
            trained = self._trained_metadata
            if trained is not None:
                missing = trained.missing_from(found, self._files.feature_inputs)
                if missing:
                    raise ValueError(
                        f"{file or 'the data'} lacks feature(s) the model was trained on: "
                        f"{', '.join(missing)}"
                    )
                found = trained
            self._metadata[file] = found
        return self._metadata[file]

    def predict(self, records: list[bytes], metadata: DatasetMetadata) -> Any:
        """The model's outputs for `records`, in order: an array, or a dict of arrays; with a
        `prepare_prediction_column` (SQLFlow's zoo), what it makes of each row's output."""
        parts = [
            tf.nest.map_structure(lambda t: t.numpy(), self._predict(features))
            for features in self._pipelines.batches(records, metadata, Mode.PREDICTION)
        ]
        if not parts:
            return np.zeros((0, 1), np.float32)
        outputs = tf.nest.map_structure(lambda *xs: np.concatenate(xs, axis=0), *parts)
        prepare = self.instance.prediction_column
        if prepare is None or not isinstance(outputs, np.ndarray):
            return outputs
        return np.asarray([prepare(row) for row in outputs])

    def evaluate(self, records: list[bytes], metadata: DatasetMetadata) -> dict[str, np.ndarray]:
        """Additive metric state of the trained model on `records`."""
        if self._eval_metrics is None:
            self._eval_metrics = self.instance.eval_metrics()
        return evaluation_states(
            self._pipelines, self._predict, self._eval_metrics, records, metadata
        )

    def process_outputs(self, predictions: Any, task: dict[str, Any]) -> None:
        """Hand one task's predictions to the zoo's PredictionOutputsProcessor, if any.

        ElasticDL's contract `process(predictions, worker_id)` is kept (the arrays also have
        `.numpy()`, as v0.2's tensors did); a `process` that also
        takes `task` receives the task's part name and record range, so it can write
        idempotently (a retried task calls it again with the same part name).
        """
        if self._processor is None:
            return
        predictions = tf.nest.map_structure(_with_numpy, predictions)
        process = self._processor.process
        if "task" in inspect.signature(process).parameters:
            process(predictions, self.worker_id, task=task)
        else:
            process(predictions, self.worker_id)


class _Predictions(np.ndarray):
    """A numpy array that also answers ElasticDL v0.2's `predictions.numpy()` (a tensor's)."""

    def numpy(self) -> np.ndarray:
        return np.asarray(self)


def _with_numpy(value: Any) -> Any:
    return np.asarray(value).view(_Predictions)


def _processor_of(found: Any) -> Any:
    """An instance of the zoo's PredictionOutputsProcessor (a class or an object)."""
    if found is None:
        return None
    processor = found() if inspect.isclass(found) else found
    if not callable(getattr(processor, "process", None)):
        raise ValueError(
            "PredictionOutputsProcessor must have a method process(predictions, worker_id)"
        )
    return processor
