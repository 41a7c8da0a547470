"""The worker's training engine: one model replica that trains against parameter servers.

Per minibatch: pull the parameters only if a PS shard has a newer version than the local
copy, run the compiled gradient step, push the gradients (with the task id and the records
done once they are applied, so the master can tell exactly which records reached the model if
this process dies), then report progress. In sync mode a push computed on a stale version is
rejected; the worker pulls and recomputes the same minibatch.

Records flow through the spec's `dataset_fn` in the task's visiting order (a seeded
permutation of the shard, see `order.py`), through pipelines traced once (`pipeline.py`).

A model with PS-backed embedding tables (`elasticdl.layers.Embedding`) declares its tables
with the model push, and per minibatch pulls the rows of the ids it uses and pushes their
gradients with the dense ones (`sparse.py`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from elasticdl.mode import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.model_build import build_model
from elasticdl.runtime.variables import named_variables
from elasticdl.runtime.worker.pipeline import TaskPipelines, evaluation_states

log = logging.getLogger("elasticdl.worker")

MAX_STALE_RETRIES = 20
PS_OUTAGE_S = 180.0


@dataclass
class BatchResult:
    records: int
    loss: float
    finite: bool


class Trainer:
    """A model replica bound to the parameter servers through `ps` (a PSClient)."""

    def __init__(self, config: JobConfig, ps: Any, worker_id: int) -> None:
        self.config = config
        self.ps = ps
        self.worker_id = worker_id
        spec = config.load_spec()
        self.instance = spec.instantiate(context={"worker_id": worker_id})
        self.model = self.instance.model
        self._built = False
        self._versions: list[int] = [-1] * config.num_ps
        self._ps_versions: list[int] = [0] * config.num_ps
        self._metadata: dict[str, DatasetMetadata] = {}
        self._pipelines = TaskPipelines(self.instance.dataset_fn, config.minibatch_size)
        self._step: Callable[..., Any] | None = None
        self._sparse: Any = None
        self._background: Any = None
        self._eval_metrics: Any = None

    # -- model and parameters --------------------------------------------------------------------

    def _build(self, records: list[bytes], metadata: DatasetMetadata | None) -> None:
        build_model(self.instance, records[: min(len(records), 4)], metadata=metadata)
        self.trainable, self.non_trainable = named_variables(self.model)
        self._trainable_names = list(self.trainable)
        self._state_names = list(self.non_trainable)
        model, loss_fn = self.model, self.instance.loss
        variables = list(self.trainable.values())
        state = list(self.non_trainable.values())

        @tf.function(reduce_retracing=True)
        def step(features: Any, labels: Any) -> tuple[Any, list[Any], list[Any]]:
            with tf.GradientTape() as tape:
                predictions = model(features, training=True)
                loss = loss_fn(labels, predictions)
                if model.losses:
                    loss = loss + tf.add_n(model.losses)
            gradients = tape.gradient(loss, variables)
            dense = [
                tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                for g, v in zip(gradients, variables, strict=True)
            ]
            return loss, dense, [tf.convert_to_tensor(v) for v in state]

        everything = variables + state
        self._all_names = self._trainable_names + self._state_names

        @tf.function(input_signature=[[tf.TensorSpec(v.shape, v.dtype) for v in everything]])
        def assign_all(values: list[Any]) -> None:
            for variable, value in zip(everything, values, strict=True):
                variable.assign(value)

        @tf.function(reduce_retracing=True)
        def predict(features: Any) -> Any:
            return model(features, training=False)

        self._step = step
        self._predict = predict
        self._assign_all = assign_all
        self._tables: list[Any] = []
        from elasticdl.runtime.embedding.tables import embedding_layers, table_specs

        if embedding_layers(model):
            from elasticdl.runtime.worker.sparse import SparseFunctions

            self._sparse = SparseFunctions(model, loss_fn, variables, state)
            self._predict = self._sparse.predictor(self.ps)
            self._tables = table_specs(model)
        pairs = zip(self._all_names, everything, strict=True)
        self._values = {n: np.asarray(v.numpy()) for n, v in pairs}
        self._built = True
        result = self.ps.pull(self._versions)
        if not result.initialized:
            self._push_model()
            log.info("worker %d initialized the parameter servers", self.worker_id)
        self._pull(force=True)

    def _push_model(self) -> None:
        if self._tables:
            self.ps.push_model(
                dict(self._values), set(self._state_names), embedding_tables=self._tables
            )
        else:
            self.ps.push_model(dict(self._values), set(self._state_names))

    def _pull(self, force: bool = False) -> None:
        """Refresh the local copy from the shards that have a newer version (one TF call)."""
        if not force and all(
            local >= remote for local, remote in zip(self._versions, self._ps_versions, strict=True)
        ):
            return
        result = self.ps.pull(self._versions)
        if not result.initialized:
            # A shard came back empty (relaunched before its first checkpoint): seed it again
            # from this replica, the freshest copy there is. The first push wins.
            log.warning("worker %d: a PS shard has no parameters; pushing ours", self.worker_id)
            self._push_model()
            result = self.ps.pull([-1] * len(self._versions))
            if not result.initialized:
                raise RuntimeError("the parameter servers lost their parameters")
        if result.values:
            for name, value in result.values.items():
                if name in self._values:
                    self._values[name] = value
            self._assign_all([self._values[name] for name in self._all_names])
        self._versions = list(result.versions)
        self._ps_versions = [
            max(a, b) for a, b in zip(self._ps_versions, result.versions, strict=True)
        ]

    @property
    def model_version(self) -> int:
        return max(self._versions) if self._versions else 0

    # -- data ------------------------------------------------------------------------------------

    def metadata_for(self, file: str, first_record: bytes) -> DatasetMetadata:
        if file not in self._metadata:
            self._metadata[file] = DatasetMetadata.for_file(file, first_record)
        return self._metadata[file]

    def batches(
        self, records: list[bytes], metadata: DatasetMetadata, mode: Mode = Mode.TRAINING
    ) -> Any:
        """Minibatches of `records` through the spec's dataset_fn, in the given order."""
        return self._pipelines.batches(records, metadata, mode)

    # -- one minibatch ---------------------------------------------------------------------------

    def train_batch(
        self, features: Any, labels: Any, records: int, task_id: int, records_end: int
    ) -> BatchResult:
        """Compute and push one minibatch's gradients, riding out a PS relaunch.

        A parameter server that is down (relaunching from its checkpoint) is waited for up to
        PS_OUTAGE_S, then the minibatch is recomputed on the restored parameters; it is not
        this task's failure.
        """
        from elasticdl.runtime.ps.client import PSUnavailableError

        deadline = time.monotonic() + PS_OUTAGE_S
        while True:
            try:
                return self._train_batch(features, labels, records, task_id, records_end)
            except PSUnavailableError as err:
                if time.monotonic() > deadline:
                    raise
                log.warning("worker %d: %s; waiting for it to come back", self.worker_id, err)
                try:
                    self.ps.wait_ready(timeout_s=max(1.0, deadline - time.monotonic()))
                except PSUnavailableError:
                    continue
                self._ps_versions = [0] * len(self._ps_versions)
                self._pull(force=True)

    def _train_batch(
        self, features: Any, labels: Any, records: int, task_id: int, records_end: int
    ) -> BatchResult:
        """Compute and push one minibatch's gradients; retry on stale rejection (sync mode)."""
        for _ in range(MAX_STALE_RETRIES):
            sparse: dict[str, Any] = {}
            if self._sparse is None:
                self._pull()
                loss, gradients, state = self._step(features, labels)
            else:
                unique, index, rows = self._sparse_inputs(features)
                loss, gradients, state, row_grads = self._sparse.step(features, labels, rows, index)
                sparse = {
                    "embedding_grads": {
                        t: (unique[t], g.numpy())
                        for t, g in zip(self._sparse.tables, row_grads, strict=True)
                    }
                }
            loss_value = float(loss)
            if not math.isfinite(loss_value):
                return BatchResult(records, loss_value, finite=False)
            grads = {
                name: g.numpy() for name, g in zip(self._trainable_names, gradients, strict=True)
            }
            state_values = {
                name: v.numpy() for name, v in zip(self._state_names, state, strict=True)
            }
            result = self.ps.push_gradients(
                grads,
                versions=self._versions,
                task_id=task_id,
                records_end=records_end,
                non_trainable=state_values,
                **sparse,
            )
            self._values.update(state_values)
            if any(
                remote < local
                for remote, local in zip(result.versions, self._versions, strict=True)
            ):
                # A shard went back in time: it was relaunched from a checkpoint.
                log.info("worker %d: a PS shard restarted; pulling again", self.worker_id)
                self._ps_versions = list(result.versions)
                self._pull(force=True)
                continue
            self._ps_versions = [
                max(a, b) for a, b in zip(self._ps_versions, result.versions, strict=True)
            ]
            if result.accepted:
                return BatchResult(records, loss_value, finite=True)
            self._pull(force=True)
        raise RuntimeError(
            f"gradients rejected as stale {MAX_STALE_RETRIES} times in a row; "
            "lower --grads_to_wait or use --use_async"
        )

    def _sparse_inputs(self, features: Any) -> tuple[Any, Any, Any]:
        """(unique ids, positions, rows) of each table for `features`. The dense pull (when
        stale) runs meanwhile on another thread: the two round trips overlap."""
        if self._background is None:
            from concurrent.futures import ThreadPoolExecutor

            self._background = ThreadPoolExecutor(max_workers=1)
        pending = self._background.submit(self._pull)
        try:
            unique, index = self._sparse.gather_ids(features)
            rows = self._sparse.pull_rows(self.ps, unique)
        finally:
            pending.result()
        return unique, index, rows

    def evaluate(self, records: list[bytes], metadata: DatasetMetadata) -> dict[str, np.ndarray]:
        """Additive metric state of the latest model on `records` (see runtime/metrics.py)."""
        self._pull(force=True)
        if self._eval_metrics is None:
            self._eval_metrics = self.instance.eval_metrics()
        return evaluation_states(
            self._pipelines, self._predict, self._eval_metrics, records, metadata
        )

    @staticmethod
    def batch_size(labels: Any) -> int:
        first = tf.nest.flatten(labels)[0]
        size = first.shape[0]
        return int(size) if size is not None else int(tf.shape(first)[0])

    def ensure_built(self, records: list[bytes], metadata: DatasetMetadata | None = None) -> None:
        if not self._built:
            self._build(records, metadata)
