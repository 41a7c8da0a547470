"""The master at 1,000 workers and more, measured by simulation (issue 38).

    python -P bench/master_scale.py [--quick] [--workers N ...] [--pods N] [--hosts H]

**The master is real**: a `TaskManager`, the `MasterServicer` served by `serve_master` with the
job's secret and the `status` handler, `TaskState`, the `Supervisor` with the job loop, the
event log and the job report (`report.training_report`), in a process of its own (its CPU and
memory are what is measured). Its instance manager starts simulated workers instead of
processes, and a lost worker's applied progress comes from the parameter server through the
real `PSClient`.

**The workers are simulated** without TensorFlow: many per process (asyncio, `grpc.aio`, one
channel per worker to the master and one to the parameter server, as real workers each have),
a few processes. Each speaks the real worker protocol with the job's secret on every call:
`get_task`, a task's first minibatch reported at once, the next task asked for ahead after it,
progress reports at most every `progress_every_s` the master's answers name (0.1 s when they
name none, the worker's default), `finish_task` with the task's tail (the loss since its last
report) naming the task held ahead, and WAIT answered by asking again after `wait_s` (0.2 s
when unnamed). Task times follow a realistic spread: a worker's speed is log-normal around
`--task-seconds` per task (sigma 0.25: some machines are slower), each task's time log-normal
again (sigma 0.15), and a worker starts 1-8 s after its pod is created (process start, model
build), pods being created at the Kubernetes pod manager's pace (20 a second, bursts of 30:
runtime/k8s/throttle.py): 1,000 workers arrive over ~50 s, 100 replacements over ~4 s.
A worker pushes its gradients to the stub parameter server every ~3 s of training (the first
minibatch at once), each push naming the task and the records done once it is applied, as the
real push does; the stub PS applies nothing and acknowledges, remembering each task's records
applied.

**Latency** is what the probes see: one worker in 20 is simulated in a process of its own with
few workers, at the master's priority (the other processes hold 250 workers each and wait for
a core on this 2-core machine: their own delay is not the master's); every call of every
worker is timed too, and the master's own handler time, and for the probes the way in (sent
to handler) and out (handler to answer) from the machine-wide monotonic clock. The master runs
at nice -10 (`--master-nice`): on a cluster it has cores of its own.

**Mid-run loss**: once `elasticdl status` says 40 % of the records are trained, 10 % of the
workers (none of the probes) vanish at once (their channels closed mid-call, no goodbye);
their exits reach the master 1 s later (what a pod watch takes), as pods killed from outside
(preempted), and the supervisor replaces them as it does pods.

**Accounting**: after the job, every task any simulated worker was handed is looked up in the
stub PS; per record range and epoch, the applied pieces `[skip, skip + applied)` must tile the
range exactly (nothing lost, nothing applied twice), and the report must say trained ==
planned with nothing redone: `scale_records_exact` is 1 only then.

**`elasticdl status`** is asked every second during the run the way the command does it
(`status_command.fetch`: a channel with the job's secret, the `status` call, `format_status`).

**Kubernetes** (`--pods`): the real `KubernetesInstanceManager` creates that many worker pods
(pods that only sleep) on the loopback fake API server (tests/support/fake_kube.py), watching
them with one watch, until every one runs; then 10 % are killed at once (SIGKILL from outside:
preempted) and replaced as the supervisor would; `scale_pods_running_s` is the time to all
running plus the time to all replacements running.

The machine's other load (CPU of processes not ours) is printed with every figure. Ends with
`RESULT <name> <value> target=<target>` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import queue
import random
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CLOCK_TICK, loadavg, machine_busy_s, print_results, runtime_revision  # noqa: E402

from elasticdl.runtime.master.instances import InstanceManager  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIRST_BATCH = 64
"""Records of a task's first minibatch (reported at once, as the real worker does)."""
PUSH_EVERY_S = 3.0
"""A simulated worker pushes every ~3 s of training (a real one every minibatch: the stub PS is
not what is measured, and its pushes would take the cores the master is measured on)."""
VANISH_AT = 0.40
VANISH_FRACTION = 0.10
SENT_KEY = "x-bench-sent"
"""Metadata of a simulated worker's call: when it was sent (time.monotonic, machine-wide)."""
DONE_KEY = "x-bench-done"
"""Trailing metadata of the master's answer: when its handler ended."""
DETECT_S = 1.0
"""From a worker vanishing to the master hearing of its exit (a pod watch's delay)."""
STATUS_EVERY_S = 1.0
"""`elasticdl status` is asked this often during a run."""


@dataclass(frozen=True)
class Plan:
    """One simulated job."""

    workers: int
    hosts: int
    task_seconds: float = 6.0
    records_per_task: int = 4096
    tasks_per_worker: int = 8
    """Training tasks per worker over the whole job (2 epochs)."""
    epochs: int = 2
    start_spread_s: tuple[float, float] = (1.0, 8.0)
    seed: int = 38
    master_nice: int = -10
    """The master's scheduling priority: on a cluster it has cores of its own; here it shares
    2 with the simulated workers (1,000 machines' worth of clients) and other sessions."""
    probe_every: int = 20
    """One worker in so many is a probe: simulated in a process of few workers at the
    master's priority, so that the latency it sees is the master's, not its own process's
    wait for a core (the others' processes are busy: 250 workers each)."""

    def host_of(self, worker_id: int) -> int:
        """The process simulating `worker_id`: 0 for the probes, else 1 ... hosts."""
        if worker_id % self.probe_every == 0:
            return 0
        return 1 + worker_id % self.hosts

    @property
    def records_per_epoch(self) -> int:
        return self.workers * self.tasks_per_worker // self.epochs * self.records_per_task

    @property
    def speed(self) -> float:
        """Median records/s of a worker."""
        return self.records_per_task / self.task_seconds


# ------------------------------------------------------------------------------ stub PS


def ps_main(port_out: Any, secret: str) -> None:
    """The stub parameter server: acknowledges every push, remembers each task's records
    applied (the largest `records_end` pushed), answers `get_applied_progress`."""
    import grpc

    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.proto import elasticdl_pb2_grpc
    from elasticdl.runtime import auth
    from elasticdl.runtime.job_config import GRPC_OPTIONS

    class StubPS(elasticdl_pb2_grpc.ParameterServerServicer):
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.applied: dict[int, int] = {}
            self.version = 0

        def push_gradients(self, request: Any, context: Any) -> Any:
            with self.lock:
                self.version += 1
                if request.records_end > self.applied.get(request.task_id, 0):
                    self.applied[request.task_id] = request.records_end
                return pb.PushGradientsResponse(accepted=True, version=self.version)

        def get_applied_progress(self, request: Any, context: Any) -> Any:
            with self.lock:
                found = {t: self.applied.get(t, 0) for t in request.task_ids}
            return pb.AppliedProgressResponse(records_end=found)

    from concurrent import futures

    credentials = auth.JobAuth(secret)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="stub-ps"),
        options=GRPC_OPTIONS,
        interceptors=auth.server_interceptors(credentials),
    )
    elasticdl_pb2_grpc.add_ParameterServerServicer_to_server(StubPS(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    port_out.put(port)
    signal.sigwait({signal.SIGTERM})
    server.stop(None)


# ------------------------------------------------------------------------------ the master


class SimInstances(InstanceManager):
    """An `InstanceManager` whose workers are simulated in the host processes: `start_worker`
    asks a host to start one; their exits come back on `exits_in` (id, code, signal, at,
    vanished)."""

    def __init__(self, plan: Plan, hosts: Sequence[Any], exits_in: Any) -> None:
        from elasticdl.runtime.k8s.throttle import TokenBucket

        self._plan = plan
        self._hosts = hosts
        self._created = TokenBucket()
        self._exits_in = exits_in
        self._lock = threading.Lock()
        self._alive: set[int] = set()

    def start_ps(self, ps_id: int) -> str:
        raise RuntimeError("the simulated job has its one stub PS outside the supervisor")

    def start_worker(self, worker_id: int, ps_addrs: Sequence[str]) -> None:
        with self._lock:
            self._alive.add(worker_id)
        created_in = self._created.reserve(time.monotonic())  # as the pod manager paces pods
        self._hosts[self._plan.host_of(worker_id)].put(("start", worker_id, created_in))

    def signal(self, role: Any, index: int, sig: int) -> bool:
        with self._lock:
            if index not in self._alive:
                return False
        self._hosts[self._plan.host_of(index)].put(("kill", index, sig))
        return True

    def exits(self, timeout: float) -> list[Any]:
        from elasticdl.runtime.master.exits import ExitKind
        from elasticdl.runtime.master.instances import InstanceExit, Role

        found = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                wait = max(0.0, deadline - time.monotonic()) if not found else 0.0
                worker_id, code, sig, at, vanished = self._exits_in.get(timeout=wait)
            except queue.Empty:
                return found
            with self._lock:
                self._alive.discard(worker_id)
            observed = ExitKind.PREEMPTED if vanished else None
            message = "vanished: connections dropped, no goodbye" if vanished else ""
            found.append(
                InstanceExit(
                    Role.WORKER, worker_id, code, sig, at, observed=observed, message=message
                )
            )

    def alive(self, role: Any) -> list[int]:
        with self._lock:
            return sorted(self._alive)

    def is_alive(self, role: Any, index: int) -> bool:
        with self._lock:
            return index in self._alive

    def shutdown(self, grace_s: float = 5.0) -> None:
        for host in self._hosts:
            host.put(("stop",))


def _in_request(frame: Any) -> bool:
    """Whether a thread's frame is gRPC's wait for a request's message."""
    back = getattr(frame, "f_back", None)
    try:
        return frame.f_code.co_name == "wait" and back.f_code.co_name == "unary_request"
    except AttributeError:
        return False


def _stall_watch(stop: threading.Event, found: list[tuple[float, float, str]]) -> None:
    """A thread that sleeps 10 ms at a time: when it wakes over 150 ms late (no CPU or no GIL
    for it), what the other threads were doing: (late ms, at, their stacks' last lines)."""
    import traceback

    origin = time.monotonic()
    me = threading.get_ident()
    names = {}
    beat = 0
    while not stop.is_set():
        started = time.monotonic()
        time.sleep(0.01)
        late = time.monotonic() - started - 0.01
        beat += 1
        if beat % 10 == 0:  # how many gRPC threads wait for a request's message
            waiting = sum(1 for frame in sys._current_frames().values() if _in_request(frame))  # noqa: SLF001
            if waiting >= 8:
                found.append((0, round(started - origin, 1), f"{waiting} threads in unary_request"))
        if late > 0.15:
            names = {t.ident: t.name for t in threading.enumerate()}
            stacks = []
            for ident, frame in sys._current_frames().items():  # noqa: SLF001 - diagnosis
                if ident == me:
                    continue
                last = traceback.extract_stack(frame)[-3:]
                where = " < ".join(f"{f.name}:{f.lineno}" for f in reversed(last))
                stacks.append(f"{names.get(ident, ident)}: {where}")
            found.append((round(late * 1e3), round(started - origin, 1), " | ".join(stacks)))


def _gc_pauses() -> list[tuple[float, int, float]]:
    """(ms, generation, at) of each garbage collection from now on (the GIL is held)."""
    import gc

    found: list[tuple[float, int, float]] = []
    started = [0.0]
    origin = time.monotonic()

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            found.append(
                (
                    round((time.perf_counter() - started[0]) * 1e3, 1),
                    info["generation"],
                    round(time.monotonic() - origin, 1),
                )
            )

    gc.callbacks.append(watch)
    return found


def _renice(nice: int) -> int:
    """Set this process's nice value (threads started later inherit it); the value in force."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except PermissionError:
        print(f"  (cannot set the master's nice value to {nice}: not root)", flush=True)
    return os.getpriority(os.PRIO_PROCESS, 0)


def _process_cpu_s(pid: int | str = "self") -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return math.nan


def master_main(
    plan: Plan, secret: str, ps_addr: str, hosts: Sequence[Any], exits_in: Any, out: Any, go: Any
) -> None:
    """The master process: serves, supervises, writes the report; its figures go to `out`.
    It runs at `plan.master_nice` (set first, so that every thread it starts inherits it)."""
    niced = _renice(plan.master_nice)
    import logging

    import jsonschema

    logging.basicConfig(level=logging.WARNING)
    from elasticdl.runtime import auth
    from elasticdl.runtime.data.shards import plan_shards
    from elasticdl.runtime.master import report as views
    from elasticdl.runtime.master.events import EventLog
    from elasticdl.runtime.master.heap import QuietHeap
    from elasticdl.runtime.master.instances import Role
    from elasticdl.runtime.master.live_status import status_report
    from elasticdl.runtime.master.progress import ProgressDisplay
    from elasticdl.runtime.master.servicer import MasterServicer, serve_master
    from elasticdl.runtime.master.status_service import status_handler
    from elasticdl.runtime.master.supervisor import JobPlugin, Supervisor, SupervisorConfig
    from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig
    from elasticdl.runtime.master.task_state import TaskState
    from elasticdl.runtime.ps.client import PSClient

    credentials = auth.JobAuth(secret)
    quarter = plan.records_per_epoch // 4
    sizes = [quarter] * 3 + [plan.records_per_epoch - 3 * quarter]
    files = [(f"sim://train-{i}.recordio", n) for i, n in enumerate(sizes)]
    shards = plan_shards(files, plan.records_per_task)
    tasks = TaskManager(
        shards,
        TaskManagerConfig(
            records_per_task=plan.records_per_task, num_epochs=plan.epochs, seed=plan.seed
        ),
        now=time.monotonic(),
    )
    servicer = MasterServicer(tasks, hold_workers=True)
    events = EventLog()
    manager = SimInstances(plan, hosts, exits_in)
    state = TaskState(servicer)
    ps = PSClient([ps_addr], credentials=credentials)
    display = ProgressDisplay(tasks.records_planned, plan.epochs, stream=open(os.devnull, "w"))
    live = views.LiveViews(events, display)

    heap = QuietHeap()

    class SimPlugin(JobPlugin):
        def applied_progress(self, task_ids: Sequence[int]) -> dict[int, int]:
            return dict(ps.applied_progress(list(task_ids)))

        def on_pass(self, supervisor: Supervisor) -> None:
            state.drain_events(events)
            live.update(state.snapshot(), len(supervisor.workers_alive()))
            heap.tick()

    supervisor = Supervisor(
        SupervisorConfig(num_workers=plan.workers, max_worker_relaunches=plan.workers),
        manager,
        state,
        events,
        SimPlugin(),
    )

    def live_status() -> dict[str, Any]:
        return status_report(
            "scale",
            events,
            state.snapshot(),
            supervisor.t0,
            time.monotonic(),
            plan.epochs,
            supervisor.workers_alive(),
            state.holders(),
        )

    handler_s, inbound_s, inbound_at = _time_handlers(servicer, plan)
    server, port = serve_master(
        servicer, "127.0.0.1", 0, credentials, handlers=(status_handler(live_status),)
    )
    _admit(servicer, manager, Role.WORKER)
    out.put(("master", port))
    go.get()
    from _thread_cpu import ThreadWindow

    threads = ThreadWindow()
    threads.start()
    import gc

    stalls: list[tuple[float, float, str]] = []
    stop_watch = threading.Event()
    threading.Thread(target=_stall_watch, args=(stop_watch, stalls), daemon=True).start()
    pauses = _gc_pauses()
    wall0, cpu0 = time.monotonic(), _process_cpu_s()
    supervisor.t0 = wall0
    failure = ""
    try:
        supervisor.start()
        heap.start()  # as TrainingJob does (heap.py)
        supervisor.watch()
    except Exception as err:  # noqa: BLE001 - reported in the figures
        failure = f"{type(err).__name__}: {err}"
    wall, cpu = time.monotonic() - wall0, _process_cpu_s() - cpu0
    threads.stop()
    stop_watch.set()
    from collections import Counter

    survivors = Counter(type(o).__name__ for g in (0, 1, 2) for o in gc.get_objects(g))
    heap.stop()
    state.release_workers()
    supervisor.stop_workers(1.0)
    state.drain_events(events)
    built = time.monotonic()
    counts = state.counts()
    report = views.training_report(
        events,
        counts,
        job_name="scale",
        status="failed" if failure else "succeeded",
        error=failure,
        model_def="simulated",
        output="",
        workers=(plan.workers, 1, supervisor.target),
        num_ps=1,
        t0=supervisor.t0,
        seconds=wall,
        preparing_s=0.0,
    )
    text = json.dumps(report, indent=1)
    report_s = time.monotonic() - built
    jsonschema.validate(report, views.schema())
    server.stop(grace=1.0)
    ps.close()
    out.put(
        (
            "done",
            {
                "failure": failure,
                "wall_s": wall,
                "cpu_s": cpu,
                "rss_mb": _peak_rss_mb(),
                "report_bytes": len(text.encode()),
                "report_s": report_s,
                "records": counts["records"],
                "tasks_finished": counts["tasks_finished"],
                "workers": report["workers"]["launched"],
                "relaunched": report["workers"]["relaunched"],
                "preempted": report["workers"]["preempted"],
                "events_kept": len(report["events"]),
                "nice": niced,
                "gc_pauses": sorted(pauses, reverse=True)[:8],
                "stalls": sorted(stalls, reverse=True)[:5]
                + sorted((x for x in stalls if not x[0]), key=lambda x: -int(x[2].split()[0]))[:8],
                "gc_tracked": (sum(survivors.values()), gc.get_freeze_count()),
                "gc_top": survivors.most_common(8),
                "threads_cpu_s": [(n, round(c, 2)) for n, c in threads.rows[:6]],
                "left_out": report["left_out"],
                "handler_p99_ms": _percentile(handler_s, 0.99) * 1e3,
                "probe_inbound_p50_ms": _percentile(inbound_s, 0.50) * 1e3,
                "probe_inbound_p99_ms": _percentile(inbound_s, 0.99) * 1e3,
                "slowest_inbound": sorted(
                    (
                        (round(s * 1e3), round(at - wall0, 1), worker)
                        for s, (at, worker) in zip(inbound_s, inbound_at, strict=True)
                    ),
                    reverse=True,
                )[:15],
                "handler_max_ms": max(handler_s, default=math.nan) * 1e3,
            },
        )
    )


def _time_handlers(
    servicer: Any, plan: Plan
) -> tuple[list[float], list[float], list[tuple[float, int]]]:
    """Wrap the servicer's worker calls (before it is served) to time each in the master:
    the handler (from its start to its answer, the wait for the lock included) and, for the
    probes' calls, from the time the client sent it (metadata `x-bench-sent`: the machine's
    monotonic clock) to the handler's start (the network, gRPC's queues, the master's
    threads). Every answer carries the time the handler ended (trailing metadata)."""
    handler: list[float] = []
    inbound: list[float] = []
    inbound_at: list[tuple[float, int]] = []
    for name in ("get_task", "finish_task", "report_progress", "report_task_result"):
        method = getattr(servicer, name)

        def timed(request: Any, context: Any, method: Any = method) -> Any:
            started = time.perf_counter()
            if request.worker_id % plan.probe_every == 0:
                for key, value in context.invocation_metadata():
                    if key == SENT_KEY:
                        inbound.append(time.monotonic() - float(value))
                        inbound_at.append((time.monotonic(), request.worker_id))
            try:
                return method(request, context)
            finally:
                handler.append(time.perf_counter() - started)
                context.set_trailing_metadata(((DONE_KEY, repr(time.monotonic())),))

        setattr(servicer, name, timed)
    return handler, inbound, inbound_at


def _admit(servicer: Any, manager: Any, role: Any) -> None:
    """Admit the live workers' calls only, as the training job does."""
    servicer.admit_workers(lambda worker_id: manager.is_alive(role, worker_id))


# ------------------------------------------------------------------------------ workers


@dataclass
class HostFigures:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    tasks: list[tuple[int, int, str, int, int, int]] = field(default_factory=list)
    """(task id, epoch, file, start, end, skip) of every training task handed to a worker."""
    errors: list[str] = field(default_factory=list)
    failed_calls: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    """'call STATUS' -> when each failed (seconds since the host started)."""
    vanished: int = 0
    pushes: int = 0
    progress_every_s: list[float] = field(default_factory=list)
    wait_s: list[float] = field(default_factory=list)
    probes: bool = False
    """The probes' process (Plan.probe_every)."""
    outbound_s: list[float] = field(default_factory=list)
    first_calls: list[float] = field(default_factory=list)
    """Each worker's first call to the master (its connection made on the way)."""
    """Probes: from the master's handler ending to the answer in hand."""
    loop_lag_s: list[float] = field(default_factory=list)
    """How late the host's event loop woke a 0.1 s sleep (its own load), every 0.1 s."""


class SimWorker:
    """One simulated worker: the real worker's calls, in the real order, without TensorFlow."""

    def __init__(self, host: Host, worker_id: int, created_in: float = 0.0) -> None:
        import grpc

        from elasticdl.proto import elasticdl_pb2_grpc
        from elasticdl.runtime.job_config import GRPC_OPTIONS

        self.host = host
        self.worker_id = worker_id
        self.created_in = created_in
        self.rng = random.Random(host.plan.seed * 1_000_003 + worker_id)
        self.speed = host.plan.speed * math.exp(-abs(self.rng.gauss(0, 0.25)))
        options = [*GRPC_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
        self.master_channel = grpc.aio.insecure_channel(host.master_addr, options=options)
        self.ps_channel = grpc.aio.insecure_channel(host.ps_addr, options=options)
        self.master = elasticdl_pb2_grpc.MasterStub(self.master_channel)
        self.ps = elasticdl_pb2_grpc.ParameterServerStub(self.ps_channel)
        self.every_s = 0.1
        self.calls = 0
        self.report: asyncio.Task[Any] | None = None
        self.ahead: asyncio.Task[Any] | None = None

    async def call(self, kind: str, method: Any, request: Any) -> Any:
        started = time.perf_counter()
        sent = (SENT_KEY, repr(time.monotonic()))
        call = method(request, metadata=(*self.host.metadata, sent), timeout=60)
        try:
            answer = await call
        except Exception as err:  # noqa: BLE001 - counted, then the worker's failure
            self.host.failed(kind, err)
            raise
        took = time.perf_counter() - started
        self.host.figures.latencies[kind].append(took)
        if not self.calls:
            self.host.figures.first_calls.append(took)
        self.calls += 1
        if self.host.probes:
            received = time.monotonic()
            for key, value in await call.trailing_metadata():
                if key == DONE_KEY:
                    self.host.figures.outbound_s.append(received - float(value))
        return answer

    async def close(self) -> None:
        """Drop the connections at once, calls in flight included (no goodbye)."""
        for pending in (self.report, self.ahead):
            if pending is not None:
                pending.cancel()
        await self.master_channel.close(grace=None)
        await self.ps_channel.close(grace=None)

    async def run(self) -> int:
        from elasticdl.proto import elasticdl_pb2 as pb

        await asyncio.sleep(self.created_in + self.rng.uniform(*self.host.plan.start_spread_s))
        task = await self.call(
            "get_task", self.master.get_task, pb.GetTaskRequest(worker_id=self.worker_id)
        )
        while True:
            if task.type == pb.WAIT:
                wait = getattr(task, "wait_s", 0.0) or 0.2
                self.host.figures.wait_s.append(wait)
                await asyncio.sleep(wait)
                task = await self.call(
                    "get_task", self.master.get_task, pb.GetTaskRequest(worker_id=self.worker_id)
                )
                continue
            if task.task_id == 0:
                return 0
            self._told(task)
            done = await self.train(task)
            held = await self.held_ahead()
            result = pb.ReportTaskResultRequest(
                worker_id=self.worker_id,
                task_id=task.task_id,
                exec_counters={"records_done": done, "nonfinite_records": 0},
                ahead_task_id=held,
                loss=1.0 / (1 + done),  # the task's tail goes with its result
            )
            task = await self.call("finish_task", self.master.finish_task, result)

    def _told(self, task: Any) -> None:
        self.host.figures.tasks.append(
            (task.task_id, task.epoch, task.shard_name, task.start, task.end, task.skip)
        )
        every = getattr(task, "progress_every_s", 0.0)
        self.every_s = every or 0.1
        self.host.figures.progress_every_s.append(self.every_s)

    async def train(self, task: Any) -> int:
        """Train for the task's time: push every ~PUSH_EVERY_S (the first minibatch at once),
        report what was applied at most every `every_s` (the first minibatch at once), ask
        for the next task ahead after the first minibatch (the tail goes with the result)."""
        from elasticdl.proto import elasticdl_pb2 as pb

        total = task.end - task.start - task.skip
        speed = self.speed * math.exp(self.rng.gauss(0, 0.15))
        t0 = time.monotonic()
        end_at = t0 + total / speed
        next_push = t0 + min(total, FIRST_BATCH) / speed
        done, sent_at = 0, math.inf
        while done < total:
            wake = min(next_push, sent_at + self.every_s)
            await asyncio.sleep(max(0.0, wake - time.monotonic()))
            now = time.monotonic()
            if now >= next_push:
                first = done == 0
                records = min(total, FIRST_BATCH) if first else min(total, int((now - t0) * speed))
                if next_push >= end_at:
                    records = total
                push = pb.PushGradientsRequest(
                    worker_id=self.worker_id, task_id=task.task_id, records_end=records
                )
                try:
                    await self.ps.push_gradients(push, metadata=self.host.metadata, timeout=60)
                except Exception as err:  # noqa: BLE001 - counted, then the worker's failure
                    self.host.failed("push_gradients", err)
                    raise
                self.host.figures.pushes += 1
                done = records
                next_push = min(end_at, time.monotonic() + PUSH_EVERY_S)
                if first:
                    await self._report(task.task_id, done)
                    sent_at = time.monotonic()
                    ask = pb.GetTaskRequest(worker_id=self.worker_id, ahead=True)
                    self.ahead = asyncio.ensure_future(
                        self.call("get_task", self.master.get_task, ask)
                    )
                    continue
            if done < total and time.monotonic() >= sent_at + self.every_s:
                await self._report(task.task_id, done)
                sent_at = time.monotonic()
        if self.report is not None:
            await self.report
            self.report = None
        return done

    async def _report(self, task_id: int, done: int) -> None:
        """At most one report in flight, not waited for (as `ProgressReports` does)."""
        from elasticdl.proto import elasticdl_pb2 as pb

        if self.report is not None:
            await self.report
        request = pb.ReportProgressRequest(
            worker_id=self.worker_id, task_id=task_id, records_done=done, loss=1.0 / (1 + done)
        )
        self.report = asyncio.ensure_future(
            self.call("report_progress", self.master.report_progress, request)
        )

    async def held_ahead(self) -> int:
        from elasticdl.proto import elasticdl_pb2 as pb

        if self.ahead is None:
            return 0
        answer, self.ahead = await self.ahead, None
        if answer.task_id and answer.type == pb.TRAINING:
            self._told(answer)
            return int(answer.task_id)
        return 0


class Host:
    """A process of simulated workers: takes start/kill/vanish/stop commands."""

    def __init__(
        self, plan: Plan, master_addr: str, ps_addr: str, secret: str, exits_out: Any, probes: bool
    ) -> None:
        from elasticdl.runtime import auth

        self.plan = plan
        self.master_addr = master_addr
        self.ps_addr = ps_addr
        self.metadata = ((auth.METADATA_KEY, secret),)
        self.exits_out = exits_out
        self.probes = probes
        self.figures = HostFigures(probes=probes)
        self.origin = time.monotonic()
        self.workers: dict[int, tuple[SimWorker, asyncio.Task[Any]]] = {}
        self.rng = random.Random(plan.seed)
        self.stopped = asyncio.Event()

    def failed(self, kind: str, err: BaseException) -> None:
        code = err.code().name if hasattr(err, "code") else type(err).__name__
        self.figures.failed_calls[f"{kind} {code}"].append(round(time.monotonic() - self.origin, 1))

    def start(self, worker_id: int, created_in: float) -> None:
        worker = SimWorker(self, worker_id, created_in)
        job = asyncio.ensure_future(self._run(worker))
        self.workers[worker_id] = (worker, job)

    async def _run(self, worker: SimWorker) -> None:
        code = 1
        try:
            code = await worker.run()
        except asyncio.CancelledError:
            return
        except Exception as err:  # noqa: BLE001 - a real worker would exit 1: counted
            self.figures.errors.append(f"worker {worker.worker_id}: {type(err).__name__}: {err}")
        await worker.close()
        self.workers.pop(worker.worker_id, None)
        self.exits_out.put((worker.worker_id, code, None, time.monotonic(), False))

    async def end(self, worker_id: int, sig: int | None, vanished: bool) -> None:
        entry = self.workers.pop(worker_id, None)
        if entry is None:
            return
        worker, job = entry
        at = time.monotonic()
        job.cancel()
        await worker.close()
        if vanished:
            self.figures.vanished += 1
            await asyncio.sleep(DETECT_S)
        code, sig = (None, signal.SIGKILL) if vanished else (None, sig)
        self.exits_out.put((worker_id, code, sig, at, vanished))

    def vanish(self, fraction: float) -> None:
        chosen = [w for w in sorted(self.workers) if self.rng.random() < fraction]
        for worker_id in chosen:
            asyncio.ensure_future(self.end(worker_id, None, vanished=True))

    async def stop(self) -> None:
        for worker_id in list(self.workers):
            worker, job = self.workers.pop(worker_id)
            job.cancel()
            await worker.close()
        self.stopped.set()


def host_main(
    plan: Plan,
    master_addr: str,
    ps_addr: str,
    secret: str,
    commands: Any,
    exits_out: Any,
    out: Any,
    probes: bool,
) -> None:
    if probes:
        _renice(plan.master_nice)

    async def serve() -> None:
        host = Host(plan, master_addr, ps_addr, secret, exits_out, probes)
        loop = asyncio.get_running_loop()

        def read() -> None:
            while True:
                command = commands.get()
                loop.call_soon_threadsafe(handle, command)
                if command[0] in ("stop", "collect"):
                    return

        def handle(command: tuple[Any, ...]) -> None:
            kind = command[0]
            if kind == "start":
                host.start(command[1], command[2])
            elif kind == "kill":
                asyncio.ensure_future(host.end(command[1], command[2], vanished=False))
            elif kind == "vanish":
                host.vanish(command[1])
            elif kind in ("stop", "collect"):
                asyncio.ensure_future(host.stop())

        async def lag() -> None:
            while True:
                started = time.monotonic()
                await asyncio.sleep(0.1)
                host.figures.loop_lag_s.append(time.monotonic() - started - 0.1)

        threading.Thread(target=read, daemon=True).start()
        watch = asyncio.ensure_future(lag())
        await host.stopped.wait()
        watch.cancel()
        figures = host.figures
        figures.latencies = dict(figures.latencies)
        figures.failed_calls = dict(figures.failed_calls)
        figures.probes = probes
        out.put(("host", asdict(figures)))

    asyncio.run(serve())


# ------------------------------------------------------------------------------ the run


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _failed_calls(host_figures: list[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    """'call STATUS' -> (how many failed, when the first did: s since its host started)."""
    found: dict[str, list[float]] = defaultdict(list)
    for h in host_figures:
        for key, times in h["failed_calls"].items():
            found[key] += times
    return {key: (len(times), min(times)) for key, times in sorted(found.items())}


def check_accounting(
    tasks: list[tuple[int, int, str, int, int, int]],
    applied: dict[int, int],
    records_per_epoch: int,
    epochs: int,
) -> list[str]:
    """What is wrong with the applied records (empty: every range of every epoch applied
    exactly once: the pieces `[skip, skip + applied)` of its tasks tile it)."""
    by_range: dict[tuple[int, str, int, int], dict[int, int]] = defaultdict(dict)
    for task_id, epoch, file, start, end, skip in tasks:
        by_range[(epoch, file, start, end)][task_id] = skip
    problems, total = [], 0
    for (epoch, file, start, end), skips in sorted(by_range.items()):
        pieces = sorted(
            (skip, skip + applied.get(t, 0)) for t, skip in skips.items() if applied.get(t, 0)
        )
        at = 0
        for first, last in pieces:
            if first != at:
                what = "applied twice" if first < at else "lost"
                problems.append(
                    f"epoch {epoch} {file} [{start}, {end}): records from {min(at, first)} {what}"
                )
            at = max(at, last)
        if at != end - start:
            problems.append(f"epoch {epoch} {file} [{start}, {end}): {at} of {end - start} applied")
        total += sum(last - first for first, last in pieces)
    if total != records_per_epoch * epochs:
        problems.append(f"{total} records applied, {records_per_epoch * epochs} planned")
    return problems


class _DirectContext:
    """A call's context for the servicer called directly (no gRPC)."""

    def abort(self, code: Any, details: str) -> None:
        raise RuntimeError(details)

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


def servicer_cost(workers: int, calls: int = 20_000) -> float:
    """CPU microseconds of one worker call served by the servicer itself (no gRPC: its lock,
    the admission lookup, the task manager) while `workers` workers hold a task each: three
    progress reports for each result-and-next-task, from workers drawn at random."""
    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.runtime.data.shards import plan_shards
    from elasticdl.runtime.master.servicer import MasterServicer
    from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig

    shards = plan_shards([("sim://cost.recordio", workers * 4 * 64)], 64)
    config = TaskManagerConfig(records_per_task=64, num_epochs=10_000)  # planned lazily
    servicer = MasterServicer(TaskManager(shards, config))
    alive = set(range(workers))
    servicer.admit_workers(alive.__contains__)
    context = _DirectContext()
    held = {w: servicer.get_task(pb.GetTaskRequest(worker_id=w), context) for w in alive}
    rng = random.Random(38)
    started = time.thread_time()  # CPU time: this 2-core machine is shared
    for i in range(calls):
        worker = rng.randrange(workers)
        task = held[worker]
        if i % 4:
            report = pb.ReportProgressRequest(
                worker_id=worker, task_id=task.task_id, records_done=i % 64, loss=1.0
            )
            servicer.report_progress(report, context)
        else:
            done = {"records_done": task.end - task.start - task.skip}
            result = pb.ReportTaskResultRequest(
                worker_id=worker, task_id=task.task_id, exec_counters=done
            )
            held[worker] = servicer.finish_task(result, context)
    return (time.thread_time() - started) / calls * 1e6


def status_once(address: str, secret_dir: str) -> tuple[float, dict[str, Any]]:
    """`elasticdl status --master ADDRESS --secret_file DIR` as the command does it; seconds."""
    from elasticdl.runtime.master.live_status import format_status
    from elasticdl.status_command import fetch

    started = time.perf_counter()
    report = fetch(address, secret_dir, 10.0)
    format_status(report)
    return time.perf_counter() - started, report


def our_cpu_s(pids: Sequence[int]) -> float:
    total = _process_cpu_s()
    for pid in pids:
        try:
            total += _process_cpu_s(pid)
        except OSError:
            pass
    return total


def simulate(plan: Plan, verbose: bool = True) -> dict[str, Any]:
    """One simulated job of `plan.workers` workers; its figures."""
    import tempfile

    from elasticdl.runtime import auth

    ctx = mp.get_context("spawn")
    credentials = auth.new_auth()
    secret_dir = tempfile.mkdtemp(prefix="scale-secret-")
    auth.write_secret(secret_dir, credentials)
    out, exits, go = ctx.Queue(), ctx.Queue(), ctx.Queue()
    ps_port = ctx.Queue()
    ps = ctx.Process(target=ps_main, args=(ps_port, credentials.secret), daemon=True)
    ps.start()
    ps_addr = f"127.0.0.1:{ps_port.get(timeout=60)}"
    commands = [ctx.Queue() for _ in range(plan.hosts + 1)]  # [0]: the probes' process
    master = ctx.Process(
        target=master_main,
        args=(plan, credentials.secret, ps_addr, commands, exits, out, go),
        daemon=True,
    )
    master.start()
    kind, port = out.get(timeout=120)
    assert kind == "master"
    address = f"127.0.0.1:{port}"
    hosts = [
        ctx.Process(
            target=host_main,
            args=(plan, address, ps_addr, credentials.secret, commands[i], exits, out, i == 0),
            daemon=True,
        )
        for i in range(plan.hosts + 1)
    ]
    for host in hosts:
        host.start()
    time.sleep(1.0)
    pids = [ps.pid, master.pid, *(h.pid for h in hosts)]
    busy0, ours0, wall0 = machine_busy_s(), our_cpu_s(pids), time.monotonic()
    go.put("go")
    status_s: list[float] = []
    vanished_at = None
    done: dict[str, Any] | None = None
    host_figures: list[dict[str, Any]] = []
    next_status = time.monotonic() + STATUS_EVERY_S
    while done is None:
        try:
            kind, payload = out.get(timeout=max(0.0, next_status - time.monotonic()))
            if kind == "done":
                done = payload
            continue
        except queue.Empty:
            pass
        next_status = time.monotonic() + STATUS_EVERY_S
        try:
            seconds, report = status_once(address, secret_dir)
        except ValueError as err:
            print(f"  status: {err}", flush=True)
            continue
        status_s.append(seconds)
        progress = report.get("progress", {})
        percent = progress.get("percent", 0.0)
        if verbose and len(status_s) % 5 == 1:
            states: dict[str, int] = defaultdict(int)
            for w in report.get("workers", []):
                states[w["state"]] += 1
            print(
                f"  {time.monotonic() - wall0:6.1f}s {percent:5.1f}% epoch {progress.get('epoch')}"
                f" status {seconds * 1e3:.0f} ms"
                f" workers {dict(states)} load {loadavg()}",
                flush=True,
            )
        if vanished_at is None and percent >= VANISH_AT * 100:
            vanished_at = time.monotonic() - wall0
            # The probes measure: they stay. The others lose as many as 10 % of all would.
            probes = plan.workers // plan.probe_every
            share = VANISH_FRACTION * plan.workers / (plan.workers - probes)
            for command in commands[1:]:
                command.put(("vanish", share))
    wall = time.monotonic() - wall0
    busy, ours = machine_busy_s() - busy0, our_cpu_s(pids) - ours0
    for command in commands:
        command.put(("collect",))
    while len(host_figures) < plan.hosts + 1:
        kind, payload = out.get(timeout=120)
        if kind == "host":
            host_figures.append(payload)
    master.join(timeout=30)
    # Every task handed out, and what the PS applied of each.
    tasks = [tuple(t) for h in host_figures for t in h["tasks"]]
    from elasticdl.runtime.ps.client import PSClient, PSError

    ids = sorted({t[0] for t in tasks})
    applied: dict[int, int] = {}
    for attempt in range(5):  # the stub PS may still be dropping 1,000s of connections
        try:
            with PSClient([ps_addr], credentials=credentials) as client:
                for i in range(0, len(ids), 5000):
                    applied.update(client.applied_progress(ids[i : i + 5000]))
            break
        except PSError as err:
            print(f"  asking the stub PS what it applied: {err}; again", flush=True)
            if attempt == 4:
                raise
            time.sleep(5)
    ps.terminate()
    ps.join(timeout=10)
    problems = check_accounting(tasks, applied, plan.records_per_epoch, plan.epochs)
    records = done["records"]
    planned = plan.records_per_epoch * plan.epochs
    errors = [e for h in host_figures for e in h["errors"]]
    exact = (
        not problems
        and not done["failure"]
        and records["planned"] == planned
        and records["trained"] == planned
        and records["redone"] == 0
    )
    master_calls = [x for h in host_figures for k, v in h["latencies"].items() for x in v]
    probed = [x for h in host_figures if h["probes"] for v in h["latencies"].values() for x in v]
    outbound = [x for h in host_figures if h["probes"] for x in h["outbound_s"]]
    by_kind = {
        k: sorted(x for h in host_figures if h["probes"] for x in h["latencies"].get(k, []))
        for k in ("get_task", "finish_task", "report_progress")
    }
    every = [x for h in host_figures for x in h["progress_every_s"]]
    return {
        "workers": plan.workers,
        "hosts": plan.hosts,
        "wall_s": wall,
        "training_s": done["wall_s"],
        "master_cpu_cores": done["cpu_s"] / done["wall_s"],
        "master_rss_mb": done["rss_mb"],
        "master_calls": len(master_calls),
        "master_calls_per_s": len(master_calls) / done["wall_s"],
        "probe_calls": len(probed),
        "p50_ms": _percentile(probed, 0.50) * 1e3,
        "p99_ms": _percentile(probed, 0.99) * 1e3,
        "p99_ms_by_call": {k: round(_percentile(v, 0.99) * 1e3, 1) for k, v in by_kind.items()},
        "probe_first_calls_ms_max": max(
            (x for h in host_figures if h["probes"] for x in h["first_calls"]), default=0
        )
        * 1e3,
        "all_first_calls_p50_ms": _percentile(
            [x for h in host_figures for x in h["first_calls"]], 0.5
        )
        * 1e3,
        "all_clients_p50_ms": _percentile(master_calls, 0.50) * 1e3,
        "all_clients_p99_ms": _percentile(master_calls, 0.99) * 1e3,
        "master_nice": done["nice"],
        "master_gc_pauses_ms_gen_at_s": done["gc_pauses"],
        "master_stalls": done["stalls"],
        "master_gc_tracked_frozen": done["gc_tracked"],
        "master_gc_top": done["gc_top"],
        "master_threads_cpu_s": done["threads_cpu_s"],
        "handler_p99_ms": done["handler_p99_ms"],
        "probe_inbound_p50_ms": done["probe_inbound_p50_ms"],
        "probe_inbound_p99_ms": done["probe_inbound_p99_ms"],
        "slowest_inbound_ms_at_s": done["slowest_inbound"],
        "probe_outbound_p50_ms": _percentile(outbound, 0.5) * 1e3,
        "probe_outbound_p99_ms": _percentile(outbound, 0.99) * 1e3,
        "handler_max_ms": done["handler_max_ms"],
        "client_loop_lag_p99_ms": _percentile(
            [x for h in host_figures if not h["probes"] for x in h["loop_lag_s"]], 0.99
        )
        * 1e3,
        "probe_loop_lag_p99_ms": _percentile(
            [x for h in host_figures if h["probes"] for x in h["loop_lag_s"]], 0.99
        )
        * 1e3,
        "calls_by_kind": {k: len(v) for k, v in by_kind.items()},
        "progress_every_s": (min(every), _percentile(every, 0.5), max(every)) if every else None,
        "pushes": sum(h["pushes"] for h in host_figures),
        "vanished": sum(h["vanished"] for h in host_figures),
        "vanished_at_s": vanished_at,
        "launched": done["workers"],
        "relaunched_preempted": done["preempted"],
        "records": records,
        "failure": done["failure"],
        "errors": errors[:5],
        "error_count": len(errors),
        "failed_calls": _failed_calls(host_figures),
        "accounting_problems": problems[:5],
        "records_exact": 1 if exact else 0,
        "status_ms_max": max(status_s) * 1e3 if status_s else math.nan,
        "status_ms_p50": _percentile(status_s, 0.5) * 1e3,
        "status_calls": len(status_s),
        "report_mb": done["report_bytes"] / 1e6,
        "report_build_s": done["report_s"],
        "events_kept": done["events_kept"],
        "our_cores": ours / wall,
        "others_cores": (busy - ours) / wall,
    }


# ------------------------------------------------------------------------------ pods


def pods_running(count: int, verbose: bool = True) -> dict[str, Any]:
    """The Kubernetes instance manager creates `count` worker pods (sleepers) on the fake API
    server until all run; then 10 % are killed at once and replaced until all run again."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    import logging

    from fake_kube import fake_kube

    from elasticdl.runtime.k8s import manifests as m
    from elasticdl.runtime.k8s.manager import KubernetesInstanceManager

    logging.getLogger("elasticdl.k8s").setLevel(logging.ERROR)  # a line per pod's end
    from elasticdl.runtime.master.instances import Role

    def sleeper(pod: dict[str, Any], kube: Any) -> list[str]:
        return ["sleep", "3600"]

    spec = m.ClusterSpec(
        job_name="scale",
        image="elasticdl:bench",
        master_addr="127.0.0.1:50001",
        owner=m.Owner("scale-master", "3d6f0c52-0000-4000-8000-000000000038"),
        termination_grace_s=1,
    )
    figures: dict[str, Any] = {"pods": count}
    # The fake checks objects with kubernetes-validate, ~70 ms a pod here, which no API server
    # takes: one worker pod of the job is checked here, the rest go unchecked (the manifests'
    # tests check them all).
    import kubernetes_validate

    kubernetes_validate.validate(m.worker_pod(spec, 0, [], "check"), "1.33", strict=True)
    busy0, own0, wall0 = machine_busy_s(), time.process_time(), time.monotonic()
    with fake_kube(command=sleeper, validate=False) as kube:
        manager = KubernetesInstanceManager(
            spec, '{"job_name": "scale"}', api_client=kube.api_client()
        )
        try:
            assert manager.wait_watching(30)

            def running() -> int:
                return _running_count(manager, kube, Role.WORKER)

            started = time.monotonic()
            for worker_id in range(count):
                manager.start_worker(worker_id, [])
            figures["all_running_s"] = _wait_until(
                lambda: running() >= count, 600, verbose, running
            )
            figures["create_calls"] = sum(
                1 for method, path in kube.requests if method == "POST" and path.endswith("/pods")
            )
            victims = random.Random(38).sample(range(count), max(1, count // 10))
            killed = time.monotonic()
            for worker_id in victims:
                kube.preempt(m.worker_pod_name(spec.prefix, worker_id))
            replaced: list[int] = []
            next_id = count

            def replacements() -> int:
                nonlocal next_id
                for _ in manager.exits(timeout=0.0):
                    manager.start_worker(next_id, [])
                    replaced.append(next_id)
                    next_id += 1
                return len(replaced)

            figures["replaced_s"] = _wait_until(
                lambda: replacements() >= len(victims) and running() >= count, 600, verbose, running
            )
            figures["replaced"] = len(replaced)
            figures["total_s"] = figures["all_running_s"] + figures["replaced_s"]
            del started, killed
        finally:
            manager.shutdown(grace_s=1)
    wall = time.monotonic() - wall0
    figures["others_cores"] = (machine_busy_s() - busy0 - (time.process_time() - own0)) / wall
    return figures


def _running_count(manager: Any, kube: Any, role: Any) -> int:
    """Pods the manager saw running (its `running` view when it has one, else the API's)."""
    if hasattr(manager, "running"):
        return len(manager.running(role))
    return sum(1 for p in kube.pods() if (p.get("status") or {}).get("phase") == "Running")


def _wait_until(
    done: Callable[[], bool], limit_s: float, verbose: bool, count: Callable[[], int]
) -> float:
    started = time.monotonic()
    shown = started
    while not done():
        if time.monotonic() - started > limit_s:
            raise TimeoutError(f"not done after {limit_s:.0f} s ({count()} running)")
        if verbose and time.monotonic() - shown >= 5:
            shown = time.monotonic()
            print(f"    {shown - started:5.1f}s {count()} running, load {loadavg()}", flush=True)
        time.sleep(0.1)
    return time.monotonic() - started


# ------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000 workers and 1,000 pods (< 5 min)")
    ap.add_argument(
        "--workers",
        type=int,
        nargs="*",
        help="simulated workers per run (default: 1000; full: 1000 5000)",
    )
    ap.add_argument(
        "--hosts", type=int, help="processes of simulated workers (default: workers/250, 2-8)"
    )
    ap.add_argument(
        "--pods", type=int, help="pods created on the fake API server (default 1000; 0: none)"
    )
    ap.add_argument("--task-seconds", type=float, default=6.0, help="median seconds of a task (6)")
    ap.add_argument(
        "--baseline",
        type=int,
        default=50,
        help="workers of a small job simulated first, side by side: the machine's own latency "
        "tail at that size (default 50; 0: none)",
    )
    ap.add_argument(
        "--master-nice",
        type=int,
        default=-10,
        help="the master process's nice value (-10: ahead of the simulated workers, as if it "
        "had cores of its own; 0: shares them equally)",
    )
    args = ap.parse_args(argv)

    sizes = args.workers or ([1000] if args.quick else [1000, 5000])
    pods = 1000 if args.pods is None else args.pods
    print(f"runtime: {runtime_revision()}; nproc {os.cpu_count()}; load {loadavg()}", flush=True)
    results: list[tuple[str, float, str]] = []
    cost = {n: servicer_cost(n) for n in (10, 1000, 5000)}
    print(
        "servicer alone, us a worker call: "
        + ", ".join(f"{cost[n]:.1f} at {n} workers" for n in cost),
        flush=True,
    )
    results.append(("scale_servicer_us_per_call_1000", cost[1000], "none"))
    results.append(("scale_servicer_cost_ratio_5000_to_10", cost[5000] / cost[10], "~1"))
    baseline = None
    if args.baseline:
        plan = Plan(
            workers=args.baseline,
            hosts=1,
            task_seconds=min(args.task_seconds, 3.0),
            tasks_per_worker=4,
            master_nice=args.master_nice,
            probe_every=2,
        )
        print(f"baseline: {plan.workers} workers, half of them probes", flush=True)
        baseline = simulate(plan, verbose=False)
        print(f"  probe p50/p99 {baseline['p50_ms']:.1f}/{baseline['p99_ms']:.1f} ms", flush=True)
        results.append((f"scale_master_p99_ms_{plan.workers}", baseline["p99_ms"], "none"))
    for workers in sizes:
        hosts = args.hosts or max(2, min(8, workers // 250))
        plan = Plan(
            workers=workers,
            hosts=hosts,
            task_seconds=args.task_seconds,
            master_nice=args.master_nice,
            probe_every=max(20, workers // 50),
        )
        print(
            f"simulated job: {workers} workers in {hosts} processes, {plan.tasks_per_worker} tasks "
            f"of {plan.records_per_task} records each ({plan.task_seconds:g} s median), "
            f"{plan.epochs} epochs",
            flush=True,
        )
        figures = simulate(plan)
        print(
            "  "
            + json.dumps(
                {k: (round(v, 3) if isinstance(v, float) else v) for k, v in figures.items()}
            ),
            flush=True,
        )
        suffix = "" if workers == sizes[0] else f"_{workers}"
        results += [
            (f"scale_workers{suffix}", figures["workers"], ">=1000"),
            (f"scale_master_p99_ms{suffix}", figures["p99_ms"], "<=100"),
            (f"scale_master_cpu_cores{suffix}", figures["master_cpu_cores"], "<=1"),
            (f"scale_master_rss_mb{suffix}", figures["master_rss_mb"], "none"),
            (f"scale_records_exact{suffix}", figures["records_exact"], "1"),
            (f"scale_status_ms{suffix}", figures["status_ms_max"], "<1000"),
            (f"scale_report_mb{suffix}", figures["report_mb"], "none"),
            (f"scale_other_load_cores{suffix}", figures["others_cores"], "none"),
        ]
        if baseline is not None:
            ratio = figures["p99_ms"] / max(baseline["p99_ms"], 1e-9)
            results.append((f"scale_p99_ratio_to_{baseline['workers']}{suffix}", ratio, "none"))
    if pods:
        print(f"pods: {pods} worker pods on the fake API server", flush=True)
        figures = pods_running(pods)
        print(
            "  "
            + json.dumps(
                {k: (round(v, 3) if isinstance(v, float) else v) for k, v in figures.items()}
            ),
            flush=True,
        )
        results += [
            ("scale_pods_running_s", figures["total_s"], "<=120"),
            ("scale_pods_other_load_cores", figures["others_cores"], "none"),
        ]
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
