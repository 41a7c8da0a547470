"""The master's gRPC face: workers ask for tasks and report progress and results.

Every call takes one lock around the pure `TaskManager`; the servicer adds what the job loop
needs to watch the workers: tasks finished per worker (chaos triggers), the latest loss and
model version (progress display, TensorBoard), and non-finite loss counts.

A call's work does not grow with the number of workers (admission is a lookup, a worker's
tasks are indexed by worker), and every task handed out names how often its worker may call
(`progress_every_s`, `wait_s`), from the live workers and the master's calls/s budget
(call_budget.py), so that the master's call rate stays near its budget at any size.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from types import MappingProxyType

import grpc

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime import auth
from elasticdl.runtime.job_config import GRPC_OPTIONS, host_port
from elasticdl.runtime.master.call_budget import CallBudget, CallMeter, Pace, pace
from elasticdl.runtime.master.evaluation import EvaluationRounds
from elasticdl.runtime.master.scaling import ScaleInbox
from elasticdl.runtime.master.task_manager import Task, TaskManager
from elasticdl.runtime.tensor_codec import decode_all

WAIT_TASK = pb.Task(task_id=0, type=pb.WAIT)
NO_MORE_TASKS = pb.Task(task_id=0, type=pb.TASK_TYPE_UNSPECIFIED)
RPC_THREADS = 64
"""The master's handler threads. A handler thread is taken as a call starts and waits for the
request's message: workers slow to send it (a loaded machine, a slow network) held up to 17 at
once among 1,000 simulated workers (bench/master_scale.py), and with 16 every other call queued
behind them for up to 1.5 s. A waiting thread costs no CPU."""
SCALE_ANSWER_S = 30.0
"""How long a `scale_workers` call waits for the job loop (which answers within a pass)."""


@dataclass
class LossPoint:
    version: int
    loss: float
    worker_id: int
    epoch: int = -1


@dataclass
class WorkerStats:
    tasks_done: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    losses: list[LossPoint] = field(default_factory=list)
    model_version: int = 0
    last_loss: float = float("nan")
    nonfinite_records: int = 0
    first_progress: dict[int, float] = field(default_factory=dict)
    """When each worker first reported progress (in report order)."""
    started: list[tuple[int, float]] = field(default_factory=list)
    """(worker, first progress) since the job loop last took them (TaskState.drain_events)."""


class MasterServicer(elasticdl_pb2_grpc.MasterServicer):
    """Serves tasks from a TaskManager; `lock` guards both for the job loop too."""

    def __init__(
        self,
        tasks: TaskManager,
        clock: Callable[[], float] = time.monotonic,
        task_config: Callable[[Task], Mapping[str, str]] | None = None,
        scale_inbox: ScaleInbox | None = None,
        hold_workers: bool = False,
    ) -> None:
        """`task_config(task)` gives a task's extended_config (a prediction task's part name);
        `scale_inbox` takes `scale_workers` requests (None: the job cannot be resized);
        `hold_workers`: once every task is done, workers wait (WAIT) rather than leave until
        `release_workers()`: the job may still queue work (the final evaluation)."""
        self.tasks = tasks
        self.scale_inbox = scale_inbox
        self._released = not hold_workers
        self._task_config = task_config
        self.lock = threading.Lock()
        self.stats = WorkerStats()
        self.evaluations = EvaluationRounds()
        self._clock = clock
        self._is_live: Callable[[int], bool] | None = None
        self.budget = CallBudget()
        """The calls/s this master budgets for (call_budget.py)."""
        self._meter = CallMeter()
        self._pace = Pace()
        self._wait = WAIT_TASK
        self.dispatch_hook: Callable[[int, Mapping[int, int]], None] | None = None
        """Called with the worker id and the tasks finished per worker as a worker starts a
        task, under `lock` (chaos actions that land there: resizing.py). Not as a task is
        handed ahead: every task passes here as it starts, so an action that comes due while
        some task is still to start lands with it (CI: a 4-task job whose workers held the
        last two ahead ended before a PS kill at tasks=2 landed)."""
        self.stop_at_version = 0
        """A model file's MaxStepsStopping: no training task once the model version reached
        it (checked as each task is handed out); 0: none."""
        self._ps_addresses: Callable[[], Sequence[str]] = list
        self.standby: set[int] = set()
        """Spare workers (runtime/master/spares.py): they get no task, only `warm_up`."""
        self.warm_up: pb.Task = WAIT_TASK
        """What a spare is answered: a WAIT naming records it may build and trace its model
        on (shard_name, start, end), or a bare WAIT."""

    def admit_workers(self, is_live: Callable[[int], bool]) -> None:
        """Take worker calls only from ids for which `is_live(id)` holds (the workers the job
        launched and that are alive; asked on every call, so a lookup); others are refused
        with PERMISSION_DENIED. Unset: any id."""
        self._is_live = is_live

    def offer_warm_up(self, shard_name: str, start: int, end: int) -> None:
        """Spares build and trace their model on records [start, end) of `shard_name`."""
        self.warm_up = pb.Task(
            task_id=0,
            type=pb.WAIT,
            shard_name=shard_name,
            start=start,
            end=end,
            wait_s=self._pace.wait_s,
        )

    def pace(self, workers: int, now: float) -> Pace:
        """Derive again how often workers may call (call_budget.py), for `workers` live
        workers and the other calls measured since the last window; the lock held. Tasks
        handed out from now on name it."""
        rate = self._meter.rate_at(now)
        if rate is None:
            return self._pace
        found = pace(self.budget, workers, rate)
        if found != self._pace:
            self._pace = found
            self._wait = pb.Task(task_id=0, type=pb.WAIT, wait_s=found.wait_s)
            if self.warm_up.shard_name:  # a new message: answers in flight hold the old one
                warm_up = pb.Task()
                warm_up.CopyFrom(self.warm_up)
                warm_up.wait_s = found.wait_s
                self.warm_up = warm_up
            self.tasks.progress_times.saw_told(found.progress_every_s)  # no-progress limits
        return found

    def serve_ps_addresses(self, current: Callable[[], Sequence[str]]) -> None:
        """Answer `get_ps_addresses` with `current()` (a relaunched PS may have moved)."""
        self._ps_addresses = current

    def get_ps_addresses(
        self, request: pb.PSAddressesRequest, context: grpc.ServicerContext
    ) -> pb.PSAddresses:
        self._admit(request.worker_id, context)
        return pb.PSAddresses(addresses=list(self._ps_addresses()))

    def _admit(self, worker_id: int, context: grpc.ServicerContext) -> None:
        is_live = self._is_live
        if is_live is not None and not is_live(worker_id):
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"worker {worker_id} is not a live worker of this job",
            )

    def get_task(self, request: pb.GetTaskRequest, context: grpc.ServicerContext) -> pb.Task:
        self._admit(request.worker_id, context)
        with self.lock:
            self._meter.count()
            if request.ahead:
                return self._task_ahead(request.worker_id)
            return self._next_task(request.worker_id)

    def _task_ahead(self, worker_id: int) -> pb.Task:
        """A training task to hold ahead (task_manager.py), else WAIT; the lock held."""
        version = self.stats.model_version
        if worker_id in self.standby or (self.stop_at_version and version >= self.stop_at_version):
            return self._wait
        task = self.tasks.get_ahead(worker_id, self._clock())
        return self._wait if task is None else self._message(task)

    def _next_task(self, worker_id: int, held_ahead: int = 0) -> pb.Task:
        """The worker's next task (the lock held): MaxStepsStopping is checked first, and the
        dispatch hook runs before the answer leaves, as the task starts: a fresh one, or the
        one the worker held ahead (`held_ahead`; handing it ahead ran no hook). A spare gets
        no task."""
        if worker_id in self.standby:
            if self.tasks.failure is not None or (self.tasks.finished and self._released):
                return NO_MORE_TASKS
            return self.warm_up if self.warm_up.shard_name else self._wait
        version = self.stats.model_version
        if self.stop_at_version and version >= self.stop_at_version:
            self.tasks.stop_training(
                f"MaxStepsStopping: model version {version} reached max_steps "
                f"{self.stop_at_version}",
                self._clock(),
            )
        task = self.tasks.get(worker_id, self._clock(), held_ahead=held_ahead)
        if task is None:
            if self.tasks.failure is not None or (self.tasks.finished and self._released):
                return NO_MORE_TASKS
            return self._wait
        if self.dispatch_hook is not None:
            self.dispatch_hook(worker_id, MappingProxyType(self.stats.tasks_done))
        return self._message(task)

    def _message(self, task: Task) -> pb.Task:
        return pb.Task(
            task_id=task.task_id,
            shard_name=task.shard.file,
            start=task.shard.start,
            end=task.shard.end,
            type=int(task.type),
            epoch=task.epoch,
            model_version=task.model_version,
            skip=task.skip,
            shuffle_seed=task.shuffle_seed,
            extended_config=self._task_config(task) if self._task_config else None,
            progress_every_s=self._pace.progress_every_s,
            wait_s=self._pace.wait_s,
        )

    def report_progress(
        self, request: pb.ReportProgressRequest, context: grpc.ServicerContext
    ) -> pb.Empty:
        self._admit(request.worker_id, context)
        with self.lock:
            now = self._clock()
            reports = self.tasks.report_progress(
                request.worker_id, request.task_id, request.records_done, now
            )
            if reports == 1:
                self._meter.count()  # a task's first report comes once a task, whatever the pace
            if request.worker_id not in self.stats.first_progress:
                self.stats.first_progress[request.worker_id] = now
                self.stats.started.append((request.worker_id, now))
            task = self.tasks.running(request.worker_id, request.task_id)
            epoch = task.epoch if task is not None else -1
            self._note_loss(request.worker_id, request.model_version, request.loss, epoch)
        return pb.Empty()

    def report_task_result(
        self, request: pb.ReportTaskResultRequest, context: grpc.ServicerContext
    ) -> pb.Empty:
        self._admit(request.worker_id, context)
        with self.lock:
            self._meter.count()
            self._take_result(request)
        return pb.Empty()

    def finish_task(
        self, request: pb.ReportTaskResultRequest, context: grpc.ServicerContext
    ) -> pb.Task:
        """`report_task_result` then `get_task`, under one lock hold: one call per task. With
        `ahead_task_id`, the answer is that task when the worker is to train it now."""
        self._admit(request.worker_id, context)
        with self.lock:
            self._meter.count()
            self._take_result(request)
            return self._next_task(request.worker_id, held_ahead=request.ahead_task_id)

    def _take_result(self, request: pb.ReportTaskResultRequest) -> None:
        records_done = request.exec_counters.get("records_done", -1)
        task = self.tasks.running(request.worker_id, request.task_id)
        owned = task is not None
        if task is not None and request.HasField("loss"):  # the task's tail (progress.py)
            self._note_loss(request.worker_id, request.model_version, request.loss, task.epoch)
        self.tasks.report_result(
            request.worker_id,
            request.task_id,
            request.err_message,
            self._clock(),
            records_done=records_done,
        )
        if owned and not request.err_message:
            self.stats.tasks_done[request.worker_id] += 1
            self.stats.nonfinite_records += request.exec_counters.get("nonfinite_records", 0)

    def report_evaluation_metrics(
        self, request: pb.ReportEvaluationMetricsRequest, context: grpc.ServicerContext
    ) -> pb.Empty:
        self._admit(request.worker_id, context)
        try:
            decoded = decode_all(request.metric_states)
        except (ValueError, TypeError) as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad metric states: {err}")
        states = {name: value.copy() for name, value in decoded.items()}
        with self.lock:
            self._meter.count()
            lineage = self.tasks.lineage_of(request.worker_id, request.task_id)
            if lineage is not None:
                self.evaluations.report(lineage, states)
        return pb.Empty()

    def report_version(
        self, request: pb.ReportVersionRequest, context: grpc.ServicerContext
    ) -> pb.Empty:
        self._admit(request.worker_id, context)
        with self.lock:
            self.stats.model_version = max(self.stats.model_version, request.model_version)
        return pb.Empty()

    def scale_workers(
        self, request: pb.ScaleWorkersRequest, context: grpc.ServicerContext
    ) -> pb.ScaleWorkersResponse:
        """Resize the job; answered once the job loop has applied (or refused) it.

        Only from this machine (loopback): the master listens on the pod network on Kubernetes,
        where resizing goes through the job's ConfigMap, under the cluster's RBAC."""
        if self.scale_inbox is None:
            return pb.ScaleWorkersResponse(
                accepted=False, message="this job cannot be resized (only training jobs can)"
            )
        peer = context.peer()
        if not peer.startswith(("ipv4:127.", "ipv6:[::1]", "unix:")):
            return pb.ScaleWorkersResponse(
                accepted=False,
                message=f"resize requests over gRPC are taken from this machine only (not "
                f"{peer}); on Kubernetes use `elasticdl scale JOB --workers N`",
            )
        pending = self.scale_inbox.submit(request.num_workers, f"grpc {peer}")
        if not pending.wait(SCALE_ANSWER_S):
            return pb.ScaleWorkersResponse(
                accepted=False,
                pending=True,
                message=f"the master did not answer within {SCALE_ANSWER_S:.0f} s; the request "
                "stays queued and may still be applied",
            )
        if pending.error:
            return pb.ScaleWorkersResponse(accepted=False, message=pending.error)
        return pb.ScaleWorkersResponse(accepted=True, message=pending.message)

    def release_workers(self) -> None:
        """From now on a worker that asks for a task when none is left is told to leave."""
        with self.lock:
            self._released = True

    def _note_loss(self, worker_id: int, version: int, loss: float, epoch: int = -1) -> None:
        self.stats.model_version = max(self.stats.model_version, version)
        if loss == loss:  # not NaN: NaN means "no loss in this report"
            self.stats.last_loss = loss
            self.stats.losses.append(LossPoint(version, loss, worker_id, epoch))


class PortInUseError(ValueError):
    """The master's port is taken."""


def serve_master(
    servicer: MasterServicer,
    host: str,
    port: int,
    credentials: auth.JobAuth | None = None,
    handlers: tuple[grpc.GenericRpcHandler, ...] = (),
) -> tuple[grpc.Server, int]:
    """Start the Master service on host:port (0 = any free port); return it and its port.
    With `credentials`, calls without the job's secret are refused (runtime/auth.py).
    `handlers`: further services on the same server (the job's `status`)."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=RPC_THREADS, thread_name_prefix="master-rpc"),
        options=GRPC_OPTIONS,
        interceptors=auth.server_interceptors(credentials),
    )
    elasticdl_pb2_grpc.add_MasterServicer_to_server(servicer, server)
    server.add_generic_rpc_handlers(handlers)
    try:
        bound = auth.add_port(server, host_port(host, port), credentials)
    except RuntimeError as err:
        raise PortInUseError(
            f"master: port {port} on {host} is in use or cannot be bound; pick another "
            "--master_port, or 0 for any free port"
        ) from err
    if bound == 0:
        raise PortInUseError(
            f"master: port {port} on {host} is in use; pick another --master_port or 0 for "
            "any free port"
        )
    server.start()
    return server, bound
