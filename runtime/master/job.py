"""The master of a training job on the local engine: plan, launch, watch, recover, publish.

`TrainingJob.run()` is the whole life of a job:

1. check the inputs (model definition and params, data, output location) before starting any
   process, so bad input fails in seconds with one clear message;
2. serve the Master gRPC service, start the parameter servers and the workers;
3. loop: react at once to process exits (recover the dead worker's unfinished records from
   the PS-confirmed progress, relaunch within the budget), kill workers whose task timed out,
   fire chaos actions, apply resize requests (scaling.py: grow, or retire the newest), fail
   the job once fewer than --min_workers are alive, show progress, write TensorBoard points;
4. when every task is done: pull the parameters, export the model, stop the processes, write
   the job report, and publish everything at `--output` atomically. A failed job publishes
   nothing; its report goes to the log directory.

Failures are attributed: the master remembers every signal it sent itself (chaos, a task
timeout), so an instance killed by SIGKILL that it did not send is reported as killed from
outside the job, which on one machine is most often the kernel's OOM killer.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elasticdl.runtime import auth
from elasticdl.runtime.data.planner import count_files
from elasticdl.runtime.data.recordio import read_records
from elasticdl.runtime.data.shards import plan_shards
from elasticdl.runtime.job_config import JobConfig, host_port
from elasticdl.runtime.master.bounds import job_bound
from elasticdl.runtime.master.chaos import ChaosAction, due_actions, parse_chaos
from elasticdl.runtime.master.export import export_model, write_trained_model
from elasticdl.runtime.master.instances import (
    InstanceExit,
    InstanceManager,
    LocalInstanceManager,
    Role,
)
from elasticdl.runtime.master.options import TrainOptions
from elasticdl.runtime.master.progress import ProgressDisplay
from elasticdl.runtime.master.report import event_dict
from elasticdl.runtime.master.scaling import (
    ScaleError,
    ScaleInbox,
    ScaleRequest,
    check_target,
    plan_scale,
)
from elasticdl.runtime.master.servicer import MasterServicer, serve_master
from elasticdl.runtime.master.task_manager import (
    JobFailed,
    TaskManager,
    TaskManagerConfig,
)
from elasticdl.runtime.model_spec import load_model_spec
from elasticdl.runtime.outputs import check_output, publish, staging_dir
from elasticdl.runtime.zoo_source import resolve_zoo

log = logging.getLogger("elasticdl.master")

_LOOP_S = 0.1
_EXIT_GRACE_S = 0.5
"""How long a pass that finds no worker alive waits for their exits to be reported."""
_WORKERS_LEAVE_S = 0.5
"""At the end, how long workers get to leave by themselves (they poll every 0.2 s)."""
_SIGNALS = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "stop": signal.SIGSTOP}


@dataclass
class WorkerRecord:
    worker_id: int
    launched_at: float
    replaces: int | None = None
    exit: dict[str, Any] | None = None


@dataclass
class JobResult:
    status: str
    output: str
    report: dict[str, Any]
    error: str = ""

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


@dataclass
class _State:
    workers: dict[int, WorkerRecord] = field(default_factory=dict)
    next_worker_id: int = 0
    relaunches: int = 0
    preemptions: int = 0
    failed_workers: int = 0
    ps_exits: list[dict[str, Any]] = field(default_factory=list)
    ps_relaunches: int = 0
    recoveries: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    sent: dict[tuple[Role, int], str] = field(default_factory=dict)
    """Why the master itself signalled an instance (chaos, task timeout), by (role, index)."""
    timed_out: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Workers killed for a task timeout -> their entry in `failures`."""
    retired: set[int] = field(default_factory=set)
    """Workers told to leave because the job shrank: their exit is neither failure nor loss."""
    target: int = 0
    """How many workers the job wants now: --num_workers, then what `elasticdl scale` asked."""
    scaling: list[dict[str, Any]] = field(default_factory=list)
    last_refusal: str = ""
    """Why the last worker that ended was not relaunched (the job fails if too few are left)."""
    chaos_fired: list[str] = field(default_factory=list)


class TrainingJob:
    """One training job on the local engine (subprocess PS and workers)."""

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
        self.chaos: list[ChaosAction] = parse_chaos(options.chaos)
        self._state = _State()
        self._t0 = 0.0
        self._ps_addrs: list[str] = []
        self._tb_writer: Any = None
        self._tb_written = 0
        self._eval_shards: list[Any] = []
        self._eval_metrics: Any = None
        self._next_eval_version = options.evaluation_steps or 0
        self._final_eval_started = False
        self._resumed_from: dict[str, Any] | None = None
        self._checkpoint_dir = ""
        self._final_version: int | None = None
        self.evaluation_history: list[dict[str, Any]] = []
        self.scale_inbox = ScaleInbox()
        """Requests to resize the running job (`elasticdl scale`); see scaling.py."""
        self.master_addr = ""
        """The master's gRPC address, once `run()` serves it."""

    # -- preparation ---------------------------------------------------------------------------

    def _prepare(self) -> tuple[JobConfig, TaskManager, list[bytes], Path]:
        o = self.options
        zoo = resolve_zoo(o.model_zoo)
        spec = load_model_spec(
            o.model_def,
            params=o.params,
            dataset_fn=o.dataset_fn,
            loss=o.loss,
            optimizer=o.optimizer,
            eval_metrics_fn=o.eval_metrics_fn,
            zoo=zoo,
        )
        files = count_files(o.training_data)
        shards = plan_shards(files, o.records_per_task)
        if not shards:
            raise ValueError(f"--training_data {o.training_data!r}: the files hold no records")
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
        sample = list(read_records(shards[0].file, 0, min(8, shards[0].num_records)))
        config = JobConfig.from_options(
            o,
            job_name=self.job_name,
            model_zoo_root=str(zoo.root),
            model_zoo=zoo.url,
            model_zoo_commit=zoo.commit,
            checkpoint_dir=checkpoint_dir,
            checkpoint_dir_for_init=init_dir,
        )
        self._check_checkpoints(config, sample, shards[0].file)
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
        )
        work = Path(o.log_dir) if o.log_dir else Path(tempfile.mkdtemp(prefix=f"{self.job_name}-"))
        work.mkdir(parents=True, exist_ok=True)
        return config, tasks, sample, work

    def _check_checkpoints(self, config: JobConfig, sample: list[bytes], file: str) -> None:
        """Fail before starting anything if --checkpoint_dir_for_init does not fit the model."""
        if not config.checkpoint_dir_for_init:
            return
        from elasticdl.runtime.model_build import build_model
        from elasticdl.runtime.ps import checkpoint
        from elasticdl.runtime.variables import named_variables

        instance = config.load_spec().instantiate()
        from elasticdl.runtime.data.metadata import DatasetMetadata

        build_model(instance, sample, metadata=DatasetMetadata.for_file(file, sample[0]))
        trainable, state = named_variables(instance.model)
        shapes = {name: tuple(v.shape) for name, v in {**trainable, **state}.items()}
        version = checkpoint.check_directory(
            config.checkpoint_dir_for_init, shapes, config.model_def
        )
        log.info(
            "job %s starts from checkpoint version %d in %s",
            self.job_name,
            version,
            config.checkpoint_dir_for_init,
        )
        self._resumed_from = {"dir": config.checkpoint_dir_for_init, "model_version": version}
        steps = self.options.evaluation_steps
        if steps:
            self._next_eval_version = (version // steps + 1) * steps

    # -- the job -------------------------------------------------------------------------------

    def run(self) -> JobResult:
        """Run the job to the end; raise ValueError/FileNotFoundError for bad input."""
        config, tasks, sample, work = self._prepare()
        config, credentials = auth.secure(config, work, self.options.tls_dir)
        config_path = config.write(work / "job.json")
        servicer = MasterServicer(tasks, scale_inbox=self.scale_inbox, hold_workers=True)
        server, port = serve_master(
            servicer, self.options.master_host, self.options.master_port, credentials
        )
        master_addr = host_port(self.options.master_host, port)
        try:
            manager = self._manager_factory(config_path, master_addr, work)
        except BaseException:
            server.stop(grace=None)
            raise
        servicer.admit_workers(lambda: manager.alive(Role.WORKER))
        manager.listen_for_scale(self.scale_inbox)
        self.master_addr = master_addr
        log.info("job %s: master on %s, logs in %s", self.job_name, master_addr, work)
        progress = ProgressDisplay(tasks.records_planned, self.options.num_epochs)
        self._t0 = time.monotonic()
        error = ""
        report: dict[str, Any] = {}
        ps_client = None
        try:
            self._ps_addrs = [manager.start_ps(i) for i in range(self.options.num_ps)]
            self._state.target = self.options.num_workers
            for _ in range(self.options.num_workers):
                self._launch_worker(manager)
            from elasticdl.runtime.ps.client import PSClient

            ps_client = PSClient(self._ps_addrs, credentials=credentials)
            self._open_tensorboard(work)
            self._watch(servicer, manager, ps_client, progress)
            servicer.release_workers()
            self.scale_inbox.close("training is over: the job is finishing")
            training_s = time.monotonic() - self._t0
            self._stop_workers(manager)
            values, version = self._final_parameters(ps_client)
            self._final_version = version
            staged = staging_dir()
            final_metrics = (
                self.evaluation_history[-1]["metrics"] if self.evaluation_history else {}
            )
            trained = export_model(
                config,
                values,
                sample,
                staged,
                self.options.training_data,
                version,
                metrics=final_metrics,
            )
            # Stopped before the report, so that the checkpoints it lists are all written.
            manager.shutdown()
            report = self._report(servicer, "succeeded", "", training_s)
            self._write_outputs(staged, report, work)
            write_trained_model(trained, staged)
            publish(staged, self.options.output)
            status = "succeeded"
        except JobFailed as err:
            error = str(err)
            status = "failed"
        finally:
            self.scale_inbox.close(f"job {self.job_name} has ended")
            progress.close()
            manager.shutdown()
            server.stop(grace=1.0)
            if ps_client is not None:
                ps_client.close()
            if self._tb_writer is not None:
                self._tb_writer.close()
        if status == "failed":
            report = self._report(servicer, "failed", error, time.monotonic() - self._t0)
            (work / "job_report.json").write_text(json.dumps(report, indent=1))
            log.error("job %s failed: %s (report and logs in %s)", self.job_name, error, work)
        log.info("%s", summary_line(report))
        return JobResult(status, self.options.output, report, error)

    def _launch_worker(self, manager: InstanceManager, replaces: int | None = None) -> int:
        worker_id = self._state.next_worker_id
        self._state.next_worker_id += 1
        manager.start_worker(worker_id, self._ps_addrs)
        self._state.workers[worker_id] = WorkerRecord(worker_id, self._elapsed(), replaces)
        return worker_id

    def _elapsed(self) -> float:
        return round(time.monotonic() - self._t0, 3)

    def _event(self, kind: str, **detail: Any) -> None:
        self._state.events.append({"kind": kind, "at_s": self._elapsed(), **detail})
        log.info("%s: %s", kind, detail)

    def _watch(
        self,
        servicer: MasterServicer,
        manager: InstanceManager,
        ps_client: Any,
        progress: ProgressDisplay,
    ) -> None:
        tasks = servicer.tasks
        while True:
            for exit_ in manager.exits(timeout=_LOOP_S):
                self._on_exit(exit_, servicer, manager, ps_client)
            self._evaluate(servicer)
            with servicer.lock:
                if tasks.failure is not None:
                    raise JobFailed(tasks.failure)
                if tasks.finished and not self._start_final_evaluation(servicer):
                    if not servicer.evaluations.pending:
                        break
                now = time.monotonic()
                expired = [(w, t, tasks.timeout_of(t.task_id)) for w, t in tasks.expired(now)]
                tasks_done = dict(servicer.stats.tasks_done)
            for worker_id, task, timeout_s in expired:
                self._on_timeout(manager, worker_id, task.task_id, timeout_s)
            self._fire_chaos(manager, tasks_done)
            self._apply_scale_requests(manager)
            if len(manager.alive(Role.WORKER)) < self.options.min_workers:
                # Workers that died since this pass began (chaos may kill them all at once)
                # are relaunched first: only workers gone for good fail the job.
                for exit_ in manager.exits(timeout=_EXIT_GRACE_S):
                    self._on_exit(exit_, servicer, manager, ps_client)
                alive = len(manager.alive(Role.WORKER))
                if alive < self.options.min_workers:
                    raise JobFailed(self._too_few_workers(alive))
            alive = manager.alive(Role.WORKER)
            with servicer.lock:
                records = tasks.records_trained
                epoch = tasks.epoch
                loss = servicer.stats.last_loss
            progress.update(records, epoch, loss, len(alive))
            self._write_tensorboard(servicer)
        with servicer.lock:
            progress.update(tasks.records_trained, tasks.epoch, servicer.stats.last_loss, 0, True)
        self._write_tensorboard(servicer)

    def _stop_workers(self, manager: InstanceManager) -> None:
        """Every task is done: workers leave when told so; the rest are killed after a moment.

        A worker still starting up (a relaunch late in the job) acts on SIGTERM only once it
        is ready, seconds later; it holds nothing, so it is not waited for.
        """
        deadline = time.monotonic() + _WORKERS_LEAVE_S
        while manager.alive(Role.WORKER) and time.monotonic() < deadline:
            time.sleep(0.02)
        for worker_id in manager.alive(Role.WORKER):
            self._state.sent[(Role.WORKER, worker_id)] = "job finished"
            manager.signal(Role.WORKER, worker_id, signal.SIGKILL)

    def _final_metrics(self) -> dict[str, float]:
        return dict(self.evaluation_history[-1]["metrics"]) if self.evaluation_history else {}

    def _start_final_evaluation(self, servicer: MasterServicer) -> bool:
        """Queue the end-of-training evaluation once; True if it was queued now."""
        if not self._eval_shards or self._final_eval_started:
            return False
        self._final_eval_started = True
        self._queue_evaluation(servicer, servicer.stats.model_version)
        return True

    def _queue_evaluation(self, servicer: MasterServicer, version: int) -> None:
        from elasticdl.runtime.master.task_manager import TaskType

        lineages = servicer.tasks.add_tasks(self._eval_shards, TaskType.EVALUATION, version)
        servicer.evaluations.start(version, lineages, time.monotonic())
        self._event("evaluation_started", model_version=version, tasks=len(lineages))

    def _evaluate(self, servicer: MasterServicer) -> None:
        """Start step-based evaluation rounds and collect the ones that completed."""
        from elasticdl.runtime.metrics import compute

        if not self._eval_shards:
            return
        with servicer.lock:
            version = servicer.stats.model_version
            steps = self.options.evaluation_steps
            if steps and not self._final_eval_started and version >= self._next_eval_version:
                self._queue_evaluation(servicer, version)
                self._next_eval_version = (version // steps + 1) * steps
            completed = servicer.evaluations.pop_complete()
        for round_, state in completed:
            metrics = compute(self._eval_metrics, state)
            seconds = round(time.monotonic() - round_.started_at, 3)
            entry = {"model_version": round_.version, "metrics": metrics, "seconds": seconds}
            self.evaluation_history.append(entry)
            log.info("evaluation at model version %d: %s", round_.version, metrics)
            if self._tb_writer is not None:
                import tensorflow as tf

                with self._tb_writer.as_default():
                    for name, value in metrics.items():
                        tf.summary.scalar(f"eval/{name}", value, step=round_.version)
                self._tb_writer.flush()

    def _too_few_workers(self, alive: int) -> str:
        if alive == 0:
            text = "all workers are gone"
        else:
            text = (
                f"only {alive} worker(s) alive, fewer than --min_workers={self.options.min_workers}"
            )
        if self._state.last_refusal:
            text += f" and {self._state.last_refusal}"
        failed = [f for f in self._state.failures if f["role"] == "worker"]
        if not failed:
            return text
        last = failed[-1]
        if len(failed) > 1 and all(f["cause"] == last["cause"] for f in failed):
            return f"{text}: {len(failed)} worker failures, each {last['cause']}"
        last_one = f"worker {last['id']} {last['cause']}"
        return f"{text}: {len(failed)} worker failure(s), the last: {last_one}"

    def _on_timeout(
        self, manager: InstanceManager, worker_id: int, task_id: int, timeout_s: float
    ) -> None:
        """Kill a worker whose task made no progress for the task timeout (once)."""
        if worker_id in self._state.timed_out:
            return  # killed already; its exit is on its way
        cause = (
            f"hung: no progress on task {task_id} for more than the task timeout "
            f"({timeout_s:.1f} s); killed by the master with SIGKILL"
        )
        self._event(
            "task_timeout", worker_id=worker_id, task_id=task_id, timeout_s=round(timeout_s, 3)
        )
        failure = self._failure(Role.WORKER, worker_id, cause, self._elapsed())
        self._state.timed_out[worker_id] = failure
        self._state.sent[(Role.WORKER, worker_id)] = "task timeout"
        self._state.retired.discard(worker_id)
        manager.signal(Role.WORKER, worker_id, signal.SIGKILL)

    def _failure(self, role: Role, index: int, cause: str, at_s: float) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "role": str(role),
            "id": index,
            "cause": cause,
            "at_s": at_s,
            "requeue_s": None,
            "tasks_requeued": 0,
            "records_requeued": 0,
        }
        self._state.failures.append(entry)
        return entry

    def _exit_cause(self, exit_: InstanceExit, last_line: str) -> str:
        """Why an instance ended, as a phrase after "worker 3 " / "parameter server 0 "."""
        sent = self._state.sent.pop((exit_.role, exit_.index), "")
        message = getattr(exit_, "message", "")
        if message and not sent:
            return message  # the instance manager knows (e.g. Kubernetes: OOMKilled, Evicted)
        if exit_.signal is not None:
            name = signal.Signals(exit_.signal).name
            if sent:
                return f"killed by {name} ({sent})"
            if exit_.signal == signal.SIGKILL:
                return (
                    f"killed by SIGKILL from outside the job (exit status {128 + exit_.signal}:"
                    " most often the kernel's OOM killer; check how much memory it needs)"
                )
            return f"killed by {name}"
        if exit_.exit_code == 0:
            return "exited" + (f" ({sent})" if sent else "")
        return f"exited with code {exit_.exit_code}" + (f": {last_line}" if last_line else "")

    def _on_exit(
        self,
        exit_: InstanceExit,
        servicer: MasterServicer,
        manager: InstanceManager,
        ps_client: Any,
    ) -> None:
        last_line = _last_line(exit_.log_tail)
        if exit_.role is Role.PS:
            self._on_ps_exit(exit_, servicer, manager, last_line)
            return
        record = self._state.workers.get(exit_.index)
        cause = self._exit_cause(exit_, last_line)
        with servicer.lock:
            unfinished = servicer.tasks.doing(exit_.index)
            finished = servicer.tasks.finished
        # Exit 0 with work left is a preemption notice obeyed; a manager may also know a
        # preemption (Kubernetes: evicted, deleted, exit 137 without OOMKilled) or an OOM kill.
        # A worker the master retired (the job shrank) is neither a failure nor a loss, however
        # it ended (on Kubernetes its pod was deleted).
        retired = exit_.index in self._state.retired
        preempted = (
            retired or (exit_.exit_code == 0 and not finished) or exit_.reason == "preempted"
        )
        out_of_memory = exit_.reason == "oom"
        reason = exit_.reason
        if preempted:
            reason = "retired" if retired else "preempted"
        detail = exit_.describe() + (f": {last_line}" if last_line and reason == "failed" else "")
        if record is not None:
            record.exit = {
                "reason": reason,
                "exit_code": exit_.exit_code,
                "signal": exit_.signal,
                "at_s": round(exit_.at - self._t0, 3),
                "detail": detail,
            }
        if exit_.exit_code == 0 and not unfinished and (finished or retired):
            return
        self._event("worker_exit", worker_id=exit_.index, reason=reason, detail=detail)
        failure = hung = None
        if not preempted:
            self._state.failed_workers += 1
            hung = self._state.timed_out.pop(exit_.index, None)
            failure = hung or self._failure(
                Role.WORKER, exit_.index, cause, round(exit_.at - self._t0, 3)
            )
        if unfinished:
            applied = {}
            try:
                applied = ps_client.applied_progress([t.task_id for t in unfinished])
            except Exception as err:  # noqa: BLE001 - PS gone: fall back to reported progress
                log.warning("could not ask the PS for applied progress: %s", err)
            with servicer.lock:
                requeued = servicer.tasks.recover_worker(
                    exit_.index,
                    time.monotonic(),
                    cause=f"worker {exit_.index} {reason if preempted else cause}",
                    detected_at=exit_.at,
                    applied=applied,
                    count_failure=not preempted,
                )
                job_failure = servicer.tasks.failure
            seconds = round(time.monotonic() - exit_.at, 4)
            self._state.recoveries.append(
                {
                    "cause": f"worker {exit_.index} {reason}",
                    "seconds": seconds,
                    "tasks_requeued": len(requeued),
                }
            )
            if failure is not None:
                # From the failure (a hang: its detection) to its work being back in the queue.
                failure["requeue_s"] = (
                    round(time.monotonic() - self._t0 - failure["at_s"], 4) if hung else seconds
                )
                failure["tasks_requeued"] = len(requeued)
                failure["records_requeued"] = sum(t.num_records for t in requeued)
            if job_failure is not None:
                raise JobFailed(job_failure)
        if retired:
            return
        if preempted:
            self._state.preemptions += 1
        if len(self._active_workers(manager)) >= self._state.target:
            self._event(
                "not_relaunched",
                worker_id=exit_.index,
                reason=f"the job has its {self._state.target} worker(s)",
            )
            return
        if out_of_memory and not preempted:
            # Relaunching an out-of-memory worker would fail the same way: not relaunched.
            self._state.last_refusal = (
                f"worker {exit_.index} ran out of memory (not relaunched: it would again)"
            )
            self._event("relaunch_refused", worker_id=exit_.index, reason=cause)
            return
        if not preempted:  # a preempted worker did nothing wrong: relaunched for free
            if self._state.relaunches >= self.options.max_worker_relaunches:
                self._state.last_refusal = (
                    "the relaunch budget "
                    f"(--max_worker_relaunches={self.options.max_worker_relaunches}) is spent"
                )
                self._event(
                    "relaunch_refused",
                    worker_id=exit_.index,
                    reason=f"relaunch budget spent (--max_worker_relaunches="
                    f"{self.options.max_worker_relaunches}); worker {exit_.index} {cause}",
                )
                return
            self._state.relaunches += 1
        started = time.monotonic()
        new_id = self._launch_worker(manager, replaces=exit_.index)
        if failure is not None:
            failure["relaunched_as"] = new_id
        self._event(
            "worker_relaunched",
            worker_id=new_id,
            replaces=exit_.index,
            seconds=round(time.monotonic() - exit_.at, 4),
            launch_s=round(time.monotonic() - started, 4),
        )

    def _on_ps_exit(
        self,
        exit_: InstanceExit,
        servicer: MasterServicer,
        manager: InstanceManager,
        last_line: str,
    ) -> None:
        self._state.ps_exits.append(
            {"ps_id": exit_.index, "detail": exit_.describe(), "log": last_line}
        )
        with servicer.lock:
            finished = servicer.tasks.finished
            version_before = servicer.stats.model_version
        if finished:
            return
        cause = self._exit_cause(exit_, last_line)
        failure = self._failure(Role.PS, exit_.index, cause, round(exit_.at - self._t0, 3))
        who = f"parameter server {exit_.index} {cause}"
        if exit_.reason == "oom":
            raise JobFailed(f"{who}: out of memory; give the PS more (--ps_resource_request)")
        if not self.options.checkpoint_steps:
            raise JobFailed(
                f"{who}: its parameters are lost and this job has no checkpoint to restore "
                "from (--checkpoint_steps)"
            )
        if self._state.ps_relaunches >= self.options.max_ps_relaunches:
            raise JobFailed(
                f"{who}, and the relaunch budget (--max_ps_relaunches="
                f"{self.options.max_ps_relaunches}) is spent"
            )
        self._state.ps_relaunches += 1
        restored = self._latest_checkpoint()
        manager.start_ps(exit_.index)
        seconds = round(time.monotonic() - exit_.at, 4)
        failure["relaunch_s"] = seconds
        if restored is not None:
            # The relaunched shard restores the newest valid checkpoint: every update after it
            # is gone from the model. The version it had reached is the newest the workers
            # reported, so the count of versions rolled back may be short by one report.
            failure["restored_version"] = restored
            failure["model_version_before"] = version_before
            failure["rolled_back_versions"] = max(0, version_before - restored)
        self._event("ps_relaunched", ps_id=exit_.index, seconds=seconds, restored=restored)
        self._state.recoveries.append(
            {"cause": f"ps{exit_.index} {exit_.reason}", "seconds": seconds, "tasks_requeued": 0}
        )

    def _latest_checkpoint(self) -> int | None:
        from elasticdl.runtime.ps import checkpoint

        directory = self._checkpoint_dir
        try:
            return checkpoint.latest_valid_version(directory) if directory else None
        except Exception as err:  # noqa: BLE001 - the report is informative, not vital
            log.warning("could not list checkpoints in %s: %s", directory, err)
            return None

    def _checkpoints(self) -> list[dict[str, Any]]:
        """The valid checkpoints under the job's checkpoint directory, oldest first."""
        from elasticdl.runtime.ps import checkpoint

        directory = self._checkpoint_dir
        if not directory:
            return []
        try:
            versions = checkpoint.valid_versions(directory)
        except Exception as err:  # noqa: BLE001 - the report is informative, not vital
            log.warning("could not list checkpoints in %s: %s", directory, err)
            return []
        root = directory.rstrip("/")
        return [{"version": v, "path": f"{root}/{checkpoint.version_dirname(v)}"} for v in versions]

    def _fire_chaos(self, manager: InstanceManager, tasks_done: dict[int, int]) -> None:
        for action in due_actions(self.chaos, time.monotonic() - self._t0, tasks_done):
            self._state.chaos_fired.append(f"{action} at {self._elapsed()}s")
            if action.action == "add":
                self._state.target += 1
                new_id = self._launch_worker(manager)
                self._event("worker_added", worker_id=new_id, chaos=str(action))
            elif action.action == "remove":
                active = self._active_workers(manager)
                if self._state.target - 1 < self.options.min_workers:
                    self._event(
                        "chaos_skipped",
                        chaos=str(action),
                        reason=f"the job is at --min_workers={self.options.min_workers}",
                    )
                elif active:
                    self._state.target -= 1
                    victim = active[-1]
                    self._retire(manager, victim, f"chaos {action}")
                    self._event("worker_removed", worker_id=victim, chaos=str(action))
            else:
                role = Role.PS if action.role == "ps" else Role.WORKER
                delivered = []
                for index in action.group:
                    self._state.sent[(role, index)] = f"chaos {action}"
                    if manager.signal(role, index, _SIGNALS[action.action]):
                        delivered.append(index)
                    else:
                        self._state.sent.pop((role, index), None)
                self._event(
                    "chaos",
                    action=str(action),
                    delivered=len(delivered) == len(action.group),
                    to=[f"{role}{i}" for i in delivered],
                )

    # -- elastic size ----------------------------------------------------------------------------

    def _active_workers(self, manager: InstanceManager) -> list[int]:
        """Workers alive and not on their way out."""
        return [w for w in manager.alive(Role.WORKER) if w not in self._state.retired]

    def _retire(self, manager: InstanceManager, worker_id: int, why: str) -> None:
        """Ask a worker to leave: SIGTERM, it finishes its minibatch (a pod: deleted)."""
        self._state.retired.add(worker_id)
        self._state.sent[(Role.WORKER, worker_id)] = why
        manager.signal(Role.WORKER, worker_id, signal.SIGTERM)

    def _apply_scale_requests(self, manager: InstanceManager) -> None:
        taken = self.scale_inbox.take()
        try:
            for request in taken:
                self._apply_scale_request(manager, request)
        finally:
            for request in taken:
                if not request.wait(0):
                    request.answer(error="the master failed while applying it; see its log")

    def _apply_scale_request(self, manager: InstanceManager, request: ScaleRequest) -> None:
        try:
            check_target(request.workers, self.options.min_workers, *self._bound.as_max())
        except ScaleError as err:
            self._answer_scale(request, error=f"cannot scale to {request.workers} worker(s): {err}")
            return
        before = self._state.target
        self._state.target = request.workers
        plan = plan_scale(request.workers, self._active_workers(manager))
        launched = [self._launch_worker(manager) for _ in range(plan.launch)]
        for victim in plan.retire:
            self._retire(manager, victim, f"job scaled to {request.workers} worker(s)")
        if launched:
            done = f"started worker(s) {', '.join(map(str, launched))}"
        elif plan.retire:
            done = f"retiring worker(s) {', '.join(map(str, plan.retire))}"
        else:
            done = "nothing to do"
        self._answer_scale(
            request,
            f"scaled from {before} to {request.workers} worker(s): {done}",
            launched=launched,
            retired=list(plan.retire),
        )

    def _answer_scale(
        self, request: ScaleRequest, message: str = "", error: str = "", **detail: Any
    ) -> None:
        entry = {
            "at_s": self._elapsed(),
            "workers": request.workers,
            "source": request.source,
            "accepted": not error,
            "message": error or message,
            **detail,
        }
        self._state.scaling.append(entry)
        self._event("scale", **{k: v for k, v in entry.items() if k != "at_s"})
        request.answer(message, error)

    # -- the end ---------------------------------------------------------------------------------

    def _final_parameters(self, ps_client: Any) -> tuple[dict[str, Any], int]:
        from elasticdl.runtime.ps.client import PSError

        try:
            pulled = ps_client.pull_all()
        except PSError as err:
            raise JobFailed(f"could not pull the trained parameters: {err}") from None
        if not pulled.initialized:
            raise JobFailed("the parameter servers hold no model: no worker pushed one")
        return pulled.values, pulled.version

    def _open_tensorboard(self, work: Path) -> None:
        import tensorflow as tf

        self._tb_dir = work / "tensorboard"
        self._tb_writer = tf.summary.create_file_writer(str(self._tb_dir))

    def _write_tensorboard(self, servicer: MasterServicer) -> None:
        if self._tb_writer is None:
            return
        import tensorflow as tf

        with servicer.lock:
            points = servicer.stats.losses[self._tb_written :]
            self._tb_written += len(points)
        if not points:
            return
        with self._tb_writer.as_default():
            for point in points:
                tf.summary.scalar("loss", point.loss, step=point.version)
        self._tb_writer.flush()

    def _write_outputs(self, staged: Path, report: dict[str, Any], work: Path) -> None:
        import shutil

        (staged / "job_report.json").write_text(json.dumps(report, indent=1))
        (work / "job_report.json").write_text(json.dumps(report, indent=1))
        if self._tb_writer is not None:
            self._tb_writer.flush()
            shutil.copytree(self._tb_dir, staged / "tensorboard")

    def _report(
        self, servicer: MasterServicer, status: str, error: str, training_s: float
    ) -> dict[str, Any]:
        with servicer.lock:
            tasks = servicer.tasks
            epochs = [{"epoch": i, **asdict(stats)} for i, stats in enumerate(tasks.epochs)]
            task_events = [event_dict(e, self._t0) for e in tasks.events]
            report = {
                "job_name": self.job_name,
                "status": status,
                "error": error,
                "model_def": self.options.model_def,
                "output": self.options.output,
                "records": {
                    "planned": tasks.records_planned,
                    "trained": tasks.records_trained,
                    "redone": tasks.records_redone,
                    "skipped_nonfinite_loss": servicer.stats.nonfinite_records,
                },
                "epochs": epochs,
                "tasks": {
                    "finished": tasks.finished_tasks,
                    "requeued": sum(1 for e in tasks.events if e.kind == "task_requeued"),
                    "by_worker": {str(k): v for k, v in servicer.stats.tasks_done.items()},
                    "events": task_events,
                },
                "workers": {
                    "initial": self.options.num_workers,
                    "min_workers": self.options.min_workers,
                    "target": self._state.target,
                    "scaling": self._state.scaling,
                    "launched": len(self._state.workers),
                    "failed": self._state.failed_workers,
                    "relaunched": self._state.relaunches,
                    "preempted": self._state.preemptions,
                    "instances": [asdict(r) for r in self._state.workers.values()],
                },
                "parameter_servers": {
                    "num_ps": self.options.num_ps,
                    "exits": self._state.ps_exits,
                    "relaunched": self._state.ps_relaunches,
                },
                "recoveries": self._state.recoveries,
                "failures": self._state.failures,
                "checkpoints": self._checkpoints(),
                "resumed_from": self._resumed_from,
                "events": self._state.events,
                "chaos": self._state.chaos_fired,
                "model_version": max(servicer.stats.model_version, self._final_version or 0),
                "metrics": self._final_metrics(),
                "evaluation": self.evaluation_history,
                "final_loss": servicer.stats.last_loss
                if servicer.stats.last_loss == servicer.stats.last_loss
                else None,
                "throughput": {
                    "records_per_second": round(tasks.records_trained / max(training_s, 1e-9), 2),
                    "training_seconds": round(training_s, 3),
                },
            }
        return report


def _local_absolute(url: str) -> str:
    """`url` as an absolute path when it is a local path (processes run in the log dir)."""
    if not url or "://" in url:
        return url
    return os.path.abspath(os.path.expanduser(url))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


def summary_line(report: dict[str, Any]) -> str:
    """One line that says how the job went (printed at the end of every job)."""
    if not report:
        return "job: no report"
    records = report.get("records", {})
    workers = report.get("workers", {})
    text = (
        f"job {report.get('job_name')} {report.get('status')}: "
        f"{records.get('trained', 0)}/{records.get('planned', 0)} records trained, "
        f"{records.get('redone', 0)} redone, {workers.get('launched', 0)} worker(s) launched, "
        f"{workers.get('failed', 0)} failed, {workers.get('relaunched', 0)} relaunched, "
        f"{len(report.get('failures', []))} failure(s), "
        f"{len(report.get('checkpoints', []))} checkpoint(s), "
        f"{report.get('throughput', {}).get('records_per_second', 0)} records/s"
    )
    resumed = report.get("resumed_from")
    if resumed:
        text += f", resumed from model version {resumed['model_version']}"
    if report.get("final_loss") is not None:
        text += f", final loss {report['final_loss']:.4g}"
    if report.get("error"):
        text += f"; error: {report['error']}"
    return text
