"""Prediction and evaluation jobs on the local engine: a trained model over data, elastically.

`InferenceJob.run()` mirrors the training job without parameter servers:

1. claim `--output` (output_claim.py: a second job on it fails at once), read the
   TrainedModel (clear errors for a missing or corrupt one), rebuild its spec from the
   zoo it names, check the data has every feature the model was trained on, and check the
   output location, all before starting a process;
2. serve the Master service and start workers that load the trained parameters, through the
   instance manager the factory makes (local processes by default, pods on Kubernetes);
3. hand out one task per record range; the supervisor (supervisor.py), the same one training
   jobs use, watches the workers: a task lost with its worker goes back to the queue whole and
   the worker is relaunched by the one exit table (exits.py): a preemption for free, a failure
   within the budget, an out-of-memory worker not at all. Prediction tasks write one output
   part each, named by the range, so a redone task replaces its own part;
4. predict: check that every part is there and holds exactly its range's rows, write
   `job_report.json` and the `_SUCCESS` marker, publish (one rename for a local output).
   evaluate: merge the workers' additive metric states into the model's metrics.

A failed job leaves no output behind; neither does one stopped by SIGTERM or SIGINT to the
master (its workers finish their minibatch; the report, status "stopped", is in the log dir).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec

from elasticdl.runtime import auth, keras_mode
from elasticdl.runtime import prediction_output as parts
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.data.planner import count_files
from elasticdl.runtime.data.recordio import read_records
from elasticdl.runtime.data.shards import Shard, plan_shards
from elasticdl.runtime.job_config import JobConfig, host_port
from elasticdl.runtime.master import console, keras_switch
from elasticdl.runtime.master import report as views
from elasticdl.runtime.master.bounds import job_bound
from elasticdl.runtime.master.chaos import parse_chaos
from elasticdl.runtime.master.events import EventLog, JobStopped
from elasticdl.runtime.master.instances import InstanceManager, LocalInstanceManager, Role
from elasticdl.runtime.master.options import InferenceOptions
from elasticdl.runtime.master.servicer import MasterServicer, serve_master
from elasticdl.runtime.master.standbys import Standbys, instance_manager, job_start
from elasticdl.runtime.master.supervisor import (
    JobPlugin,
    StopRequested,
    Supervisor,
    SupervisorConfig,
    stop_on_signals,
)
from elasticdl.runtime.master.task_manager import (
    JobFailed,
    TaskManager,
    TaskManagerConfig,
    TaskType,
)
from elasticdl.runtime.master.task_state import TaskState
from elasticdl.runtime.model_spec import load_model_spec
from elasticdl.runtime.one_line import describe, save_traceback
from elasticdl.runtime.output_claim import OutputClaim
from elasticdl.runtime.outputs import check_output
from elasticdl.runtime.trained_model import (
    TrainedModelError,
    read_trained_model,
    resolve_model_url,
)
from elasticdl.runtime.zoo_source import ZooSource, resolve_zoo

log = logging.getLogger("elasticdl.master")

SUCCESS_MARKER = "_SUCCESS"
MIN_WORKERS = 1
"""--min_workers of an inference job: it fails once no worker is left (no flag yet)."""
STOP_DRAIN_S = 20.0
"""On SIGTERM to the master, how long workers get to finish their minibatch and leave."""


@dataclass
class InferenceResult:
    status: str
    output: str
    report: dict[str, Any]
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


class InferenceJob:
    """One prediction or evaluation job (workers only: local processes, or pods)."""

    def __init__(
        self,
        options: InferenceOptions,
        instance_manager_factory: Callable[[Path, str, Path], InstanceManager] | None = None,
    ) -> None:
        """`instance_manager_factory(config_path, master_addr, log_dir)` makes the manager of
        the worker instances: local processes by default, pods on Kubernetes."""
        options.validate()
        self.options = options
        self._manager_factory = instance_manager_factory or LocalInstanceManager
        self.job_name = options.job_name or f"{options.job_type}-{uuid.uuid4().hex[:8]}"
        self.events = EventLog()
        self.events.listen(console.log_event)  # lost roles named as it happens
        self._keras = keras_mode.current()
        self._started = time.monotonic()
        self._counted: list[tuple[str, int]] = []

    # -- preparation ---------------------------------------------------------------------------

    def _model_file(self) -> tuple[Path, Any]:
        """The root of the trained model's zoo, and its TrainedModel message."""
        trained = _trained_message(self.options.trained_model)
        return self._zoo_of(trained).root, trained

    def _zoo_of(self, trained: Any) -> ZooSource:
        """The zoo of a TrainedModel: --model_zoo, else the one it was trained from, at the
        commit it was trained at."""
        o = self.options
        zoo_url = o.model_zoo or trained.model_zoo or None
        if zoo_url and trained.model_zoo_commit and not o.model_zoo and "@" not in zoo_url:
            zoo_url = f"{zoo_url}@{trained.model_zoo_commit}"
        return resolve_zoo(zoo_url)

    def _prepare(self) -> tuple[JobConfig, list[Shard], dict[str, Any], Path]:
        o = self.options
        files = read_trained_model(o.trained_model)
        trained_url = _absolute(o.trained_model)
        trained = files.trained
        zoo = self._zoo_of(trained)
        flags = _trained_flags(trained, zoo)
        spec = load_model_spec(
            trained.model_def,
            params=trained.model_def_params,
            zoo=zoo,
            features=trained.feature_columns,
            eval_metrics=o.eval_metrics,
            **flags,
        )
        counted = self._counted
        shards = plan_shards(counted, o.records_per_task)
        if not shards:
            raise ValueError(f"--data {o.data!r}: the files hold no records")
        job_bound(o, len(shards), "prediction tasks", self._manager_factory)
        sample = list(read_records(shards[0].file, 0, min(8, shards[0].num_records)))
        data_metadata = DatasetMetadata.from_example(sample[0])
        trained_metadata = files.input_metadata
        if trained_metadata is not None:
            missing = trained_metadata.missing_from(data_metadata, files.feature_inputs)
            if missing:
                raise ValueError(
                    f"--data {o.data!r} lacks feature(s) the model was trained on: "
                    f"{', '.join(missing)}; its columns are {sorted(data_metadata.columns)}"
                )
        self._check_model_fits(spec, files, sample, trained_metadata or data_metadata)
        if o.job_type == "evaluate":
            label = (trained_metadata or data_metadata).label
            if label is None or label not in data_metadata.columns:
                raise ValueError(
                    f"--data {o.data!r} has no label column {label or 'label'!r} to evaluate "
                    f"against; its columns are {sorted(data_metadata.columns)}"
                )
            metrics = spec.instantiate().eval_metrics()
            if not metrics.names and metrics.batch_fn is None:
                raise ValueError(f"{trained.model_def} defines no evaluation metrics to compute")
        keep = [c.strip() for c in o.keep_columns.split(",") if c.strip()]
        unknown = [c for c in keep if c not in data_metadata.columns]
        if unknown:
            raise ValueError(
                f"--keep_columns {', '.join(unknown)}: not in the data; its columns are "
                f"{sorted(data_metadata.columns)}"
            )
        kept = tuple(keep or parts.default_kept_columns(list(data_metadata.columns)))
        work = Path(o.log_dir) if o.log_dir else Path(tempfile.mkdtemp(prefix=f"{self.job_name}-"))
        work.mkdir(parents=True, exist_ok=True)
        prediction_dir = ""
        if o.job_type == "predict":
            check_output(o.output)
            prediction_dir = _prediction_dir(o.output, self.job_name)
        config = job_config(
            o, self.job_name, trained, zoo, flags, kept, trained_url, prediction_dir
        )
        file_index = {url: i for i, (url, _) in enumerate(counted)}
        facts = {
            "trained": trained,
            "file_index": file_index,
            "records": sum(n for _, n in counted),
            "metrics": spec.instantiate().eval_metrics() if o.job_type == "evaluate" else None,
        }
        log.info(
            "job %s: %s with %s (version %d) on %d record(s) in %d file(s), %d task(s)",
            self.job_name,
            o.job_type,
            trained.model_def,
            trained.model_version,
            facts["records"],
            len(counted),
            len(shards),
        )
        return config, shards, facts, work

    def _check_model_fits(
        self, spec: Any, files: Any, sample: list[bytes], metadata: DatasetMetadata
    ) -> None:
        """Build the model on a few records and load the parameters, as each worker will."""
        from elasticdl.mode import Mode
        from elasticdl.runtime.model_build import build_model
        from elasticdl.runtime.trained_model import load_parameters

        instance = spec.instantiate()
        try:
            build_model(instance, sample[:4], Mode.PREDICTION, metadata)
        except Exception as err:  # noqa: BLE001 - user code: say where it failed
            raise ValueError(
                f"{spec.model_def}: building the model on the first records of --data in "
                f"PREDICTION mode failed: {type(err).__name__}: {str(err)[:500]}"
            ) from err
        load_parameters(instance.model, files.params, self.options.trained_model)

    def _part_of(self, shard: Shard, file_index: dict[str, int]) -> str:
        return parts.part_name(
            file_index[shard.file], shard.start, shard.end, self.options.output_format
        )

    # -- the job -------------------------------------------------------------------------------

    def run(self) -> InferenceResult:
        """Run the job to the end; raise ValueError/FileNotFoundError for bad input.

        The master runs in the Keras mode the model file needs: here, or in a child process
        when this one imported TensorFlow with the other Keras (keras_switch.py)."""
        o = self.options
        self._started = time.monotonic()
        claim = OutputClaim(o.output, self.job_name) if o.job_type == "predict" else None
        with claim or contextlib.nullcontext():  # first: one job per --output
            o.trained_model = resolve_model_url(o.trained_model)  # once: a newer run may publish
            root, trained = self._model_file()
            likely = keras_switch.likely("auto", root, trained.model_def)
            local = self._manager_factory is LocalInstanceManager
            self._counted = count_files(o.data)  # data that is not there: before anything starts
            with job_start(local, o.num_workers, likely) as standbys:
                return self._run(root, trained, standbys)

    def _run(self, root: Path, trained: Any, standbys: Standbys | None) -> InferenceResult:
        o = self.options
        # The Keras mode of the trained model's file (as its training job decided it).
        self._keras = keras_switch.resolve(
            "auto", root, trained.model_def, trained.model_def_params
        )
        if not keras_switch.ensure(self._keras):
            if self._manager_factory is not LocalInstanceManager:
                raise keras_switch.cannot_switch(self._keras)
            if standbys is not None:
                standbys.close()  # in the other Keras: the child master starts its own
            child = dataclasses.replace(o, job_name=self.job_name)
            return keras_switch.run_elsewhere(o.job_type, child, self._keras)
        config, shards, facts, work = self._prepare()
        task_type = TaskType.PREDICTION if o.job_type == "predict" else TaskType.EVALUATION
        task_manager = TaskManager(
            shards,
            TaskManagerConfig(
                records_per_task=o.records_per_task,
                shuffle=False,
                max_task_retries=o.max_task_retries,
                timeout_floor_s=o.task_timeout_floor_s,
            ),
            task_type=task_type,
            now=time.monotonic(),
        )
        file_index = facts["file_index"]
        servicer = MasterServicer(
            task_manager, task_config=lambda task: {"part": self._part_of(task.shard, file_index)}
        )
        if task_type is TaskType.EVALUATION:
            # The first plan's task ids are its lineages: 1..n, one per shard.
            servicer.evaluations.start(
                int(facts["trained"].model_version), list(range(1, len(shards) + 1)), 0.0
            )
        config, credentials = auth.secure(config, work, o.tls_dir)
        config_path = config.write(work / "job.json")
        server, port = serve_master(servicer, o.master_host, o.master_port, credentials)
        master_addr = host_port(o.master_host, port)
        try:
            manager = instance_manager(
                self._manager_factory, standbys, config_path, master_addr, work
            )
        except BaseException:
            server.stop(grace=None)
            if config.prediction_dir:
                _remove(config.prediction_dir)
            raise
        servicer.admit_workers(lambda worker_id: manager.is_alive(Role.WORKER, worker_id))
        log.info("job %s: master on %s, logs in %s", self.job_name, master_addr, work)
        tasks = TaskState(servicer)
        supervisor = Supervisor(
            SupervisorConfig(
                num_workers=o.num_workers,
                min_workers=MIN_WORKERS,
                max_worker_relaunches=o.max_worker_relaunches,
                chaos=parse_chaos(o.chaos),
            ),
            manager,
            tasks,
            self.events,
            _InferencePlugin(self.events),
        )
        status, error, metrics = "failed", "", {}
        rows_written = 0
        try:
            with stop_on_signals(supervisor):
                supervisor.start()
                if standbys is not None:
                    standbys.close()
                supervisor.watch()
            seconds = time.monotonic() - supervisor.t0
            if task_type is TaskType.EVALUATION:
                metrics = self._merged_metrics(tasks, facts["metrics"])
            else:
                rows_written = self._check_parts(config.prediction_dir, shards, file_index)
            report = self._report(tasks, supervisor, "succeeded", "", seconds, facts, rows_written)
            report["metrics"] = metrics
            if task_type is TaskType.PREDICTION:
                self._publish(config.prediction_dir, report)
            status = "succeeded"
        except JobFailed as err:
            error = str(err)
            seconds = time.monotonic() - supervisor.t0
            report = self._report(tasks, supervisor, "failed", error, seconds, facts)
        except StopRequested as stop:
            status, error = "stopped", f"stopped by {stop}"
            self.events.add(JobStopped(time.monotonic(), str(stop)))
            supervisor.drain_workers(STOP_DRAIN_S)
            seconds = time.monotonic() - supervisor.t0
            report = self._report(tasks, supervisor, status, error, seconds, facts)
        except Exception as err:  # noqa: BLE001 - after start (a full disk at publishing, ...)
            status, error = "failed", describe(err)
            saved = save_traceback(err, work)
            error += f" (traceback in {saved})" if saved else ""
            seconds = time.monotonic() - supervisor.t0
            report = self._report(tasks, supervisor, status, error, seconds, facts)
        finally:
            manager.shutdown()
            server.stop(grace=1.0)
        views.write_logged(report, work)
        if status != "succeeded":
            if config.prediction_dir:
                _remove(config.prediction_dir)
            log.error("job %s %s: %s (report and logs in %s)", self.job_name, status, error, work)
        log.info("%s", summary_line(report))
        return InferenceResult(status, o.output, report, error, metrics)

    # -- the end ---------------------------------------------------------------------------------

    def _merged_metrics(self, tasks: TaskState, eval_metrics: Any) -> dict[str, float]:
        from elasticdl.runtime.metrics import compute

        completed = tasks.completed_evaluations()
        if not completed:
            raise JobFailed("evaluation finished but some tasks sent no metric state")
        metrics = compute(eval_metrics, completed[0][1])
        log.info("evaluation of %s: %s", self.options.trained_model, metrics)
        return metrics

    def _check_parts(self, directory: str, shards: list[Shard], file_index: dict[str, int]) -> int:
        """Every expected part present with exactly its range's rows; strays removed."""
        fs, root = fsspec.core.url_to_fs(directory)
        root = root.rstrip("/")
        expected = {self._part_of(s, file_index): s.num_records for s in shards}
        present = (
            {p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)} if fs.exists(root) else set()
        )
        for stray in present - set(expected):
            fs.rm(f"{root}/{stray}")
        missing = sorted(set(expected) - present)
        if missing:
            raise JobFailed(f"prediction parts missing after all tasks finished: {missing[:3]}")
        total = 0
        for name, rows in sorted(expected.items()):
            found = _rows_in(fs, f"{root}/{name}", self.options.output_format)
            if found != rows:
                raise JobFailed(f"prediction part {name} holds {found} rows, expected {rows}")
            total += found
        return total

    def _publish(self, directory: str, report: dict[str, Any]) -> None:
        fs, root = fsspec.core.url_to_fs(directory)
        root = root.rstrip("/")
        fs.pipe_file(f"{root}/job_report.json", json.dumps(report, indent=1).encode())
        fs.pipe_file(f"{root}/{SUCCESS_MARKER}", b"")
        out_fs, target = fsspec.core.url_to_fs(self.options.output)
        if _is_local(fs) and root != target.rstrip("/"):
            target_path = Path(target)
            if target_path.exists():
                target_path.rmdir()
            Path(root).rename(target_path)

    def _report(
        self,
        tasks: TaskState,
        supervisor: Supervisor,
        status: str,
        error: str,
        seconds: float,
        facts: dict[str, Any],
        rows_written: int = 0,
    ) -> dict[str, Any]:
        o = self.options
        tasks.drain_events(self.events)
        counts = tasks.counts()
        done = (
            rows_written if o.job_type == "predict" else facts["records"] * (status == "succeeded")
        )
        report: dict[str, Any] = {
            "job_name": self.job_name,
            "kind": o.job_type,
            "status": status,
            "error": error,
            "trained_model": o.trained_model,
            "model_version": int(facts["trained"].model_version),
            "data": o.data,
            "output": o.output,
            "records": {"input": facts["records"]},
            **views.shared_sections(
                self.events,
                supervisor.t0,
                counts,
                (o.num_workers, MIN_WORKERS, supervisor.target),
                done,
                seconds,
            ),
            "seconds": round(seconds, 3),
            "metrics": {},
        }
        report["throughput"]["preparing_seconds"] = round(supervisor.t0 - self._started, 3)
        if o.job_type == "predict":
            report["records"]["written"] = rows_written
            report["output_format"] = o.output_format
            report["rows_per_second"] = round(rows_written / max(seconds, 1e-9), 1)
        return report


class _InferencePlugin(JobPlugin):
    """Prediction and evaluation plug in nothing but the task events each pass: their
    workers need no PS, and the job is done when every task is."""

    def __init__(self, events: EventLog) -> None:
        self._events = events

    def on_pass(self, supervisor: Supervisor) -> None:
        supervisor.tasks.drain_events(self._events)


def job_config(
    o: InferenceOptions,
    job_name: str,
    trained: Any,
    zoo: Any,
    flags: dict[str, str | None],
    kept: tuple[str, ...],
    trained_model: str,
    prediction_dir: str,
) -> JobConfig:
    """The config every worker of the job reads (job.json)."""
    return JobConfig.from_options(
        o,
        job_name=job_name,
        model_def=trained.model_def,
        model_zoo_root=str(zoo.root),
        model_zoo=zoo.url,
        model_zoo_commit=zoo.commit,
        params=trained.model_def_params,
        **flags,
        num_ps=0,
        shuffle=False,
        trained_model=trained_model,
        prediction_dir=prediction_dir,
        keep_columns=kept,
        keras_version=keras_mode.current(),
        features=trained.feature_columns,
    )


def _trained_flags(trained: Any, zoo: Any) -> dict[str, str | None]:
    """Flags that rebuild the spec the model was trained with.

    The TrainedModel records which symbol supplied each piece; a piece the model_def resolves
    to by itself needs no flag, any other one (given by flag at training time) does.
    """
    recorded = {
        "dataset_fn": trained.input_function,
        "loss": trained.loss,
        "optimizer": trained.optimizer,
        "eval_metrics_fn": trained.eval_metrics_fn,
    }
    plain = load_model_spec(
        trained.model_def,
        params=trained.model_def_params,
        zoo=zoo,
        features=trained.feature_columns,
        strict=False,
    )
    return {
        role: source
        for role, source in recorded.items()
        if source and plain.sources.get(role) != source
    }


def _trained_message(url: str) -> Any:
    """The TrainedModel message alone (read_trained_model, which also reads the parameters,
    says what is wrong when it cannot be read)."""
    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.runtime.trained_model import TRAINED_MODEL_FILE

    try:
        fs, root = fsspec.core.url_to_fs(url)
        trained = pb.TrainedModel.FromString(
            fs.cat_file(f"{root.rstrip('/')}/{TRAINED_MODEL_FILE}")
        )
    except Exception:  # noqa: BLE001 - the full reader words the error
        return read_trained_model(url).trained
    return trained if trained.model_def else read_trained_model(url).trained


def _absolute(url: str) -> str:
    """`url` with a local path made absolute (workers run in the log directory)."""
    fs, path = fsspec.core.url_to_fs(url)
    return str(Path(path).resolve()) if _is_local(fs) else url


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    return protocol in ("file", "local")


def _prediction_dir(output: str, job_name: str) -> str:
    """Where workers write parts: beside a local output (renamed at the end), else in it."""
    fs, path = fsspec.core.url_to_fs(output)
    if _is_local(fs):
        target = Path(path).resolve()
        staging = target.parent / f".{target.name}.staging-{job_name}"
        staging.mkdir(parents=True)
        return str(staging)
    return output


def _rows_in(fs: Any, path: str, output_format: str) -> int:
    if output_format == "recordio":
        from elasticdl.runtime.data.recordio import read_index

        return read_index(path, fs=fs).num_records
    import csv
    import io

    text = fs.cat_file(path).decode()
    return max(0, sum(1 for _ in csv.reader(io.StringIO(text))) - 1)


def _remove(directory: str) -> None:
    """Remove the parts of a failed job (best effort: the error that failed it matters more)."""
    try:
        fs, root = fsspec.core.url_to_fs(directory)
        if _is_local(fs):
            shutil.rmtree(root, ignore_errors=True)
        elif fs.exists(root):
            fs.rm(root, recursive=True)
    except OSError as err:
        log.warning("could not remove the failed job's parts in %s: %s", directory, err)


summary_line = views.summary_line


__all__ = [
    "InferenceJob",
    "InferenceOptions",
    "InferenceResult",
    "TrainedModelError",
    "summary_line",
]
