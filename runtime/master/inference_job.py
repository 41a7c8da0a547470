"""Prediction and evaluation jobs on the local engine: a trained model over data, elastically.

`InferenceJob.run()` mirrors the training job without parameter servers:

1. read the TrainedModel (clear errors for a missing or corrupt one), rebuild its spec from the
   zoo it names, check the data has every feature the model was trained on, and check the
   output location, all before starting a process;
2. serve the Master service and start workers that load the trained parameters, through the
   instance manager the factory makes (local processes by default, pods on Kubernetes);
3. hand out one task per record range; a task lost with its worker (killed, hung past the
   timeout, preempted) goes back to the queue whole and its worker is relaunched within the
   budget. A preemption (exit 0 after SIGTERM with work left; on Kubernetes also a pod deleted,
   evicted or killed by SIGKILL without OOMKilled) is relaunched without counting against the
   budget; a worker killed for running out of memory (Kubernetes: OOMKilled) is not relaunched,
   it would run out again. Prediction tasks write one output part each, named by the range, so
   a redone task replaces its own part;
4. predict: check that every part is there and holds exactly its range's rows, write
   `job_report.json` and the `_SUCCESS` marker, publish (one rename for a local output).
   evaluate: merge the workers' additive metric states into the model's metrics.

A failed job leaves no output behind.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec

from elasticdl.runtime import auth
from elasticdl.runtime import prediction_output as parts
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.data.planner import count_files
from elasticdl.runtime.data.recordio import read_records
from elasticdl.runtime.data.shards import Shard, plan_shards
from elasticdl.runtime.job_config import JobConfig, host_port
from elasticdl.runtime.master.bounds import job_bound
from elasticdl.runtime.master.chaos import due_actions, parse_chaos
from elasticdl.runtime.master.instances import (
    InstanceExit,
    InstanceManager,
    LocalInstanceManager,
    Role,
)
from elasticdl.runtime.master.options import InferenceOptions
from elasticdl.runtime.master.report import event_dict
from elasticdl.runtime.master.servicer import MasterServicer, serve_master
from elasticdl.runtime.master.task_manager import (
    JobFailed,
    TaskManager,
    TaskManagerConfig,
    TaskType,
)
from elasticdl.runtime.model_spec import load_model_spec
from elasticdl.runtime.outputs import check_output
from elasticdl.runtime.trained_model import TrainedModelError, read_trained_model
from elasticdl.runtime.zoo_source import resolve_zoo

log = logging.getLogger("elasticdl.master")

SUCCESS_MARKER = "_SUCCESS"
_LOOP_S = 0.1
_EXIT_GRACE_S = 0.5
"""How long a pass that finds no worker alive waits for their exits to be reported."""
_SIGNALS = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "stop": signal.SIGSTOP}


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


@dataclass
class _Workers:
    launched: int = 0
    failed: int = 0
    relaunched: int = 0
    preempted: int = 0
    exits: list[dict[str, Any]] = field(default_factory=list)


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
        self.chaos = parse_chaos(options.chaos)
        self._workers = _Workers()
        self._events: list[dict[str, Any]] = []
        self._recoveries: list[dict[str, Any]] = []
        self._chaos_fired: list[str] = []
        self._killed: set[int] = set()
        self._last_refusal = ""
        """Why the last worker that ended was not relaunched (for the job's error)."""
        self._t0 = 0.0

    # -- preparation ---------------------------------------------------------------------------

    def _prepare(self) -> tuple[JobConfig, list[Shard], dict[str, Any], Path]:
        o = self.options
        files = read_trained_model(o.trained_model)
        trained_url = _absolute(o.trained_model)
        trained = files.trained
        zoo_url = o.model_zoo or trained.model_zoo or None
        if zoo_url and trained.model_zoo_commit and not o.model_zoo and "@" not in zoo_url:
            zoo_url = f"{zoo_url}@{trained.model_zoo_commit}"
        zoo = resolve_zoo(zoo_url)
        flags = _trained_flags(trained, zoo)
        spec = load_model_spec(trained.model_def, params=trained.model_def_params, zoo=zoo, **flags)
        counted = count_files(o.data)
        shards = plan_shards(counted, o.records_per_task)
        if not shards:
            raise ValueError(f"--data {o.data!r}: the files hold no records")
        job_bound(o, len(shards), "prediction tasks", self._manager_factory)
        sample = list(read_records(shards[0].file, 0, min(8, shards[0].num_records)))
        data_metadata = DatasetMetadata.from_example(sample[0])
        trained_metadata = files.input_metadata
        if trained_metadata is not None:
            missing = trained_metadata.missing_from(data_metadata)
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
        config = JobConfig.from_options(
            o,
            job_name=self.job_name,
            model_def=trained.model_def,
            model_zoo_root=str(zoo.root),
            model_zoo=zoo.url,
            model_zoo_commit=zoo.commit,
            params=trained.model_def_params,
            **flags,
            num_ps=0,
            shuffle=False,
            trained_model=trained_url,
            prediction_dir=prediction_dir,
            keep_columns=kept,
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
        """Run the job to the end; raise ValueError/FileNotFoundError for bad input."""
        o = self.options
        config, shards, facts, work = self._prepare()
        task_type = TaskType.PREDICTION if o.job_type == "predict" else TaskType.EVALUATION
        tasks = TaskManager(
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
            tasks, task_config=lambda task: {"part": self._part_of(task.shard, file_index)}
        )
        if task_type is TaskType.EVALUATION:
            # The first plan's task ids are its lineages: 1..n, one per shard.
            servicer.evaluations.start(
                int(facts["trained"].model_version), list(range(1, len(shards) + 1)), 0.0
            )
        config, credentials = auth.secure(config, work)
        config_path = config.write(work / "job.json")
        server, port = serve_master(servicer, o.master_host, o.master_port, credentials)
        master_addr = host_port(o.master_host, port)
        try:
            manager = self._manager_factory(config_path, master_addr, work)
        except BaseException:
            server.stop(grace=None)
            if config.prediction_dir:
                _remove(config.prediction_dir)
            raise
        servicer.admit_workers(lambda: manager.alive(Role.WORKER))
        log.info("job %s: master on %s, logs in %s", self.job_name, master_addr, work)
        self._t0 = time.monotonic()
        status, error, metrics = "failed", "", {}
        rows_written = 0
        try:
            for _ in range(o.num_workers):
                self._launch(manager)
            self._watch(servicer, manager)
            seconds = time.monotonic() - self._t0
            if task_type is TaskType.EVALUATION:
                metrics = self._merged_metrics(servicer, facts["metrics"])
                report = self._report(servicer, "succeeded", "", seconds, facts, metrics=metrics)
            else:
                rows_written = self._check_parts(config.prediction_dir, shards, file_index)
                report = self._report(servicer, "succeeded", "", seconds, facts, rows_written)
                self._publish(config.prediction_dir, report)
            status = "succeeded"
        except JobFailed as err:
            error = str(err)
            report = self._report(servicer, "failed", error, time.monotonic() - self._t0, facts)
        finally:
            manager.shutdown()
            server.stop(grace=1.0)
        (work / "job_report.json").write_text(json.dumps(report, indent=1))
        if status == "failed":
            if config.prediction_dir:
                _remove(config.prediction_dir)
            log.error("job %s failed: %s (report and logs in %s)", self.job_name, error, work)
        log.info("%s", summary_line(report))
        return InferenceResult(status, o.output, report, error, metrics)

    def _launch(self, manager: InstanceManager) -> int:
        worker_id = self._workers.launched
        self._workers.launched += 1
        manager.start_worker(worker_id, [])
        return worker_id

    def _elapsed(self) -> float:
        return round(time.monotonic() - self._t0, 3)

    def _event(self, kind: str, **detail: Any) -> None:
        self._events.append({"kind": kind, "at_s": self._elapsed(), **detail})
        log.info("%s: %s", kind, detail)

    def _watch(self, servicer: MasterServicer, manager: InstanceManager) -> None:
        tasks = servicer.tasks
        while True:
            for exit_ in manager.exits(timeout=_LOOP_S):
                self._on_exit(exit_, servicer, manager)
            with servicer.lock:
                if tasks.failure is not None:
                    raise JobFailed(tasks.failure)
                if tasks.finished:
                    return
                expired = [
                    (worker_id, task, tasks.timeout_of(task.task_id))
                    for worker_id, task in tasks.expired(time.monotonic())
                    if worker_id not in self._killed
                ]
                tasks_done = dict(servicer.stats.tasks_done)
            for worker_id, task, timeout in expired:
                self._event(
                    "task_timeout",
                    worker_id=worker_id,
                    task_id=task.task_id,
                    timeout_s=round(timeout, 3),
                )
                self._killed.add(worker_id)  # once: its exit requeues the task
                manager.signal(Role.WORKER, worker_id, signal.SIGKILL)
            self._fire_chaos(manager, tasks_done)
            if not manager.alive(Role.WORKER):
                # Exits that arrived since this pass began are relaunched first: only workers
                # gone for good fail the job.
                for exit_ in manager.exits(timeout=_EXIT_GRACE_S):
                    self._on_exit(exit_, servicer, manager)
            if not manager.alive(Role.WORKER):
                last = self._workers.exits[-1]["detail"] if self._workers.exits else "none"
                raise JobFailed(
                    "all workers are gone and "
                    + (self._last_refusal or f"none is left to relaunch; last worker exit: {last}")
                )

    def _on_exit(
        self, exit_: InstanceExit, servicer: MasterServicer, manager: InstanceManager
    ) -> None:
        with servicer.lock:
            unfinished = servicer.tasks.doing(exit_.index)
            finished = servicer.tasks.finished
        if exit_.exit_code == 0 and not unfinished and finished:
            return
        # Exit 0 with work left is a preemption notice obeyed (SIGTERM: the worker finished its
        # task first). A manager may know more (Kubernetes, see PodExit): a pod deleted, evicted
        # or killed by SIGKILL without OOMKilled is "preempted", an OOM kill is "oom".
        preempted = exit_.exit_code == 0 or exit_.reason == "preempted"
        reason = "preempted" if preempted else exit_.reason
        detail = exit_detail(exit_, reason)
        self._workers.exits.append(
            {"worker_id": exit_.index, "reason": reason, "at_s": self._elapsed(), "detail": detail}
        )
        self._event("worker_exit", worker_id=exit_.index, reason=reason, detail=detail)
        if unfinished:
            with servicer.lock:
                requeued = servicer.tasks.recover_worker(
                    exit_.index,
                    time.monotonic(),
                    cause=f"worker {exit_.index} {reason}",
                    detected_at=exit_.at,
                    count_failure=not preempted,
                )
                failure = servicer.tasks.failure
                finished = servicer.tasks.finished
            self._recoveries.append(
                {
                    "cause": f"worker {exit_.index} {reason}",
                    "seconds": round(time.monotonic() - exit_.at, 4),
                    "tasks_requeued": len(requeued),
                }
            )
            if failure is not None:
                raise JobFailed(failure)
        if preempted:
            self._workers.preempted += 1
        else:
            self._workers.failed += 1
        if finished:
            return  # every task is done: nothing for a new worker to do
        if reason == "oom":
            # Relaunching an out-of-memory worker would fail the same way.
            self._refuse(exit_.index, f"worker {exit_.index} ran out of memory: {detail}")
            return
        if not preempted:
            if self._workers.relaunched >= self.options.max_worker_relaunches:
                self._refuse(
                    exit_.index,
                    "the relaunch budget (--max_worker_relaunches="
                    f"{self.options.max_worker_relaunches}) is spent; last worker exit: {detail}",
                )
                return
            self._workers.relaunched += 1
        new_id = self._launch(manager)
        self._event("worker_relaunched", worker_id=new_id, replaces=exit_.index)

    def _refuse(self, worker_id: int, why: str) -> None:
        self._last_refusal = why
        self._event("relaunch_refused", worker_id=worker_id, reason=why)

    def _fire_chaos(self, manager: InstanceManager, tasks_done: dict[int, int]) -> None:
        for action in due_actions(self.chaos, time.monotonic() - self._t0, tasks_done):
            self._chaos_fired.append(f"{action} at {self._elapsed()}s")
            if action.action == "add":
                self._event("worker_added", worker_id=self._launch(manager))
            elif action.action == "remove":
                alive = manager.alive(Role.WORKER)
                if alive:
                    manager.signal(Role.WORKER, alive[-1], signal.SIGTERM)
                    self._event("worker_removed", worker_id=alive[-1])
            else:
                for index in action.group or (0,):
                    sent = manager.signal(Role.WORKER, index, _SIGNALS[action.action])
                    self._event("chaos", action=str(action), worker_id=index, delivered=sent)

    # -- the end ---------------------------------------------------------------------------------

    def _merged_metrics(self, servicer: MasterServicer, eval_metrics: Any) -> dict[str, float]:
        from elasticdl.runtime.metrics import compute

        with servicer.lock:
            completed = servicer.evaluations.pop_complete()
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
        servicer: MasterServicer,
        status: str,
        error: str,
        seconds: float,
        facts: dict[str, Any],
        rows_written: int = 0,
        metrics: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        with servicer.lock:
            tasks = servicer.tasks
            report: dict[str, Any] = {
                "job_name": self.job_name,
                "kind": self.options.job_type,
                "status": status,
                "error": error,
                "trained_model": self.options.trained_model,
                "model_version": int(facts["trained"].model_version),
                "data": self.options.data,
                "output": self.options.output,
                "records": {"input": facts["records"]},
                "tasks": {
                    "finished": tasks.finished_tasks,
                    "requeued": sum(1 for e in tasks.events if e.kind == "task_requeued"),
                    "by_worker": {str(k): v for k, v in servicer.stats.tasks_done.items()},
                    "events": [event_dict(e, self._t0) for e in tasks.events],
                },
                "workers": {
                    "initial": self.options.num_workers,
                    "launched": self._workers.launched,
                    "failed": self._workers.failed,
                    "relaunched": self._workers.relaunched,
                    "preempted": self._workers.preempted,
                    "exits": self._workers.exits,
                },
                "recoveries": self._recoveries,
                "events": self._events,
                "chaos": self._chaos_fired,
                "seconds": round(seconds, 3),
            }
        if self.options.job_type == "predict":
            report["records"]["written"] = rows_written
            report["output_format"] = self.options.output_format
            report["rows_per_second"] = round(rows_written / max(seconds, 1e-9), 1)
        else:
            report["metrics"] = metrics or {}
        return report


def exit_detail(exit_: InstanceExit, reason: str) -> str:
    """How a worker ended, in one line: the instance manager's own words when it has them
    (Kubernetes: `PodExit.message`, e.g. "pod j-worker-1 was OOMKilled ...: raise memory in
    --worker_resource_request ..."), else the exit code or signal, with the last line of a
    failed worker's log."""
    detail = exit_.describe()
    if getattr(exit_, "message", "") or reason != "failed":
        return detail
    last = [line for line in exit_.log_tail.strip().splitlines() if line.strip()]
    return detail + (f": {last[-1][:300]}" if last else "")


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
    plain = load_model_spec(trained.model_def, params=trained.model_def_params, zoo=zoo)
    return {
        role: source
        for role, source in recorded.items()
        if source and plain.sources.get(role) != source
    }


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


def summary_line(report: dict[str, Any]) -> str:
    """One line that says how a prediction or evaluation job went."""
    records = report.get("records", {})
    workers = report.get("workers", {})
    text = (
        f"job {report.get('job_name')} ({report.get('kind')}) {report.get('status')}: "
        f"{records.get('input', 0)} input records"
    )
    if report.get("kind") == "predict":
        text += f", {records.get('written', 0)} rows written"
    text += (
        f", {report.get('tasks', {}).get('requeued', 0)} task(s) redone, "
        f"{workers.get('launched', 0)} worker(s) launched, {workers.get('failed', 0)} failed"
    )
    if report.get("metrics"):
        text += ", " + ", ".join(f"{k}={v:.4g}" for k, v in report["metrics"].items())
    if report.get("error"):
        text += f"; error: {report['error']}"
    return text


__all__ = [
    "InferenceJob",
    "InferenceOptions",
    "InferenceResult",
    "TrainedModelError",
    "summary_line",
]
