"""The master of a training job: plan, launch, watch, recover, publish.

`TrainingJob.run()` is the whole life of a job:

1. claim `--output` (output_claim.py: a second job on it fails at once), then check the
   inputs (model definition and params, data, output location, the checkpoint to start
   from) and build the model once on the first records, before starting any process, so
   bad input fails in seconds with one clear line;
2. serve the Master gRPC service; the supervisor (supervisor.py) starts the parameter servers
   and the workers and watches them, with the training plug-in (training_plugin.py): PS
   progress and recovery from checkpoints, evaluation, progress display and TensorBoard;
3. when every task is done: pull the parameters, export the model, stop the processes, write
   the job report (a view of the event log, report.py) and publish everything at `--output`
   atomically. A failed job publishes nothing; its report goes to the log directory.
4. SIGTERM or SIGINT to the master (when it runs in the main thread): the workers are told to
   finish their minibatch, the processes stop, the report says "stopped" (in the log
   directory), and the checkpoints stay for a resume with --checkpoint_dir_for_init.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasticdl.runtime import auth
from elasticdl.runtime.callbacks import CallbackError, EarlyStopper, JobCallbacks
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.data.planner import count_files
from elasticdl.runtime.data.recordio import read_records
from elasticdl.runtime.data.shards import plan_shards, task_size
from elasticdl.runtime.job_config import JobConfig, host_port
from elasticdl.runtime.job_options import auto_minibatch
from elasticdl.runtime.master import console, keras_switch
from elasticdl.runtime.master import report as views
from elasticdl.runtime.master.bounds import job_bound
from elasticdl.runtime.master.chaos import parse_chaos
from elasticdl.runtime.master.curves import FILE_NAME as CURVES_FILE
from elasticdl.runtime.master.curves import write_png as write_curves
from elasticdl.runtime.master.events import CheckpointFound, EventLog, JobStopped
from elasticdl.runtime.master.export import export_model, write_trained_model
from elasticdl.runtime.master.heap import QuietHeap
from elasticdl.runtime.master.instances import InstanceManager, LocalInstanceManager, Role
from elasticdl.runtime.master.live_status import status_report
from elasticdl.runtime.master.options import TrainOptions
from elasticdl.runtime.master.preflight import build_model_once, init_checkpoint_version, job_spec
from elasticdl.runtime.master.progress import ProgressDisplay
from elasticdl.runtime.master.progress_journal import ProgressJournal, open_journal
from elasticdl.runtime.master.ps_health import PSHealthMonitor
from elasticdl.runtime.master.scaling import ScaleInbox
from elasticdl.runtime.master.servicer import MasterServicer, serve_master
from elasticdl.runtime.master.standbys import Standbys, instance_manager, job_start
from elasticdl.runtime.master.status_service import status_handler
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
)
from elasticdl.runtime.master.task_state import TaskState
from elasticdl.runtime.master.tensorboard import open_feed, set_aside_default
from elasticdl.runtime.master.training_plugin import Evaluations, TrainingPlugin
from elasticdl.runtime.one_line import describe, save_traceback
from elasticdl.runtime.output_claim import OutputClaim
from elasticdl.runtime.outputs import OutputError, check_output, publish, staging_dir
from elasticdl.runtime.zoo_source import ZooSource, resolve_zoo

log = logging.getLogger("elasticdl.master")

WORKERS_LEAVE_S = 0.5
"""At the end, how long workers get to leave by themselves (they poll every 0.2 s)."""
STOP_DRAIN_S = 20.0
"""On SIGTERM to the master, how long workers get to finish their minibatch and leave."""

summary_line = views.summary_line


@dataclass
class JobResult:
    status: str
    output: str
    report: dict[str, Any]
    error: str = ""

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


class TrainingJob:
    """One training job (PS and workers: local processes, or pods)."""

    def __init__(
        self,
        options: TrainOptions,
        instance_manager_factory: Callable[[Path, str, Path], InstanceManager] | None = None,
    ) -> None:
        """`instance_manager_factory(config_path, master_addr, log_dir)` makes the manager of
        PS and worker instances: local processes by default, pods on Kubernetes."""
        options.validate()
        self.options = options
        self._manager_factory = instance_manager_factory or LocalInstanceManager
        self.job_name = options.job_name or f"train-{uuid.uuid4().hex[:8]}"
        parse_chaos(options.chaos)  # bad --chaos fails here, before anything starts
        self.events = EventLog()
        self.events.listen(console.log_event)  # lost roles named as it happens
        self._eval_shards: list[Any] = []
        self._warm_up: tuple[str, int, int] = ("", 0, 0)
        self._eval_metrics: Any = None
        self._first_eval_version = options.evaluation_steps or 0
        self._resumed_from: dict[str, Any] | None = None
        self._checkpoint_dir = ""
        self.scale_inbox = ScaleInbox()
        """Requests to resize the running job (`elasticdl scale`); see scaling.py."""
        self.master_addr = ""
        """The master's gRPC address, once `run()` serves it."""
        self.ps_addrs: list[str] = []
        """The parameter servers' addresses, once `run()` started them."""
        self._journal: ProgressJournal | None = None
        self._callbacks = JobCallbacks()
        self._status_source: tuple[Supervisor, TaskState] | None = None
        self._started = time.monotonic()
        self._files: list[tuple[str, int]] = []

    # -- preparation ---------------------------------------------------------------------------

    def _prepare(self, zoo: ZooSource) -> tuple[JobConfig, TaskManager, list[bytes], Path]:
        o = self.options
        files = self._files
        if o.minibatch_size is None:
            o.minibatch_size = auto_minibatch(sum(count for _, count in files))
        size = task_size(files, o.records_per_task, o.num_workers, o.minibatch_size)
        shards = plan_shards(files, size)
        if not shards:
            raise ValueError(f"--training_data {o.training_data!r}: the files hold no records")
        sample = list(read_records(shards[0].file, 0, min(8, shards[0].num_records)))
        spec, features = job_spec(o, zoo, DatasetMetadata.for_file(shards[0].file, sample[0]))
        self._spec = spec
        self._bound = job_bound(o, len(shards), "tasks in an epoch", self._manager_factory)
        self._eval_shards = []
        if o.validation_data:
            self._eval_shards = plan_shards(count_files(o.validation_data), o.records_per_task)
            if not self._eval_shards:
                raise ValueError(f"--validation_data {o.validation_data!r}: no records")
            self._eval_metrics = spec.instantiate().eval_metrics()
            if not self._eval_metrics.names and self._eval_metrics.batch_fn is None:
                raise ValueError(
                    f"--validation_data was given but {o.model_def} defines no evaluation "
                    "metrics; define eval_metrics_fn (or the style's equivalent)"
                )
        checkpoint_dir = _local_absolute(o.resolved_checkpoint_dir)
        init_dir = _local_absolute(o.checkpoint_dir_for_init)
        # Resuming a job that stopped before it published, into the same --output: its
        # checkpoints are the one thing there, and the new job checkpoints next to them.
        own_checkpoints = _local_absolute(f"{o.output.rstrip('/')}/checkpoints")
        resuming_in_place = bool(init_dir) and init_dir.rstrip("/") == own_checkpoints
        check_output(o.output, resuming=resuming_in_place)
        if init_dir and init_dir.rstrip("/") == checkpoint_dir.rstrip("/"):
            init_dir = checkpoint_dir  # one spelling: the PS compares them
        self._checkpoint_dir = checkpoint_dir
        first = shards[0]
        self._warm_up = (
            first.file,
            first.start,
            first.start + min(o.minibatch_size, first.num_records),
        )
        config = job_config(o, self.job_name, zoo, checkpoint_dir, init_dir)
        config = dataclasses.replace(
            config, versions_per_epoch=_versions_per_epoch(shards, config), features=features
        )
        self._callbacks = _checked_callbacks(spec, self._eval_metrics, bool(self._eval_shards))
        instance = build_model_once(config, sample, shards[0].file, o.model_def, o.params)
        # Told once the job is known to start: a refused job's error stays its one line.
        if size != o.records_per_task:
            log.info(
                "job %s: tasks of %d records, not --records_per_task %d: an epoch has %d tasks "
                "for %d workers (one to train and one to hold ahead each)",
                self.job_name,
                size,
                o.records_per_task,
                len(shards),
                o.num_workers,
            )
        version, skipped = init_checkpoint_version(config, instance)
        if version is not None:
            log.info(
                "job %s starts from checkpoint version %d in %s",
                self.job_name,
                version,
                config.checkpoint_dir_for_init,
            )
            self._resumed_from = _resumed_from(config, version, skipped, resuming_in_place)
            if o.evaluation_steps:
                steps = o.evaluation_steps
                self._first_eval_version = (version // steps + 1) * steps
        log.info(
            "job %s: %s (%s style) on %d record(s) in %d file(s), %d task(s)/epoch x %d epoch(s)",
            self.job_name,
            o.model_def,
            spec.style,
            sum(n for _, n in files),
            len(files),
            len(shards),
            o.num_epochs,
        )
        from_version = self._resumed_from["model_version"] if self._resumed_from else None
        self._journal, resumed = open_journal(
            shards, o.seed, o.shuffle, checkpoint_dir, init_dir, from_version
        )
        tasks = TaskManager(
            shards,
            TaskManagerConfig(
                records_per_task=o.records_per_task,
                num_epochs=o.num_epochs,
                shuffle=o.shuffle,
                seed=o.seed,
                max_task_retries=o.max_task_retries,
                timeout_floor_s=o.task_timeout_floor_s,
            ),
            now=time.monotonic(),
            resumed=resumed,
        )
        work = Path(o.log_dir) if o.log_dir else Path(tempfile.mkdtemp(prefix=f"{self.job_name}-"))
        work.mkdir(parents=True, exist_ok=True)
        return config, tasks, sample, work

    # -- the job -------------------------------------------------------------------------------

    def run(self) -> JobResult:
        """Run the job to the end; raise ValueError/FileNotFoundError for bad input.

        The master runs in the job's Keras mode: here, or in a child process when this one
        imported TensorFlow with the other Keras (keras_switch.py)."""
        o = self.options
        self._started = time.monotonic()
        local = self._manager_factory is LocalInstanceManager
        with OutputClaim(o.output, self.job_name):  # first: one job per --output
            zoo = resolve_zoo(o.model_zoo)  # once: a git zoo's branch may move meanwhile
            likely = keras_switch.likely(o.keras_version, zoo.root, o.model_def)
            self._files = count_files(o.training_data)  # bad data fails before anything starts
            with job_start(local, o.num_ps + o.num_workers, likely) as standbys:
                return self._run(zoo, standbys)

    def _run(self, zoo: ZooSource, standbys: Standbys | None) -> JobResult:
        o = self.options
        mode = keras_switch.resolve(o.keras_version, zoo.root, o.model_def, o.params or "")
        o.keras_version = mode
        if not keras_switch.ensure(mode):
            if self._manager_factory is not LocalInstanceManager:
                raise keras_switch.cannot_switch(mode)
            if standbys is not None:
                standbys.close()  # in the other Keras: the child master starts its own
            child = dataclasses.replace(o, job_name=self.job_name)
            return keras_switch.run_elsewhere("train", child, mode)
        config, task_manager, sample, work = self._prepare(zoo)
        config, credentials = auth.secure(config, work, self.options.tls_dir)
        config_path = config.write(work / "job.json")
        servicer = MasterServicer(task_manager, scale_inbox=self.scale_inbox, hold_workers=True)
        server, port = serve_master(
            servicer,
            self.options.master_host,
            self.options.master_port,
            credentials,
            handlers=(status_handler(self.live_status),),
        )
        master_addr = host_port(self.options.master_host, port)
        try:
            manager = instance_manager(
                self._manager_factory, standbys, config_path, master_addr, work
            )
        except BaseException:
            server.stop(grace=None)
            raise
        manager.listen_for_scale(self.scale_inbox, self.live_status)
        servicer.admit_workers(lambda worker_id: manager.is_alive(Role.WORKER, worker_id))
        log.info("job %s: master on %s, logs in %s", self.job_name, master_addr, work)
        tasks = TaskState(servicer)
        supervisor = Supervisor(
            SupervisorConfig(
                num_workers=o.num_workers,
                min_workers=o.min_workers,
                max_worker_relaunches=o.max_worker_relaunches,
                num_ps=o.num_ps,
                max_ps_relaunches=o.max_ps_relaunches,
                checkpointed=bool(o.checkpoint_steps),
                chaos=parse_chaos(o.chaos),
                worker_bound=self._bound.as_max(),
                spare_workers=o.spare_workers,
            ),
            manager,
            tasks,
            self.events,
            JobPlugin(),  # until the PS are up: the training plug-in needs their client
            scale_inbox=self.scale_inbox,
        )
        servicer.serve_ps_addresses(lambda: list(supervisor.ps_addrs))
        servicer.offer_warm_up(*self._warm_up)
        self.master_addr = master_addr
        servicer.stop_at_version = self._callbacks.max_steps or 0
        self._status_source = (supervisor, tasks)
        progress = ProgressDisplay(task_manager.records_planned, o.num_epochs)
        tensorboard_url = (
            o.tensorboard_dir or self._callbacks.tensorboard_dir or o.resolved_tensorboard_dir
        )
        feed = open_feed(self.job_name, tensorboard_url, self.events, self._spec)
        live = views.LiveViews(self.events, progress, feed)
        error, status, training_s = "", "failed", 0.0
        ps_client = health = plugin = None
        heap = QuietHeap()
        try:
            with stop_on_signals(supervisor):
                supervisor.start()
                heap.start()
                if standbys is not None:
                    standbys.close()
                from elasticdl.runtime.ps.client import PSClient

                self.ps_addrs = supervisor.ps_addrs
                ps_client = PSClient(supervisor.ps_addrs, credentials=credentials)
                health = PSHealthMonitor(supervisor.ps_addrs, credentials=credentials)
                health.start()
                evaluations = Evaluations(
                    self._eval_shards,
                    self._eval_metrics,
                    o.evaluation_steps,
                    self._first_eval_version,
                    self.events,
                )
                if self._callbacks.early_stopping is not None:
                    evaluations.stopper = EarlyStopper(self._callbacks.early_stopping)
                plugin = supervisor.plugin = TrainingPlugin(
                    self.events,
                    evaluations,
                    live,
                    self._checkpoint_dir,
                    ps_client,
                    health,
                    o.num_ps,
                    self._journal,
                    heap,
                )
                supervisor.watch()
            tasks.release_workers()
            self.scale_inbox.close("training is over: the job is finishing")
            training_s = time.monotonic() - supervisor.t0
            supervisor.stop_workers(WORKERS_LEAVE_S)
            pulled = _final_parameters(ps_client)
            plugin.final_checkpoint_check()
            staged = staging_dir()
            try:
                evaluated = views.evaluation_section(self.events)
                facts: dict[str, str] = {}
                trained = export_model(
                    config,
                    pulled.values,
                    sample,
                    staged,
                    o.training_data,
                    pulled.version,
                    metrics=evaluated[-1]["metrics"] if evaluated else {},
                    facts=facts,
                )
                # Stopped before the report, so that the checkpoints it lists are all written.
                manager.shutdown()
                plugin.journal_progress(tasks)
                tasks.drain_events(self.events)
                live.update(tasks.snapshot(), 0, force=True)
                report = self._report(
                    tasks, "succeeded", "", training_s, supervisor, pulled.version
                )
                report.update({k: v for k, v in facts.items() if v})
                views.write(report, staged)
                write_curves(report["history"], staged / CURVES_FILE)
                write_trained_model(trained, staged)
                publish(staged, o.output)
                views.write_logged(report, work)  # "succeeded" only once it is
            except OutputError as err:  # PublishError included
                raise JobFailed(str(err)) from None
            except Exception as err:  # staging: a full TMPDIR (OSError, TF's ResourceExhausted)
                raise JobFailed(f"could not stage the model in {staged}: {describe(err)}") from None
            finally:
                shutil.rmtree(staged, ignore_errors=True)
            status = "succeeded"
        except JobFailed as err:
            error = str(err)
        except StopRequested as stop:
            kept = "; checkpoints are kept" if self._checkpoint_dir else ""
            status, error = "stopped", f"stopped by {stop}{kept}"
            self.events.add(JobStopped(time.monotonic(), str(stop)))
            log.warning("job %s: %s: workers finish their minibatch", self.job_name, stop)
            self.scale_inbox.close(f"job {self.job_name} is stopping")
            supervisor.drain_workers(STOP_DRAIN_S)
        except Exception as err:  # noqa: BLE001 - after start: one line, a report, no traceback
            error = describe(err)
            saved = save_traceback(err, work)
            log.debug("job %s failed", self.job_name, exc_info=err)
            error += f" (traceback in {saved})" if saved else ""
        finally:
            if plugin is not None and status != "succeeded":
                plugin.journal_progress(tasks)
            heap.stop()
            if health is not None:
                health.stop()
            self.scale_inbox.close(f"job {self.job_name} has ended")
            manager.shutdown()
            server.stop(grace=1.0)
            if ps_client is not None:
                ps_client.close()
            live.close()
        if status != "succeeded":
            if not (o.tensorboard_dir or self._callbacks.tensorboard_dir):
                moved = set_aside_default(o.output, work)
                if moved is not None:
                    log.info("job %s: its TensorBoard logs are in %s", self.job_name, moved)
            tasks.drain_events(self.events)
            seconds = training_s or time.monotonic() - supervisor.t0
            report = self._report(tasks, status, error, seconds, supervisor)
            views.write_logged(report, work)
            log.error("job %s %s: %s (report and logs in %s)", self.job_name, status, error, work)
        log.info("%s", summary_line(report))
        return JobResult(status, o.output, report, error)

    def live_status(self) -> dict[str, Any]:
        """The live report of the running job (`elasticdl status`; live_status.py)."""
        if self._status_source is None:
            return {"job_name": self.job_name, "state": "starting"}
        supervisor, tasks = self._status_source
        return status_report(
            self.job_name,
            self.events,
            tasks.snapshot(),
            supervisor.t0,
            time.monotonic(),
            self.options.num_epochs,
            supervisor.workers_alive(),
            tasks.holders(),
        )

    def _report(
        self,
        tasks: TaskState,
        status: str,
        error: str,
        seconds: float,
        supervisor: Supervisor,
        final_version: int = 0,
    ) -> dict[str, Any]:
        find_checkpoints(self.events, self._checkpoint_dir)
        o = self.options
        return views.training_report(
            self.events,
            tasks.counts(),
            job_name=self.job_name,
            status=status,
            error=error,
            model_def=o.model_def,
            output=o.output,
            workers=(o.num_workers, o.min_workers, supervisor.target),
            num_ps=o.num_ps,
            t0=supervisor.t0,
            seconds=seconds,
            preparing_s=supervisor.t0 - self._started,
            resumed_from=self._resumed_from,
            final_version=final_version,
        )


def find_checkpoints(events: EventLog, directory: str) -> None:
    """Log the valid checkpoints under the job's checkpoint directory, oldest first (once)."""
    from elasticdl.runtime.ps import checkpoint

    if not directory or events.of(CheckpointFound):
        return
    try:
        versions = checkpoint.valid_versions(directory)
    except Exception as err:  # noqa: BLE001 - the report is informative, not vital
        log.warning("could not list checkpoints in %s: %s", directory, err)
        return
    root, now = directory.rstrip("/"), time.monotonic()
    for v in versions:
        path = f"{root}/{checkpoint.version_dirname(v)}"
        events.add(CheckpointFound(now, v, path))


def _resumed_from(
    config: JobConfig, version: int, skipped: list[Any], in_place: bool
) -> dict[str, Any]:
    """The report's `resumed_from`; damaged versions of the job's own directory (a resume in
    place) are set aside, so that nothing restores from, counts or prunes them any more."""
    found: dict[str, Any] = {"dir": config.checkpoint_dir_for_init, "model_version": version}
    if skipped:
        found["skipped"] = [{"version": s.version, "reason": s.reason} for s in skipped]
    if in_place and skipped:
        from elasticdl.runtime.ps.checkpoint import set_aside

        for path in set_aside(config.checkpoint_dir_for_init, skipped):
            log.warning("job %s: a damaged checkpoint is set aside at %s", config.job_name, path)
    return found


def job_config(
    o: TrainOptions, job_name: str, zoo: Any, checkpoint_dir: str, init_dir: str
) -> JobConfig:
    """The config every PS and worker of the job reads (job.json)."""
    return JobConfig.from_options(
        o,
        job_name=job_name,
        model_zoo_root=str(zoo.root),
        model_zoo=zoo.url,
        model_zoo_commit=zoo.commit,
        checkpoint_dir=checkpoint_dir,
        checkpoint_dir_for_init=init_dir,
    )


def _versions_per_epoch(shards: list[Any], config: JobConfig) -> int:
    """The model versions one epoch makes: one per minibatch (async), one per
    `grads_to_wait` minibatches (sync). For a learning rate scheduled by epoch."""
    size = max(1, config.minibatch_size)
    minibatches = sum(math.ceil(s.num_records / size) for s in shards)
    per_version = 1 if config.use_async else max(1, config.grads_to_wait)
    return max(1, minibatches // per_version)


def _checked_callbacks(spec: Any, eval_metrics: Any, has_validation: bool) -> JobCallbacks:
    """The model file's callbacks, checked before anything starts (one line if unusable)."""
    callbacks = spec.job_callbacks()
    names = eval_metrics.names if eval_metrics is not None else []
    callbacks.check_metrics(names, has_validation)
    if callbacks.lr_by_version or callbacks.lr_by_epoch:
        import keras

        from elasticdl.runtime.ps.keras2_optimizer import as_keras3

        optimizer = as_keras3(spec.build_optimizer())  # what the PS applies (Keras 2 too)
        if not isinstance(getattr(optimizer, "_learning_rate", None), keras.Variable):
            raise CallbackError(
                "callbacks(): a LearningRateScheduler needs optimizer() to return an optimizer "
                "whose learning rate is a number (not a Keras schedule)"
            )
    return callbacks


def _final_parameters(ps_client: Any) -> Any:
    """The trained parameters; a PS that cannot give them fails the job in one line."""
    from elasticdl.runtime.ps.client import PSError

    try:
        pulled = ps_client.pull_all()
    except PSError as err:
        raise JobFailed(f"could not pull the trained parameters: {err}") from None
    if not pulled.initialized:
        raise JobFailed("the parameter servers hold no model: no worker pushed one")
    return pulled


def _local_absolute(url: str) -> str:
    """`url` as an absolute path when it is a local path (processes run in the log dir)."""
    if not url or "://" in url:
        return url
    return os.path.abspath(os.path.expanduser(url))
