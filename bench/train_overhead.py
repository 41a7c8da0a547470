"""Benchmark the elastic training runtime against plain Keras `model.fit`, side by side.

    python -P bench/train_overhead.py [--quick] [--dir DIR] [--threads 1] [--cases mnist,dnn]
                                      [--jit-compile auto|true|false]
                                      [--repeats 2] [--quiet-wait 20]
    python -P bench/train_overhead.py --profile dnn [--quick] [--cprofile]

The dnn case also runs, after each pair, the Keras 2 anchor of bench/pss_anchor.py: tf_keras
`fit` under `ParameterServerStrategy` (1 worker, 1 PS, loopback) on the same records, model
and batch; `--no-anchor` skips it; it needs `pip install -e '.[bench]'`.

Two cases by default, each side on the same model, data, batch size and number of records:

  * mnist: `mnist.mnist_functional_api.custom_model` on generated `digits` records, batch 64;
  * dnn:   `regressor.DNN` (hidden_units=[64, 32]) on generated `regression` records, batch 256;

and one on request (`--cases cifar10`), a CNN with more arithmetic a record and few parameters:

  * cifar10: `cifar10.cifar10_functional_api.custom_model` on `cifar10-synthetic`, batch 128.

For each case, `--repeats` pairs (Keras, then elasticdl) run back to back:

  * **Keras**: a fresh subprocess (so its TensorFlow thread settings are its own) reads every
    RecordIO record into memory, builds `from_tensor_slices(records)` -> the spec's
    `dataset_fn` (its `shuffle` made a no-op, as the worker does) -> `.batch(B).prefetch(1)`,
    compiles the spec's model with the spec's loss and optimizer (Keras defaults otherwise) and
    runs `fit(epochs=E)`. Figures: records / `fit()` wall time (tracing included, importing
    TensorFlow not), and the steady rate from the end of the first minibatch to the end.
  * **elasticdl**: `TrainingJob(options_from_kwargs(...)).run()` — exactly what
    `elasticdl.train(...)` does — with 1 worker, 1 PS, async SGD, master in this process,
    16 minibatches per task. Figures: the job report's `throughput.records_per_second` (from
    process launch to the last task, so PS/worker start-up is included), and the steady rate
    from the first progress report that counts the first minibatch applied (an overlapping
    worker's very first report counts none) to the last one, timed in the master as reports
    arrive (a report may cover several minibatches); that time is split, by the
    records each interval between reports counts, into minibatches within a task and the
    extra time of a task switch. That split leans: a task's first report counts no records
    (its push is in flight), so a switch's interval also holds the task's first minibatches,
    the slowest (MNIST: 9.7 ms "within" and +27 ms a switch, where the worker's own clock read
    11.3 ms and ~7 ms a task, bench/RESULTS.md); `--profile` times them on the worker's clock.

Both sides get the same TensorFlow intra- and inter-op thread count (`--threads`, default 1:
the runtime's master, PS and worker share 2 cores; `intra_op_threads` for the runtime, which
sets both). CPU time per minibatch is read from /proc for every process over the steady
window, and so is the CPU used by other processes on the machine (this VM is shared), which
slows either side when present. Figures are medians over the repeats.

`--profile CASE` runs the worker's own loop (`elasticdl.runtime.worker.main.run`) in this
process, with a parameter server subprocess and the master served from this process, and
prints where the time of one minibatch goes (timers around the trainer's, the PS client's and
the master stub's methods) and the CPU of each thread of the worker's and of the PS's process
over the middle half of the minibatches (bench/_thread_cpu.py); `--cprofile` adds cProfile's
top functions.

Prints one `RESULT <name> <value> target=<target>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CLOCK_TICK, machine_busy_s, print_results, runtime_revision, wait_quiet  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


@dataclass(frozen=True)
class Case:
    name: str
    dataset: str
    model_def: str
    params: str
    batch: int
    steady_target: float | None
    """Issue 4/6's target for the steady ratio to Keras `fit` (None: none set)."""
    startup_target: float | None
    """Its target for the ratio including start-up (None: none set)."""
    records: int
    records_per_file: int
    epochs: int
    quick_records: int
    quick_epochs: int

    @property
    def records_per_task(self) -> int:
        """16 minibatches per task (the default 1,024 for the mnist case)."""
        return 16 * self.batch


CASES = {
    "mnist": Case(
        name="mnist",
        dataset="digits",
        model_def="mnist.mnist_functional_api.custom_model",
        params="lr=0.1",
        batch=64,
        steady_target=0.85,
        startup_target=None,
        records=20_480,
        records_per_file=4_096,
        epochs=1,
        quick_records=4_096,
        quick_epochs=1,
    ),
    "dnn": Case(
        name="dnn",
        dataset="regression",
        model_def="regressor.DNN",
        params="hidden_units=[64, 32], learning_rate=0.01",
        batch=256,
        steady_target=0.80,
        startup_target=0.55,
        records=131_072,
        records_per_file=16_384,
        epochs=1,
        quick_records=32_768,
        quick_epochs=1,
    ),
    # The "larger CNN" issue 4/6 asks for on a GPU: more arithmetic a record than the MNIST
    # CNN (32x32x3 images, three convolution blocks) and few parameters (~15k); not run unless
    # asked for (`--cases cifar10`).
    "cifar10": Case(
        name="cifar10",
        dataset="cifar10-synthetic",
        model_def="cifar10.cifar10_functional_api.custom_model",
        params="lr=0.01",
        batch=128,
        steady_target=None,
        startup_target=None,
        records=16_384,
        records_per_file=4_096,
        epochs=1,
        quick_records=4_096,
        quick_epochs=1,
    ),
}


def make_data(case: Case, root: Path, num_records: int) -> Path:
    from elasticdl.runtime.data.generate import generate

    out = root / f"data-{case.name}"
    generate(case.dataset, out, num_records, records_per_file=case.records_per_file)
    return out


# --------------------------------------------------------------------------- Keras side


def keras_fit(
    case: Case, data: str, threads: int, epochs: int, jit: str = "auto"
) -> dict[str, Any]:
    """Train with model.fit in this (fresh) process; returns the figures as a dict."""
    t_start = time.perf_counter()
    import tensorflow as tf

    if threads > 0:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    from elasticdl.mode import Mode
    from elasticdl.runtime.data.files import expand_data_urls
    from elasticdl.runtime.data.metadata import DatasetMetadata
    from elasticdl.runtime.data.recordio import RecordIOReader
    from elasticdl.runtime.model_spec import load_model_spec
    from elasticdl.runtime.worker.pipeline import in_task_order

    import_s = time.perf_counter() - t_start
    records: list[bytes] = []
    for url in expand_data_urls(data):
        with RecordIOReader(url) as reader:
            records.extend(reader)
    instance = load_model_spec(case.model_def, None, case.params).instantiate()
    metadata = DatasetMetadata.from_example(records[0])

    class Clock(tf.keras.callbacks.Callback):
        first_batch_end = 0.0
        first_batch_cpu = 0.0
        first_batch_busy = 0.0
        end = 0.0
        end_cpu = 0.0
        end_busy = 0.0
        batches = 0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.batches += 1
            if self.batches == 1:
                self.first_batch_end = time.perf_counter()
                self.first_batch_cpu = time.process_time()
                self.first_batch_busy = machine_busy_s()

        def on_train_end(self, logs: Any = None) -> None:
            self.end = time.perf_counter()
            self.end_cpu = time.process_time()
            self.end_busy = machine_busy_s()

    clock = Clock()
    t0 = time.perf_counter()
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(records, dtype=tf.string))
    with in_task_order():
        dataset = instance.dataset_fn(dataset, Mode.TRAINING, metadata)
    dataset = dataset.batch(case.batch).prefetch(1)
    jit_compile = {"true": True, "false": False}.get(jit, "auto")
    instance.model.compile(
        optimizer=instance.optimizer, loss=instance.loss, jit_compile=jit_compile
    )
    history = instance.model.fit(dataset, epochs=epochs, verbose=0, callbacks=[clock])
    fit_s = time.perf_counter() - t0
    total = len(records) * epochs
    steady_s = clock.end - clock.first_batch_end
    return {
        "records": total,
        "import_s": import_s,
        "fit_s": fit_s,
        "records_per_s": total / fit_s,
        "steady_records_per_s": (total - case.batch) / steady_s,
        "steady_ms_per_batch": steady_s / max(1, clock.batches - 1) * 1e3,
        "steady_cpu_ms_per_batch": (clock.end_cpu - clock.first_batch_cpu)
        / max(1, clock.batches - 1)
        * 1e3,
        "others_cpu_ms_per_batch": (
            (clock.end_busy - clock.first_batch_busy) - (clock.end_cpu - clock.first_batch_cpu)
        )
        / max(1, clock.batches - 1)
        * 1e3,
        "first_batch_s": clock.first_batch_end - t0,
        "final_loss": float(history.history["loss"][-1]),
        "jit_compile": bool(getattr(instance.model, "jit_compile", False)),
    }


def keras_child_argv(
    case: Case, data: Path, threads: int, epochs: int, jit: str = "auto"
) -> list[str]:
    """The command line of a fresh process that runs `keras_fit` and prints its figures."""
    spec = {"case": case.name, "data": str(data), "threads": threads, "epochs": epochs, "jit": jit}
    return [sys.executable, "-P", str(Path(__file__).resolve()), "--keras-child", json.dumps(spec)]


def keras_in_subprocess(
    case: Case, data: Path, threads: int, epochs: int, jit: str = "auto"
) -> dict[str, Any]:
    argv = keras_child_argv(case, data, threads, epochs, jit)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"Keras subprocess failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("KERAS ")][-1]
    figures = json.loads(line[len("KERAS ") :])
    figures["process_s"] = time.perf_counter() - t0
    return figures


# --------------------------------------------------------------------------- tf_keras PSS


def pss_available(case: Case) -> bool:
    """Whether the tf_keras ParameterServerStrategy anchor runs for `case` (says why not)."""
    import importlib.util

    from pss_anchor import SUPPORTED

    if case.name not in SUPPORTED:
        print(f"  [{case.name}] no tf_keras PSS anchor for this case (only {sorted(SUPPORTED)})")
        return False
    if importlib.util.find_spec("tf_keras") is None:
        print("  tf_keras PSS anchor skipped: pip install -e '.[bench]' (tf_keras)")
        return False
    return True


def run_pss_anchor(case: Case, data: Path, threads: int) -> dict[str, Any]:
    from pss_anchor import SUPPORTED, run_anchor

    model_def, params, batch = SUPPORTED[case.name]
    if (model_def, params, batch) != (case.model_def, case.params, case.batch):
        raise RuntimeError(f"pss_anchor.SUPPORTED[{case.name!r}] differs from the case")
    return run_anchor(case.name, data, threads)


# --------------------------------------------------------------------------- elasticdl side


def process_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of this process and of each child, by command line."""
    me = os.getpid()
    found: dict[str, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            # a standby process's title is its role's command line as one string
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").split()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid, ppid = int(entry), int(fields[1])
        if pid != me and ppid != me:
            continue
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICK
        if pid == me:
            role = "master (bench process)"
        else:
            role = "child"
            for i, arg in enumerate(cmdline):
                if arg == b"-m" and i + 1 < len(cmdline):
                    role = cmdline[i + 1].decode().split(".")[-2]  # worker / ps
                if arg in (b"--worker_id", b"--ps_id") and i + 1 < len(cmdline):
                    role += cmdline[i + 1].decode()
        found[role] = found.get(role, 0.0) + cpu
    found["whole machine (busy)"] = machine_busy_s()
    return found


def timed_job_class() -> type:
    """TrainingJob that timestamps every progress report as the master receives it, and reads
    the CPU time of its processes at the first report and when the last record is reported."""
    from elasticdl.runtime.master.training_job import TrainingJob

    class TimedJob(TrainingJob):  # type: ignore[misc, valid-type]
        timeline: list[tuple[float, int, int, int]]
        cpu_marks: list[tuple[float, dict[str, float]]]

        def _prepare(self, *args: Any, **kwargs: Any) -> Any:
            # Arguments passed through: TrainingJob._prepare is private, its signature moves.
            self._t0 = time.monotonic()  # the job's own start time lives in its supervisor now
            config, tasks, sample, work = super()._prepare(*args, **kwargs)
            self.timeline = []
            self.cpu_marks = []
            original = tasks.report_progress
            timeline, marks = self.timeline, self.cpu_marks
            planned = tasks.records_planned

            def report_progress(worker_id: int, task_id: int, done: int, now: float) -> bool:
                accepted = original(worker_id, task_id, done, now)
                records = tasks.records_trained
                if not timeline and records == 0:
                    # An overlapping worker's first report counts nothing yet: its first
                    # minibatch is applied (the PS's first apply compiled) with the second.
                    return accepted
                if timeline and records <= timeline[-1][1]:
                    return accepted  # no new minibatch (e.g. the task result after its last)
                if not timeline or (records >= planned and len(marks) < 2):
                    marks.append((now, process_cpu()))
                timeline.append((now, records, task_id, worker_id))
                return accepted

            tasks.report_progress = report_progress  # report_result goes through it too
            return config, tasks, sample, work

    return TimedJob


def split_intervals(
    timeline: list[tuple[float, int, int, int]],
) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """(seconds, records) between consecutive reports of each worker that counted new records:
    within a task, and across a task switch (the previous task's last report to the first of
    the next that counts records). Records are the job's count, so the split is one worker's
    only when the job has one (as here). A worker's report may cover several minibatches
    (runtime/worker/main.py), so an interval may hold several minibatches."""
    within: list[tuple[float, int]] = []
    switches: list[tuple[float, int]] = []
    last: dict[int, tuple[float, int, int]] = {}
    for t1, r1, task1, worker in timeline:
        if worker in last:
            t0, r0, task0 = last[worker]
            (within if task0 == task1 else switches).append((t1 - t0, r1 - r0))
        last[worker] = (t1, r1, task1)
    return within, switches


def split_per_batch(
    within: list[tuple[float, int]], switches: list[tuple[float, int]], batch: int
) -> dict[str, float]:
    """Milliseconds a minibatch takes within a task (mean and median over intervals), and the
    extra a task switch costs beyond the minibatches its interval holds."""
    records = sum(r for _, r in within)
    per_batch = sum(s for s, _ in within) / records * batch if records else 0.0
    extra = [s - r / batch * per_batch for s, r in switches]
    return {
        "within_task_ms_per_batch": per_batch * 1e3,
        "within_task_median_ms": statistics.median(s / r * batch for s, r in within if r) * 1e3
        if records
        else 0.0,
        "task_switch_extra_ms": statistics.mean(extra) * 1e3 if extra else 0.0,
    }


def elastic_train(
    case: Case,
    data: Path,
    root: Path,
    threads: int,
    epochs: int,
    num_workers: int = 1,
    tag: str = "",
    jit: str = "auto",
) -> dict[str, Any]:
    """Run one job on the local engine; returns report figures and the steady rate."""
    from elasticdl.train_command import options_from_kwargs

    name = f"{case.name}{tag}-{num_workers}w"
    options = options_from_kwargs(
        model_def=case.model_def,
        data=str(data),
        output=str(root / f"out-{name}"),
        params=case.params,
        num_workers=num_workers,
        num_ps=1,
        minibatch_size=case.batch,
        num_epochs=epochs,
        records_per_task=case.records_per_task,
        intra_op_threads=threads,
        jit_compile=jit,
        use_async=True,
        log_dir=str(root / f"log-{name}"),
    )
    job = timed_job_class()(options)
    t0 = time.perf_counter()
    result = job.run()
    wall = time.perf_counter() - t0
    if not result.succeeded:
        raise RuntimeError(f"elasticdl job failed: {result.error}")
    report = result.report
    timeline = job.timeline
    (t_first, r_first, *_), (t_last, r_last, *_) = timeline[0], timeline[-1]
    steady_records = r_last - r_first
    steady_s = t_last - t_first
    batches = max(1.0, steady_records / case.batch)
    within, switches = split_intervals(timeline)
    cpu_ms: dict[str, float] = {}
    if len(job.cpu_marks) == 2:
        (_, first), (_, last) = job.cpu_marks
        cpu_ms = {
            role: round((last[role] - first.get(role, 0.0)) / batches * 1e3, 2) for role in last
        }
        mine = sum(v for k, v in cpu_ms.items() if k != "whole machine (busy)")
        cpu_ms["others on the machine"] = round(cpu_ms["whole machine (busy)"] - mine, 2)
    return {
        "records": report["records"]["trained"],
        "records_per_s": report["throughput"]["records_per_second"],
        "training_s": report["throughput"]["training_seconds"],
        "call_s": wall,
        "startup_s": t_first - job._t0,
        "steady_records_per_s": steady_records / steady_s,
        "steady_ms_per_batch": steady_s / batches * 1e3,
        **split_per_batch(within, switches, case.batch),
        "tasks_seen": len(switches) + 1,
        "steady_cpu_ms_per_batch": cpu_ms,
        "final_loss": report["final_loss"],
        "model_version": report["model_version"],
        "timeline": timeline,
        "t0": job._t0,
    }


# --------------------------------------------------------------------------- profile mode


class Phases:
    """Wall-time accumulators around functions."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t0
                self.calls[name] += 1

        return timed

    def timed_iter(self, name: str, first_name: str, iterable: Any) -> Iterator[Any]:
        """Time each `next`; the first item under `first_name` (a cold pipeline)."""
        iterator = iter(iterable)
        current = first_name
        while True:
            t0 = time.perf_counter()
            try:
                item = next(iterator)
            except StopIteration:
                self.seconds[name] += time.perf_counter() - t0
                return
            self.seconds[current] += time.perf_counter() - t0
            self.calls[current] += 1
            current = name
            yield item


class TimedCallable:
    """A gRPC multi-callable whose blocking calls, and waits on its futures, are timed."""

    def __init__(self, phases: Phases, name: str, callable_: Any) -> None:
        self._phases = phases
        self._name = name
        self._callable = callable_
        self._call = phases.wrap(f"{name} rpc", callable_)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def future(self, *args: Any, **kwargs: Any) -> Any:
        future = self._phases.wrap(f"{self._name} future (send)", self._callable.future)(
            *args, **kwargs
        )
        future.result = self._phases.wrap(f"{self._name} future (wait)", future.result)
        return future

    def __getattr__(self, name: str) -> Any:
        return getattr(self._callable, name)


def profile_worker(
    case: Case,
    data: Path,
    records: int,
    root: Path,
    threads: int,
    use_cprofile: bool,
    jit: str = "auto",
) -> None:
    """The worker loop in this process, its methods timed, and the CPU of its threads and of
    the PS process over the middle half of its minibatches; see the module docstring."""
    from _thread_cpu import ThreadWindow

    from elasticdl.proto import elasticdl_pb2_grpc
    from elasticdl.runtime.data.planner import count_files
    from elasticdl.runtime.data.shards import plan_shards
    from elasticdl.runtime.job_config import JobConfig
    from elasticdl.runtime.master.ports import choose_port
    from elasticdl.runtime.master.servicer import MasterServicer, serve_master
    from elasticdl.runtime.master.task_manager import TaskManager, TaskManagerConfig
    from elasticdl.runtime.ps.client import PSClient
    from elasticdl.runtime.worker import main as worker_main
    from elasticdl.runtime.worker.progress import ProgressReports
    from elasticdl.runtime.worker.task_ahead import TaskAhead
    from elasticdl.runtime.worker.trainer import Trainer
    from elasticdl.runtime.zoo_source import resolve_zoo

    zoo = resolve_zoo(None)
    config = JobConfig(
        job_name=f"profile-{case.name}",
        model_def=case.model_def,
        model_zoo_root=str(zoo.root),
        params=case.params,
        minibatch_size=case.batch,
        records_per_task=case.records_per_task,
        intra_op_threads=threads,
        jit_compile=jit,
    )
    config_path = config.write(root / "profile-job.json")
    shards = plan_shards(count_files(str(data)), case.records_per_task)
    tasks = TaskManager(
        shards, TaskManagerConfig(records_per_task=case.records_per_task, shuffle=False)
    )
    servicer = MasterServicer(tasks)
    server, master_port = serve_master(servicer, "127.0.0.1", 0)
    ps_port = choose_port()
    ps_log = (root / "profile-ps.log").open("wb")
    ps = subprocess.Popen(  # noqa: S603
        [
            sys.executable,
            "-P",
            "-m",
            "elasticdl.runtime.ps.main",
            "--config",
            str(config_path),
            "--ps_id",
            "0",
            "--port",
            str(ps_port),
        ],
        stdout=ps_log,
        stderr=subprocess.STDOUT,
    )
    phases = Phases()
    # Timers around the methods the worker loop calls (class attributes: the loop builds its
    # own Trainer and PSClient).
    batch_ends: list[float] = []
    train_batch = phases.wrap("train_batch (total)", Trainer.train_batch)
    minibatches = records // case.batch
    window = (minibatches // 4, minibatches - minibatches // 4)
    worker_cpu, ps_cpu = ThreadWindow(), ThreadWindow(ps.pid)

    batch_tasks: list[int] = []

    def train_batch_noting_end(*args: Any, **kwargs: Any) -> Any:
        try:
            return train_batch(*args, **kwargs)
        finally:
            batch_ends.append(time.perf_counter())
            batch_tasks.append(args[4])  # (self, features, labels, records, task_id, ...)
            if len(batch_ends) in window:
                for process in (worker_cpu, ps_cpu):
                    (process.start if len(batch_ends) == window[0] else process.stop)()

    Trainer.train_batch = train_batch_noting_end
    # The trainer's internals change; a method that is gone is left untimed (said below).
    untimed: list[str] = []

    def wrap_method(owner: type, attr: str, label: str) -> None:
        if not callable(getattr(owner, attr, None)):
            untimed.append(f"{owner.__name__}.{attr}")
            return
        setattr(owner, attr, phases.wrap(label, getattr(owner, attr)))

    wrap_method(Trainer, "_pull", "  _pull: pull rpc + Variable.assign")
    wrap_method(PSClient, "pull", "    PSClient.pull (rpc + decode)")
    wrap_method(PSClient, "push_gradients", "  PSClient.push_gradients")
    wrap_method(Trainer, "ensure_built", "ensure_built")
    wrap_method(Trainer, "finish_task", "task end: the last push's answer (finish_task)")
    wrap_method(ProgressReports, "task_end", "task end: progress.task_end")
    wrap_method(ProgressReports, "flush", "task end: progress.flush")
    wrap_method(TaskAhead, "take", "task start: TaskAhead.take (prepared records)")
    Trainer.batch_size = staticmethod(phases.wrap("batch_size(labels)", Trainer.batch_size))
    original_build = Trainer._build
    original_batches = Trainer.batches

    trainers: list[Any] = []

    def build(self: Any, *args: Any, **kwargs: Any) -> None:
        original_build(self, *args, **kwargs)
        trainers.append(self)
        self._traced_step = self._step
        self._step = phases.wrap("  compiled step (tf.function)", self._step)

    def batches(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        dataset = phases.wrap("task pipeline build (dataset_fn)", original_batches)(
            self, *args, **kwargs
        )
        return phases.timed_iter(
            "next minibatch (tf.data)", "first minibatch of a task (tf.data)", dataset
        )

    Trainer._build = build
    Trainer.batches = batches
    original_stub = elasticdl_pb2_grpc.MasterStub.__init__

    def stub_init(self: Any, channel: Any) -> None:
        original_stub(self, channel)
        for method in ("get_task", "report_progress", "report_task_result", "finish_task"):
            setattr(self, method, TimedCallable(phases, f"master.{method}", getattr(self, method)))

    elasticdl_pb2_grpc.MasterStub.__init__ = stub_init
    args = worker_main.parse_args(
        [
            "--config",
            str(config_path),
            "--worker_id",
            "0",
            "--master_addr",
            f"127.0.0.1:{master_port}",
            "--ps_addrs",
            f"127.0.0.1:{ps_port}",
        ]
    )
    profiler = None
    if use_cprofile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0 = time.perf_counter()
    try:
        worker_main.run(args)
    finally:
        wall = time.perf_counter() - t0
        if profiler is not None:
            profiler.disable()
        ps.terminate()
        ps.wait()
        ps_log.close()
        server.stop(None)
    steps = phases.calls["train_batch (total)"]
    if not batch_ends or tasks.records_trained == 0:
        raise RuntimeError(
            f"the worker loop trained nothing ({tasks.records_trained} records); see its log "
            "above (a timer above may no longer fit the trainer's methods)"
        )
    if untimed:
        print(f"not timed (no longer in the runtime): {', '.join(untimed)}")
    print(
        f"\nworker loop: {wall:.2f} s for {tasks.records_trained} records, {steps} minibatches, "
        f"{len(shards)} tasks (includes importing TensorFlow and building the model)"
    )
    steady_ms = (batch_ends[-1] - batch_ends[0]) / max(1, len(batch_ends) - 1) * 1e3
    print(
        f"steady: {steady_ms:.2f} ms per minibatch (first minibatch's end to the last's; "
        f"{case.batch / steady_ms * 1e3:.0f} records/s)"
    )
    gaps = [b - a for a, b in itertools.pairwise(batch_ends)]
    pairs = list(zip(gaps, itertools.pairwise(batch_tasks), strict=True))
    crossing = [gap for gap, (a, b) in pairs if a != b]
    inside = [gap for gap, (a, b) in pairs if a == b]
    if crossing and inside:
        print(
            f"minibatch end to the next one's, median: {statistics.median(inside) * 1e3:.2f} ms "
            f"within a task, {statistics.median(crossing) * 1e3:.2f} ms across a task switch"
        )
        deciles = statistics.quantiles(inside, n=10)
        print(
            f"within a task: mean {statistics.fmean(inside) * 1e3:.2f} ms, deciles 1/5/9 "
            f"{deciles[0] * 1e3:.2f} / {deciles[4] * 1e3:.2f} / {deciles[8] * 1e3:.2f} ms, "
            f"slowest {max(inside) * 1e3:.1f} ms; the minibatches' time in gaps over twice the "
            f"median: {sum(g for g in inside if g > 2 * statistics.median(inside)) / sum(gaps):.0%}"
        )
        print(f"median ms by position in the task: {_by_position(gaps, batch_tasks)}")
    for trainer in trainers:
        traced = trainer._traced_step.traces
        print(f"the step function was traced {traced} time(s)")
    between = window[1] - window[0]
    print(f"CPU by thread, minibatches {window[0]} to {window[1]}:")
    print(worker_cpu.report("worker (this process; the master's threads too)", between))
    print(ps_cpu.report("parameter server", between))
    print(f"{'phase':48s} {'calls':>7s} {'total s':>8s} {'ms/minibatch':>13s}")
    for name in sorted(phases.seconds, key=lambda n: -phases.seconds[n]):
        seconds = phases.seconds[name]
        print(f"{name:48s} {phases.calls[name]:7d} {seconds:8.3f} {seconds / steps * 1e3:13.3f}")
    if profiler is not None:
        import pstats

        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(r"runtime/|grpc/_channel|keras/src/backend", 40)
        stats.sort_stats("tottime").print_stats(25)


# --------------------------------------------------------------------------- main


def rounded(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}


def elastic_cpu_ms(cpu_ms: dict[str, float]) -> float:
    """CPU ms per minibatch of the job's own processes (master, PS, workers)."""
    return sum(v for k, v in cpu_ms.items() if k.startswith(("master", "ps", "worker")))


def _by_position(gaps: list[float], batch_tasks: list[Any]) -> str:
    """Median gap before the n-th minibatch of a task (n from 1), for each n: whether a task's
    first minibatches run slower than its last (background work of the task switch)."""
    by: dict[int, list[float]] = {}
    position = 0
    for gap, (before, this) in zip(gaps, itertools.pairwise(batch_tasks), strict=True):
        position = position + 1 if this == before else 0
        by.setdefault(position, []).append(gap * 1e3)
    return " ".join(f"{n}:{statistics.median(v):.1f}" for n, v in sorted(by.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records, 1 epoch (< 1 min)")
    ap.add_argument("--dir", help="where to write data and outputs (default: a temp dir)")
    ap.add_argument("--threads", type=int, default=1, help="TF intra/inter-op threads, both sides")
    ap.add_argument("--cases", default="mnist,dnn", help="comma-separated: mnist, dnn, cifar10")
    ap.add_argument("--repeats", type=int, help="Keras/elasticdl pairs per case (2; quick 1)")
    ap.add_argument(
        "--quiet-wait",
        type=float,
        help="seconds to wait for other processes to go quiet before each run (20; quick 0)",
    )
    ap.add_argument("--profile", choices=sorted(CASES), help="profile the worker loop instead")
    ap.add_argument("--cprofile", action="store_true", help="with --profile: add cProfile")
    ap.add_argument(
        "--no-anchor",
        dest="anchor",
        action="store_false",
        help="skip the tf_keras ParameterServerStrategy anchor (bench/pss_anchor.py)",
    )
    ap.add_argument(
        "--jit-compile",
        choices=("auto", "true", "false"),
        default="auto",
        help="XLA for both sides: the job's --jit_compile and Keras's compile(jit_compile=)",
    )
    ap.add_argument("--keras-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    if args.keras_child:
        spec = json.loads(args.keras_child)
        case = CASES[spec["case"]]
        figures = keras_fit(case, spec["data"], spec["threads"], spec["epochs"], spec["jit"])
        print("KERAS " + json.dumps(figures), flush=True)
        return 0

    tmp = tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-train-")
    root = Path(tmp.name)
    if args.profile:
        print(f"runtime: {runtime_revision()}")
        case = CASES[args.profile]
        records = case.quick_records if args.quick else case.records
        data = make_data(case, root, records)
        profile_worker(case, data, records, root, args.threads, args.cprofile, args.jit_compile)
        tmp.cleanup()
        return 0

    results: list[tuple[str, float, str]] = []

    def result(name: str, value: float, target: str = "none") -> None:
        results.append((name, value, target))
        print(f"  {name} = {value:.4g}", flush=True)

    print(f"runtime: {runtime_revision()}")
    print(f"threads per TF process: {args.threads} (nproc {os.cpu_count()}); files in {root}")
    repeats = args.repeats or (1 if args.quick else 2)
    quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0 if args.quick else 20)
    for name in args.cases.split(","):
        case = CASES[name]
        records = case.quick_records if args.quick else case.records
        epochs = case.quick_epochs if args.quick else case.epochs
        t0 = time.perf_counter()
        data = make_data(case, root, records)
        print(
            f"[{name}] {records} {case.dataset} records x {epochs} epoch(s), batch {case.batch}, "
            f"{case.records_per_task} records/task (data written in "
            f"{time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
        pairs = []
        anchors: list[tuple[dict, dict]] = []
        anchor = args.anchor and pss_available(case)
        for repeat in range(repeats):
            load = wait_quiet(quiet_wait)
            keras = keras_in_subprocess(case, data, args.threads, epochs, args.jit_compile)
            load = max(load, wait_quiet(quiet_wait))
            edl = elastic_train(
                case, data, root, args.threads, epochs, tag=f"-r{repeat}", jit=args.jit_compile
            )
            print(f"  [{repeat + 1}/{repeats}] other processes' load before: {load:.2f} cores")
            pss = run_pss_anchor(case, data, args.threads) if anchor else None
            pairs.append((keras, edl))
            if pss is not None:
                anchors.append((pss, edl))
                print(f"  [{repeat + 1}/{repeats}] tf_keras PSS: {rounded(pss)}", flush=True)
            shown = {k: v for k, v in edl.items() if k not in ("timeline", "t0")}
            print(f"  [{repeat + 1}/{repeats}] keras: {rounded(keras)}", flush=True)
            print(f"  [{repeat + 1}/{repeats}] elasticdl: {rounded(shown)}", flush=True)
            print(
                f"  [{repeat + 1}/{repeats}] ratio incl. start-up "
                f"{edl['records_per_s'] / keras['records_per_s']:.3f}, steady "
                f"{edl['steady_records_per_s'] / keras['steady_records_per_s']:.3f}",
                flush=True,
            )

        def median(side: int, key: str, pairs: list[tuple[dict, dict]] = pairs) -> float:
            return statistics.median(pair[side][key] for pair in pairs)

        def median_ratio(key: str, pairs: list[tuple[dict, dict]] = pairs) -> float:
            return statistics.median(e[key] / k[key] for k, e in pairs)

        result(f"{name}_keras_fit_records_per_s", median(0, "records_per_s"))
        result(f"{name}_keras_steady_records_per_s", median(0, "steady_records_per_s"))
        result(f"{name}_elasticdl_records_per_s", median(1, "records_per_s"))
        result(f"{name}_elasticdl_steady_records_per_s", median(1, "steady_records_per_s"))
        result(f"{name}_elasticdl_startup_s", median(1, "startup_s"))
        result(f"{name}_keras_steady_ms_per_batch", median(0, "steady_ms_per_batch"))
        result(f"{name}_elasticdl_steady_ms_per_batch", median(1, "steady_ms_per_batch"))
        result(f"{name}_elasticdl_within_task_ms_per_batch", median(1, "within_task_ms_per_batch"))
        result(f"{name}_elasticdl_task_switch_extra_ms", median(1, "task_switch_extra_ms"))
        startup_target = f">={case.startup_target}" if case.startup_target else "none"
        result(f"{name}_ratio_incl_startup", median_ratio("records_per_s"), startup_target)
        steady_target = f">={case.steady_target}" if case.steady_target else "none"
        result(f"{name}_ratio_steady", median_ratio("steady_records_per_s"), steady_target)
        result(
            f"{name}_cpu_ratio_steady",
            statistics.median(
                k["steady_cpu_ms_per_batch"] / elastic_cpu_ms(e["steady_cpu_ms_per_batch"])
                for k, e in pairs
            ),
        )
        if anchors:
            result(
                f"{name}_pss_records_per_s",
                statistics.median(p["records_per_s"] for p, _ in anchors),
            )
            result(
                f"{name}_pss_steady_records_per_s",
                statistics.median(p["steady_records_per_s"] for p, _ in anchors),
            )
            result(
                f"{name}_ratio_steady_over_pss",
                statistics.median(
                    e["steady_records_per_s"] / p["steady_records_per_s"] for p, e in anchors
                ),
                ">=1.0",
            )
            result(
                f"{name}_ratio_incl_startup_over_pss",
                statistics.median(e["records_per_s"] / p["records_per_s"] for p, e in anchors),
            )
        result(
            f"{name}_other_processes_cores_busy",
            statistics.median(
                e["steady_cpu_ms_per_batch"].get("others on the machine", 0.0)
                / e["steady_ms_per_batch"]
                for _, e in pairs
            ),
        )

    tmp.cleanup()
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
