"""The worker's training engine: one model replica that trains against parameter servers.

Per minibatch: run the compiled gradient step, push the gradients (with the task id and the
records done once they are applied, so the master can tell exactly which records reached the
model if this process dies), then report progress. One round trip per minibatch: the push
asks the shards to answer with their parameters when their version moved past the one the
gradients were computed on, so the push is also the next minibatch's pull. In sync mode a push
computed on a stale version is rejected (its answer carries the fresh parameters); the worker
recomputes the same minibatch.

Async mode overlaps communication with computation, with a bounded staleness: at most one push
is in flight. Minibatch n is computed while the push of minibatch n-1 travels; then that push's
answer (the parameters with n-1's gradients and every other worker's applied) is taken, and n's
push goes out at once (it travels while the caller reports and fetches the next minibatch). An
answer is assigned to the variables by the next step itself, in the same TensorFlow call
(`_take`): nothing but taking it stands between an answer's arrival and the next push, which is
what bounds a small model's minibatch (regressor.DNN: 4.15 -> 3.78 ms). So a gradient is
computed on parameters that miss at most this worker's previous minibatch (1 version behind
with one worker); a progress report only counts records whose push came back
(`BatchResult.applied_end`). Accounting does not rest on reports: the master requeues a lost
worker's task from what the parameter servers applied. `finish_task()` waits for the push in
flight (the end of a task; evaluation does the same). Sync mode stays serial: a sync job with
one worker trains exactly like one process. An async worker overlaps only while no other worker
is pushing (`overlap.py`): with others, the overlap would double the staleness. Not overlapping,
it still returns with its push in flight, but takes that push's answer before it computes the
next minibatch: the staleness of a serial worker, and its loop's work done while the push
travels (2 workers on regressor.DNN: 84-88k -> 91-92k records/s).

Records flow through the spec's `dataset_fn` in the task's visiting order (a seeded
permutation of the shard, see `order.py`), through pipelines traced once (`pipeline.py`).

A model with PS-backed embedding tables (`elasticdl.layers.Embedding`) declares its tables
with the model push, and per minibatch pulls the rows of the ids it uses and pushes their
gradients with the dense ones (`sparse.py`); in async mode, while it overlaps, the next
minibatch's rows are pulled while this one trains (`lookahead.py`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from elasticdl.mode import Mode
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.model_build import build_model
from elasticdl.runtime.rpc_calls import CallThreads
from elasticdl.runtime.variables import named_variables
from elasticdl.runtime.worker.dense import dense_functions, step_uses_xla
from elasticdl.runtime.worker.overlap import OverlapRule
from elasticdl.runtime.worker.pipeline import TaskPipelines, evaluation_states

log = logging.getLogger("elasticdl.worker")

MAX_STALE_RETRIES = 20
PS_OUTAGE_S = 180.0
CONVERT_AHEAD_BYTES = 1 << 20
"""A push's answer at least this big is made into tensors on a thread of its own as soon as it
arrives (`_answer_tensors`); a smaller one is converted by the step that assigns it: regressor.DNN
(11 KB) trained a minibatch in 3.62 ms instead of 3.87 without the hand-off between threads."""


@dataclass
class BatchResult:
    """`applied_end`: the task's records whose gradients reached the parameter servers (the
    push of this minibatch, or, with a push in flight, of the one before)."""

    records: int
    loss: float
    finite: bool
    applied_end: int = 0


@dataclass
class _InFlight:
    """A push sent and not yet answered (`versions`: the local copy's when it was sent), with
    what is needed to redo its minibatch."""

    pending: Any
    versions: list[int]
    batch: tuple[Any, Any, int, int, int]
    overlapped: bool = False  # computed while the push before it was in flight
    tensors: Any = None  # a Future of the answer's values as tensors (`_answer_tensors`)
    state: dict[str, np.ndarray] | None = None  # its minibatch's non-trainable state


def rows_of(labels: Any) -> int:
    """The rows of a minibatch, read off its labels."""
    first = tf.nest.flatten(labels)[0]
    size = first.shape[0]
    return int(size) if size is not None else int(tf.shape(first)[0])


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
        self._step: Any = None
        self._sparse: Any = None
        self._background = ThreadPoolExecutor(max_workers=1)  # threads start when first used
        # Daemon threads, as the PS calls' (rpc_calls.py): one blocked on an answer from an
        # unreachable PS must not hold up the worker's exit.
        self._answers = CallThreads(threads=1, name="answers")  # answers to tensors
        self._lookahead: Any = None
        self._eval_metrics: Any = None
        self._async = bool(config.use_async)
        self._overlap = OverlapRule(overlap=self._async)  # see overlap.py
        self._in_flight: _InFlight | None = None
        self._pending: list[Any] | None = None  # an update of the local copy not assigned yet
        self._task_id: int | None = None
        self._applied_end = 0

    # -- model and parameters --------------------------------------------------------------------

    def _build(self, records: list[bytes], metadata: DatasetMetadata | None) -> None:
        build_model(self.instance, records[: min(len(records), 4)], metadata=metadata)
        self.trainable, self.non_trainable = named_variables(self.model)
        self._trainable_names = list(self.trainable)
        self._state_names = list(self.non_trainable)
        model, loss_fn = self.model, self.instance.loss
        variables = list(self.trainable.values())
        state = list(self.non_trainable.values())

        self._everything = variables + state
        self._all_names = self._trainable_names + self._state_names
        accelerators = [d for d in tf.config.list_physical_devices() if d.device_type != "CPU"]
        xla = step_uses_xla(self.config.jit_compile, len(accelerators))
        if xla:
            log.info("worker %d: the training step is compiled with XLA", self.worker_id)
        functions = dense_functions(model, loss_fn, variables, state, xla)
        self._step, self._assign_all = functions.step, functions.assign_all
        self._predict = functions.predict
        self._tables: list[Any] = []
        from elasticdl.runtime.embedding.tables import embedding_layers, table_specs

        if embedding_layers(model):
            from elasticdl.runtime.worker.lookahead import Lookahead
            from elasticdl.runtime.worker.sparse import SparseFunctions

            self._sparse = SparseFunctions(model, loss_fn, variables, state)
            self._predict = self._sparse.predictor(self.ps)
            self._tables = table_specs(model)
            self._lookahead = Lookahead(self._rows_puller, self._background)
        pairs = zip(self._all_names, self._everything, strict=True)
        self._values = {n: np.asarray(v.numpy()) for n, v in pairs}
        self._model_bytes = sum(value.nbytes for value in self._values.values())
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
        self._take(result.values, result.versions)

    def _take(
        self,
        values: dict[str, np.ndarray],
        versions: list[int],
        keep: dict[str, np.ndarray] | None = None,
        tensors: dict[str, Any] | None = None,
    ) -> None:
        """Make `values` (at `versions`) the local copy; `keep` (this replica's newer
        non-trainable state) wins over the shards' copy of it. `tensors`: some of `values`
        as tensors already (assigned without converting them again).

        The variables are assigned later: by the next step, which assigns `_pending` before it
        computes (one call instead of two), or by `_materialize` before anything else reads
        them (evaluation, a model with PS-backed tables)."""
        if values:
            for name, value in values.items():
                if name in self._values:
                    self._values[name] = value
            self._values.update(keep or {})
            ready = {n: t for n, t in (tensors or {}).items() if n not in (keep or {})}
            self._pending = [ready.get(n, self._values[n]) for n in self._all_names]
        elif keep:
            self._values.update(keep)  # the variables hold it already
            if self._pending is not None:  # and the assignment to come must not undo it
                names = self._all_names
                self._pending = [keep.get(n, v) for n, v in zip(names, self._pending, strict=True)]
        self._versions = list(versions)
        self._ps_versions = [max(a, b) for a, b in zip(self._ps_versions, versions, strict=True)]

    def _dense_step(self, features: Any, labels: Any) -> tuple[Any, list[Any], list[Any]]:
        """The compiled step, assigning the pending update first (or, none pending, the
        variables' own values, read without a copy). An update the step may not have assigned
        (it raised: user code) stays pending for the next one."""
        values, self._pending = self._pending, None
        if values is None:
            values = [tf.convert_to_tensor(v) for v in self._everything]
        try:
            return self._step(values, features, labels)
        except BaseException:
            if self._pending is None:
                self._pending = values
            raise

    def _materialize(self) -> None:
        """Assign the pending update now, for code that reads the variables outside the step."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._assign_all(pending)

    @property
    def overlapping(self) -> bool:
        """Whether the next minibatch overlaps the push before it (runtime/worker/overlap.py)."""
        return self._overlap.overlap

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
        batches = self._pipelines.batches(records, metadata, mode)
        if self._lookahead is None or mode is not Mode.TRAINING:
            return batches
        return self._lookahead.batches(batches, ahead=self._looks_ahead)

    def prepare(self, records: list[bytes], metadata: DatasetMetadata) -> None:
        """Make the next task's first minibatch (pipeline.py's `prepare`; on a background
        thread, while the current task trains)."""
        self._pipelines.prepare(records, metadata)

    def _looks_ahead(self) -> bool:
        """Async, overlapping, and the step traced (no two threads tracing at first)."""
        return self._async and self._overlap.overlap and self._sparse.traced

    # -- one minibatch ---------------------------------------------------------------------------

    def train_batch(
        self, features: Any, labels: Any, records: int, task_id: int, records_end: int
    ) -> BatchResult:
        """Compute and push one minibatch's gradients, riding out a PS relaunch (see
        `_riding_out`)."""
        if task_id != self._task_id:
            self._riding_out(self.flush)
            self._task_id, self._applied_end = task_id, 0
        train = self._train_batch_async if self._async else self._train_batch
        return self._riding_out(lambda: train(features, labels, records, task_id, records_end))

    def finish_task(self) -> int:
        """Wait for the push in flight; the task's records whose gradients were applied."""
        return self._riding_out(self.flush)

    def _riding_out(self, call: Callable[[], Any]) -> Any:
        """`call()`, again after a parameter server that is down (relaunching from its
        checkpoint) came back, for up to PS_OUTAGE_S: the local copy is pulled again and a
        minibatch whose push failed in flight is recomputed; not this task's failure."""
        from elasticdl.runtime.ps.client import PSUnavailableError

        deadline = time.monotonic() + PS_OUTAGE_S
        while True:
            try:
                return call()
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
                lost, self._in_flight = self._in_flight, None
                if lost is not None:
                    self._train_batch(*lost.batch)

    def flush(self, keep: dict[str, np.ndarray] | None = None) -> int:
        """Wait for the push in flight (if any) and take its answer (`keep`: this replica's
        newer non-trainable state, by default that of the push's own minibatch); the task's
        records applied."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            try:
                tensors = None if in_flight.tensors is None else in_flight.tensors.result()
                result = in_flight.pending.result()
                keep = in_flight.state if keep is None else keep
                self._absorb(result, in_flight.versions, keep or {}, tensors)
                self._applied_end = in_flight.batch[4]
                self._overlap.observe(result.staleness, in_flight.overlapped)
            except BaseException:
                self._in_flight = in_flight  # train_batch / the next flush redoes it
                raise
        return self._applied_end

    def _compute(self, features: Any, labels: Any) -> tuple[float, dict, dict, dict]:
        """(loss, gradients, non-trainable state, push_gradients' sparse arguments)."""
        sparse: dict[str, Any] = {}
        if self._sparse is None:
            self._pull()
            loss, gradients, state = self._dense_step(features, labels)
        else:
            ids, rows = self._sparse_inputs(features)
            self._materialize()
            loss, gradients, state, row_grads = self._sparse.step(features, labels, rows, ids)
            sparse = {"embedding_grads": self._sparse.row_gradients(ids, np.asarray(row_grads))}
        # Gradients as views of the step's output tensors: `.numpy()` copies (0.4 ms for the
        # MNIST CNN's 4.8 MB), `np.asarray` does not; they are only read, and encoded once.
        grads = {n: np.asarray(g) for n, g in zip(self._trainable_names, gradients, strict=True)}
        state_values = {name: v.numpy() for name, v in zip(self._state_names, state, strict=True)}
        return float(loss), grads, state_values, sparse

    def _encode(
        self,
        computed_on: list[int],
        grads: dict,
        state_values: dict,
        sparse: dict,
        task_id: int,
        records_end: int,
    ) -> list[bytes]:
        """The push of a minibatch's gradients, encoded (sent by `ps.send_push`)."""
        return self.ps.encode_push(
            grads,
            versions=computed_on,
            task_id=task_id,
            records_end=records_end,
            non_trainable=state_values,
            worker_id=self.worker_id,
            return_parameters=True,
            **sparse,
        )

    def _absorb(
        self, result: Any, local: list[int], keep: dict[str, np.ndarray], tensors: Any = None
    ) -> bool:
        """Take a push's answer, sent while the local copy was at `local` (`tensors`: its values
        as tensors already, when made ahead); False when a shard went back in time (relaunched
        from a checkpoint: the local copy was pulled again)."""
        if any(remote < mine for remote, mine in zip(result.versions, local, strict=True)):
            log.info("worker %d: a PS shard restarted; pulling again", self.worker_id)
            self._ps_versions = list(result.versions)
            self._pull(force=True)
            return False
        if self._versions == local:
            self._take(result.values, result.versions, keep, tensors)
        else:  # pulled meanwhile: the answer's values may be older than the local copy
            self._values.update(keep)
            self._ps_versions = [
                max(a, b) for a, b in zip(self._ps_versions, result.versions, strict=True)
            ]
        return True

    def _train_batch(
        self, features: Any, labels: Any, records: int, task_id: int, records_end: int
    ) -> BatchResult:
        """One minibatch, serially: compute, push, take the answer; retry on stale rejection
        (sync mode; async, the redo of a push lost with a parameter server)."""
        for _ in range(MAX_STALE_RETRIES):
            loss, grads, state_values, sparse = self._compute(features, labels)
            if not math.isfinite(loss):
                return BatchResult(records, loss, False, self._applied_end)
            pushed_on = list(self._versions)
            push = self._encode(pushed_on, grads, state_values, sparse, task_id, records_end)
            pending = self.ps.send_push(push)
            result = pending.result()
            if not self._absorb(result, pushed_on, state_values):
                continue
            if result.accepted:
                self._applied_end = records_end
                if self._async:
                    self._overlap.observe(result.staleness, overlapped=False)
                return BatchResult(records, loss, True, records_end)
            if not result.values:
                self._pull(force=True)
        raise RuntimeError(
            f"gradients rejected as stale {MAX_STALE_RETRIES} times in a row; "
            "lower --grads_to_wait or use --use_async"
        )

    def _train_batch_async(
        self, features: Any, labels: Any, records: int, task_id: int, records_end: int
    ) -> BatchResult:
        """Async: send this minibatch's push and return without its answer (at most one push
        in flight). Overlapping (overlap.py), the minibatch is computed while the previous
        push travels, whose answer is taken before this push is sent. Serial, that answer is
        taken first and the minibatch computed on it, as a serial worker would, and the push
        travels while the worker's loop reads the next minibatch and reports: the wait for it
        moves from after this push to before the next minibatch's step."""
        overlap = self._overlap.overlap
        overlapped = overlap and self._in_flight is not None
        if not overlap:
            self.flush()
        loss, grads, state_values, sparse = self._compute(features, labels)
        if not math.isfinite(loss):
            return BatchResult(records, loss, False, self._applied_end)
        # Encoded before waiting for the push in flight: after its answer, only sending.
        push = self._encode(list(self._versions), grads, state_values, sparse, task_id, records_end)
        self.flush(keep=state_values)
        batch = (features, labels, records, task_id, records_end)
        pending = self.ps.send_push(push)
        tensors = None
        if self._model_bytes >= CONVERT_AHEAD_BYTES:
            tensors = self._answers.submit(_answer_tensors, pending)
        versions = list(self._versions)
        self._in_flight = _InFlight(pending, versions, batch, overlapped, tensors, state_values)
        return BatchResult(records, loss, True, self._applied_end)

    def _sparse_inputs(self, features: Any) -> tuple[Any, np.ndarray]:
        """(ids, packed rows) of `features` (see sparse.py): prepared ahead
        (`lookahead.py`), or now, the dense pull (when stale) meanwhile on another thread so
        that the two round trips overlap."""
        prepared = self._lookahead.take(features)
        if prepared is not None:
            self._pull()
            return prepared
        pending = self._background.submit(self._pull)
        try:
            return self._rows_puller(features)()
        finally:
            pending.result()

    def _rows_puller(self, features: Any) -> Callable[[], tuple[Any, np.ndarray]]:
        """The ids pass now; the rows pull when the returned function is called."""
        ids = self._sparse.gather_ids(features)
        return lambda: (ids, self._sparse.pull_rows(self.ps, ids))

    def evaluate(self, records: list[bytes], metadata: DatasetMetadata) -> dict[str, np.ndarray]:
        """Additive metric state of the latest model on `records` (see runtime/metrics.py)."""
        self.flush()
        self._pull(force=True)
        self._materialize()
        if self._eval_metrics is None:
            self._eval_metrics = self.instance.eval_metrics()
        return evaluation_states(
            self._pipelines, self._predict, self._eval_metrics, records, metadata
        )

    batch_size = staticmethod(rows_of)

    def warm_up(self, records: list[bytes], metadata: DatasetMetadata) -> None:
        """A spare's preparation: build the model and trace the compiled step on one
        minibatch, pushing nothing (a model with PS-backed tables is only built: pulling
        its rows would create them on the parameter servers). The local copy goes stale while
        the spare stands, and the traced step may have moved its non-trainable state: it is
        pulled whole again before the first minibatch it trains."""
        self.ensure_built(records, metadata)
        if self._sparse is None:
            for features, labels in self.batches(records, metadata):
                self._dense_step(features, labels)
                break
        self._versions = [-1] * len(self._versions)

    def ensure_built(self, records: list[bytes], metadata: DatasetMetadata | None = None) -> None:
        if not self._built:
            self._build(records, metadata)


def _answer_tensors(pending: Any) -> dict[str, Any] | None:
    """The values a push in flight answers with, as tensors: made on a thread of their own as
    soon as the answer arrives, while the next minibatch computes, since converting NumPy to a
    tensor copies (0.8 ms for the MNIST CNN's 4.8 MB, on the training thread's path before).
    None when the push failed: `flush` raises its error."""
    try:
        values = pending.result().values
    except Exception:  # noqa: BLE001 - flush collects the same error and raises it
        return None
    return {name: tf.convert_to_tensor(value) for name, value in values.items()}
