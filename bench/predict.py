"""Benchmark prediction: `elasticdl.predict` with 1 and 2 workers vs Keras `model.predict`.

    python -P bench/predict.py [--quick] [--dir DIR] [--cases dnn,mnist] [--threads 1]
                               [--profile-tasks 6] [--quiet-wait 0]

Two cases (models of bench/train_overhead.py; batch 256, the `elasticdl predict` default):

  * dnn:   `regressor.DNN` (hidden_units=[64, 32]) on 163,840 generated `regression` records
           (4 files, 4,096 records/task: 40 tasks);
  * mnist: `mnist.mnist_functional_api.custom_model` (28x28 inputs) on 32,768 generated
           `digits` records (4 files, 2,048 records/task: 16 tasks).

For each case a model is trained first with `elasticdl.train` (1 worker, 1 PS, 1 epoch on a
few thousand separate records; not measured) to get a TrainedModel directory. Then:

  * **elasticdl**: `InferenceJob(options_from_kwargs("predict", ...)).run()` -- exactly what
    `elasticdl.predict(...)` does -- with 1 worker, then 2, master in this process, every
    worker limited to `--threads` TensorFlow intra- and inter-op threads (`intra_op_threads`),
    RecordIO output. Figures: rows / wall time of the call (end to end: reading the
    TrainedModel, worker start-up, checking and publishing the parts), and a steady rate:
    rows done between the moment every worker had finished its first task (so start-up,
    model build, parameter load and tracing are out) and the last task result, over that time
    (a task's rows prorated by the share of its hand-out-to-result time inside the window).
    Task hand-outs and results are timestamped in the master as they arrive (a MasterServicer
    subclass), which also splits the job's time into phases.
  * **Keras**: a fresh subprocess (its TensorFlow thread settings its own: `--threads` intra and
    inter op) rebuilds the model from the TrainedModel as a worker does (`read_trained_model`,
    `load_model_spec` from the zoo the model names, `build_model` in Mode.PREDICTION,
    `load_parameters`) and runs `model.predict` on `from_tensor_slices(records)` -> the spec's
    `dataset_fn` in Mode.PREDICTION (shuffle neutralized as in the worker) ->
    `.batch(B).prefetch(1)`. Figures: (a) cold, end to end: reading every RecordIO file into
    memory + the first `predict` (tracing included); also as a whole fresh process (importing
    TensorFlow and rebuilding the model added, as the job's worker start-up is); (b) warm: a
    second `predict` over the same pipeline (parsing included; `.cache()` after it keeps the
    parsed features in memory), and its rate from the first batch's end; (c) model only: a third
    `predict` over the cached features. Its first output rows are compared with the 1-worker
    job's first part (max abs difference).
  * **worker profile**: in the same subprocess, the worker's own task function
    (`runtime/worker/main.py` `_predict_task`, with a `Predictor` from the job's job.json) on
    the first `--profile-tasks` tasks, its phases timed: reading the range, predicting,
    encoding the part (one tf.train.Example per row), writing it.

Ratios: job / Keras end to end (job wall vs cold Keras, and vs the fresh Keras process) and
steady (job steady vs warm Keras), for 1 and 2 workers; and 2 workers / 1 worker. Keras gets
`--threads` threads, each job worker too, so 2 workers have twice the threads of the Keras
process. The machine has 2 cores, shared: the master, the workers and other sessions' processes
compete for them. The load average before each run and the CPU other processes used during it
(whole machine busy time minus this benchmark's processes, from /proc/stat) are printed.

`--quick`: the dnn case only, 16,384 rows (2,048 rows/task), 3 profiled tasks (~45 s); with
`--cases dnn,mnist` both (4,096 mnist rows; ~95 s). The full run takes ~4-5 minutes.

Prints one `RESULT <name> <value> target=<target>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_train_overhead, loadavg  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    dataset: str
    model_def: str
    params: str
    batch: int
    rows: int
    records_per_file: int
    records_per_task: int
    quick_rows: int
    quick_records_per_file: int
    quick_records_per_task: int
    train_records: int
    train_batch: int


CASES = {
    "dnn": Case(
        name="dnn",
        dataset="regression",
        model_def="regressor.DNN",
        params="hidden_units=[64, 32], learning_rate=0.01",
        batch=256,
        rows=163_840,
        records_per_file=40_960,
        records_per_task=4_096,
        quick_rows=16_384,
        quick_records_per_file=8_192,
        quick_records_per_task=2_048,
        train_records=2_048,
        train_batch=256,
    ),
    "mnist": Case(
        name="mnist",
        dataset="digits",
        model_def="mnist.mnist_functional_api.custom_model",
        params="lr=0.1",
        batch=256,
        rows=32_768,
        records_per_file=8_192,
        records_per_task=2_048,
        quick_rows=4_096,
        quick_records_per_file=2_048,
        quick_records_per_task=1_024,
        train_records=1_024,
        train_batch=64,
    ),
}


class OtherLoad:
    """Cores that other processes kept busy between construction and `cores()`: the machine's
    busy CPU time (/proc/stat) minus this process's and its reaped children's."""

    def __init__(self, machine_busy_s: Callable[[], float]) -> None:
        self._busy = machine_busy_s
        self._t0 = time.perf_counter()
        self._machine0 = machine_busy_s()
        self._own0 = self._own()

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def cores(self) -> float:
        wall = time.perf_counter() - self._t0
        other = (self._busy() - self._machine0) - (self._own() - self._own0)
        return max(0.0, other) / max(wall, 1e-9)


# --------------------------------------------------------------------------- Keras side


class Phases:
    """Wall-time accumulators around functions, first call of each kept apart."""

    def __init__(self) -> None:
        self.first: dict[str, float] = {}
        self.rest: dict[str, list[float]] = defaultdict(list)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - t0
                if name in self.first:
                    self.rest[name].append(seconds)
                else:
                    self.first[name] = seconds

        return timed


def profile_worker_tasks(spec: dict[str, Any], root: Path) -> dict[str, Any]:
    """The worker's `_predict_task` on the first tasks of the job, its phases timed."""
    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.runtime import prediction_output as out
    from elasticdl.runtime.data.planner import count_files
    from elasticdl.runtime.data.shards import plan_shards
    from elasticdl.runtime.job_config import JobConfig
    from elasticdl.runtime.worker import main as worker_main
    from elasticdl.runtime.worker.predictor import Predictor

    parts_dir = root / "profile-parts"
    config = dataclasses.replace(JobConfig.read(spec["job_json"]), prediction_dir=str(parts_dir))
    counted = count_files(spec["data"])
    file_index = {url: i for i, (url, _) in enumerate(counted)}
    shards = plan_shards(counted, spec["records_per_task"])[: spec["profile_tasks"]]
    phases = Phases()
    t0 = time.perf_counter()
    predictor = Predictor(config, 0)
    init_s = time.perf_counter() - t0
    predictor.ensure_built = phases.wrap("build + load parameters", predictor.ensure_built)
    predictor.predict = phases.wrap("predict (tf.data + model)", predictor.predict)
    saved = {n: getattr(out, n) for n in ("prediction_columns", "encode_part", "write_part")}
    out.prediction_columns = phases.wrap("prediction_columns", out.prediction_columns)
    out.encode_part = phases.wrap("encode part (Examples)", out.encode_part)
    out.write_part = phases.wrap("write part", out.write_part)

    readers = worker_main._Readers()
    get = readers.get

    class TimedReader:
        def __init__(self, reader: Any) -> None:
            self._reader = reader

        def read(self, start: int, end: int) -> list[bytes]:
            return phases.wrap("read records", lambda: list(self._reader.read(start, end)))()

    readers.get = lambda url: TimedReader(get(url))  # type: ignore[method-assign]
    task_s: list[float] = []
    rows = 0
    try:
        for i, shard in enumerate(shards):
            task = pb.Task(
                task_id=i + 1,
                shard_name=shard.file,
                start=shard.start,
                end=shard.end,
                type=pb.PREDICTION,
                extended_config={
                    "part": out.part_name(
                        file_index[shard.file], shard.start, shard.end, config.output_format
                    )
                },
            )
            t0 = time.perf_counter()
            rows += worker_main._predict_task(task, predictor, readers)
            task_s.append(time.perf_counter() - t0)
    finally:
        for name, fn in saved.items():
            setattr(out, name, fn)
    rest_rows = rows - shards[0].num_records
    per_task = {
        name: {
            "first_task_ms": round(phases.first.get(name, 0.0) * 1e3, 1),
            "later_tasks_us_per_row": round(sum(v) / max(rest_rows, 1) * 1e6, 2) if v else 0.0,
        }
        for name, v in [(n, phases.rest.get(n, [])) for n in phases.first]
    }
    later_s = sum(task_s[1:])
    return {
        "tasks": len(task_s),
        "rows_per_task": shards[0].num_records,
        "predictor_init_s": round(init_s, 3),
        "first_task_s": round(task_s[0], 3),
        "later_task_median_s": round(statistics.median(task_s[1:]), 4) if task_s[1:] else 0.0,
        "later_rows_per_s": rest_rows / later_s if later_s else 0.0,
        "later_us_per_row": later_s / max(rest_rows, 1) * 1e6,
        "phases": per_task,
    }


def keras_predict(spec: dict[str, Any]) -> dict[str, Any]:
    """Predict with Keras in this (fresh) process; returns the figures as a dict."""
    t_start = time.perf_counter()
    import numpy as np
    import tensorflow as tf

    threads = spec["threads"]
    if threads > 0:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    from elasticdl.mode import Mode
    from elasticdl.runtime.data.files import expand_data_urls
    from elasticdl.runtime.data.metadata import DatasetMetadata
    from elasticdl.runtime.data.recordio import RecordIOReader
    from elasticdl.runtime.model_build import build_model
    from elasticdl.runtime.model_spec import load_model_spec
    from elasticdl.runtime.trained_model import load_parameters, read_trained_model
    from elasticdl.runtime.worker.pipeline import in_task_order
    from elasticdl.runtime.zoo_source import resolve_zoo

    import_s = time.perf_counter() - t_start
    batch = spec["batch"]
    urls = expand_data_urls(spec["data"])

    t0 = time.perf_counter()
    files = read_trained_model(spec["trained_model"])
    trained = files.trained
    zoo = resolve_zoo(trained.model_zoo or None)
    instance = load_model_spec(
        trained.model_def, params=trained.model_def_params, zoo=zoo
    ).instantiate()
    with RecordIOReader(urls[0]) as reader:
        sample = list(reader.read(0, 4))
    metadata = files.input_metadata or DatasetMetadata.from_example(sample[0])
    build_model(instance, sample, Mode.PREDICTION, metadata)
    load_parameters(instance.model, files.params, spec["trained_model"])
    model = instance.model
    build_s = time.perf_counter() - t0

    class Clock(tf.keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.batches = 0
            self.begin = 0.0
            self.first_batch_end = 0.0
            self.end = 0.0

        def on_predict_begin(self, logs: Any = None) -> None:
            self.begin = time.perf_counter()

        def on_predict_batch_end(self, batch: int, logs: Any = None) -> None:
            self.batches += 1
            if self.batches == 1:
                self.first_batch_end = time.perf_counter()

        def on_predict_end(self, logs: Any = None) -> None:
            self.end = time.perf_counter()

    def pipeline(records: list[bytes]) -> tf.data.Dataset:
        dataset = tf.data.Dataset.from_tensor_slices(tf.constant(records, dtype=tf.string))
        with in_task_order():
            dataset = instance.dataset_fn(dataset, Mode.PREDICTION, metadata)
        return dataset.batch(batch).prefetch(1)

    # (a) cold, end to end: read the files, build the pipeline, first predict (traced).
    t0 = time.perf_counter()
    records: list[bytes] = []
    for url in urls:
        with RecordIOReader(url) as reader:
            records.extend(reader)
    read_s = time.perf_counter() - t0
    dataset = pipeline(records)
    cold_clock = Clock()
    outputs = model.predict(dataset, verbose=0, callbacks=[cold_clock])
    cold_s = time.perf_counter() - t0
    rows = len(records)
    # (b) warm: the same pipeline again (parsing included, tracing not); its parsed features
    # are cached in memory on the way, for (c) model only: predict over the cached features.
    cached = dataset.cache()
    warm_clock = Clock()
    t0 = time.perf_counter()
    model.predict(cached, verbose=0, callbacks=[warm_clock])
    warm_s = time.perf_counter() - t0
    warm_steady_s = warm_clock.end - warm_clock.first_batch_end
    t0 = time.perf_counter()
    model.predict(cached, verbose=0)
    model_only_s = time.perf_counter() - t0

    first_part_diff = None
    if spec.get("job_output"):
        from elasticdl.runtime.prediction_output import read_rows

        parts = sorted(Path(spec["job_output"]).glob("part-*"))
        if parts:
            found = read_rows(str(parts[0]), "recordio")
            key = "prediction" if "prediction" in found[0] else sorted(found[0])[-1]
            job_values = np.array([row[key] for row in found], dtype=np.float64)
            mine = np.asarray(outputs, dtype=np.float64)[: len(found)].reshape(len(found), -1)
            first_part_diff = float(np.max(np.abs(job_values.reshape(mine.shape) - mine)))

    figures = {
        "rows": rows,
        "threads_intra": tf.config.threading.get_intra_op_parallelism_threads(),
        "threads_inter": tf.config.threading.get_inter_op_parallelism_threads(),
        "import_s": import_s,
        "build_s": build_s,
        "read_s": read_s,
        "cold_s": cold_s,
        "cold_rows_per_s": rows / cold_s,
        "process_rows_per_s": rows / (import_s + build_s + cold_s),
        "warm_s": warm_s,
        "warm_rows_per_s": rows / warm_s,
        "warm_steady_rows_per_s": (rows - batch) / warm_steady_s if warm_steady_s > 0 else 0.0,
        "warm_batches": warm_clock.batches,
        "warm_first_batch_s": warm_clock.first_batch_end - warm_clock.begin,
        "warm_after_last_batch_s": warm_s - (warm_clock.end - warm_clock.begin),
        "model_only_s": model_only_s,
        "model_only_rows_per_s": rows / model_only_s,
        "first_part_max_abs_diff": first_part_diff,
    }
    if spec.get("job_json") and spec.get("profile_tasks", 0) > 1:
        figures["worker_profile"] = profile_worker_tasks(spec, Path(spec["scratch"]))
    return figures


def keras_in_subprocess(spec: dict[str, Any]) -> dict[str, Any]:
    argv = [sys.executable, "-P", str(Path(__file__).resolve()), "--keras-child", json.dumps(spec)]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"Keras subprocess failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("KERAS ")][-1]
    figures = json.loads(line[len("KERAS ") :])
    figures["process_s"] = time.perf_counter() - t0
    return figures


# --------------------------------------------------------------------------- elasticdl side


def timed_servicer_class(marks: list[tuple[str, float, int, int, int]]) -> type:
    """MasterServicer that timestamps each task handed out and each task result."""
    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.runtime.master.servicer import MasterServicer

    class TimedServicer(MasterServicer):  # type: ignore[misc, valid-type]
        def get_task(self, request: Any, context: Any) -> Any:
            task = super().get_task(request, context)
            if task.type == pb.PREDICTION:
                rows = task.end - task.start
                marks.append(("get", time.monotonic(), request.worker_id, task.task_id, rows))
            return task

        def report_task_result(self, request: Any, context: Any) -> Any:
            reply = super().report_task_result(request, context)
            rows = int(request.exec_counters.get("records_done", 0))
            marks.append(("done", time.monotonic(), request.worker_id, request.task_id, rows))
            return reply

        def finish_task(self, request: Any, context: Any) -> Any:
            task = super().finish_task(request, context)
            now = time.monotonic()
            rows = int(request.exec_counters.get("records_done", 0))
            marks.append(("done", now, request.worker_id, request.task_id, rows))
            if task.type == pb.PREDICTION:
                marks.append(("get", now, request.worker_id, task.task_id, task.end - task.start))
            return task

    return TimedServicer


def elastic_predict(
    case: Case, data: Path, model: Path, root: Path, threads: int, workers: int, per_task: int
) -> dict[str, Any]:
    """Run one prediction job on the local engine; returns its figures."""
    from elasticdl.predict_command import options_from_kwargs
    from elasticdl.runtime.master import inference_job

    name = f"{case.name}-{workers}w"
    options = options_from_kwargs(
        "predict",
        data=str(data),
        trained_model=str(model),
        output=str(root / f"pred-{name}"),
        num_workers=workers,
        minibatch_size=case.batch,
        records_per_task=per_task,
        intra_op_threads=threads,
        log_dir=str(root / f"log-{name}"),
    )
    marks: list[tuple[str, float, int, int, int]] = []
    original = inference_job.MasterServicer
    inference_job.MasterServicer = timed_servicer_class(marks)
    ends: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                ends[name] = time.monotonic() - t0

        return call

    try:
        job = inference_job.InferenceJob(options)
        job._check_parts = timed("check_parts", job._check_parts)  # type: ignore[method-assign]
        job._publish = timed("publish", job._publish)  # type: ignore[method-assign]
        t_call = time.monotonic()
        result = job.run()
        t_end = time.monotonic()
    finally:
        inference_job.MasterServicer = original
    if not result.succeeded:
        raise RuntimeError(f"prediction job failed: {result.error}")
    report = result.report
    rows = report["records"]["written"]
    # The workers' launch: the job's preparation (model file, data counted) is in the report.
    t0 = t_call + report["throughput"]["preparing_seconds"]
    gets = [m for m in marks if m[0] == "get"]
    dones = [m for m in marks if m[0] == "done"]
    first_get: dict[int, float] = {}
    first_done: dict[int, float] = {}
    for _, at, worker, _, _ in gets:
        first_get.setdefault(worker, at)
    for _, at, worker, _, _ in dones:
        first_done.setdefault(worker, at)
    start = max(first_done.values())
    last = dones[-1][1]
    got_at = {(w, t): at for _, at, w, t, _ in gets}
    # Rows done in [start, last]: each task's rows prorated by the share of its time (hand-out
    # to result) inside the window, as a task finished early in the window began before it.
    steady_rows = sum(
        r * max(0.0, at - max(got_at[(w, t)], start)) / max(at - got_at[(w, t)], 1e-9)
        for _, at, w, t, r in dones
    )
    later = [at - got_at[(w, t)] for _, at, w, t, _ in dones if at > first_done[w]]
    return {
        "rows": rows,
        "tasks": len(dones),
        "tasks_by_worker": report["tasks"]["by_worker"],
        "call_s": t_end - t_call,
        "rows_per_s": rows / (t_end - t_call),
        "report_seconds": report["seconds"],
        "report_rows_per_s": report["rows_per_second"],
        "prepare_s": t0 - t_call,
        "worker_ready_s": [round(first_get[w] - t0, 2) for w in sorted(first_get)],
        "first_task_s": [round(first_done[w] - first_get[w], 2) for w in sorted(first_get)],
        "steady_window_s": last - start,
        "steady_rows": steady_rows,
        "steady_rows_per_s": steady_rows / (last - start) if last > start else 0.0,
        "later_task_median_s": statistics.median(later) if later else 0.0,
        "tail_s": t_end - last,
        "check_parts_s": ends.get("check_parts", 0.0),
        "publish_s": ends.get("publish", 0.0),
        "job_json": str(root / f"log-{name}" / "job.json"),
        "output": str(root / f"pred-{name}"),
    }


def train_model(case: Case, root: Path, threads: int) -> Path:
    import elasticdl
    from elasticdl.runtime.data.generate import generate

    data = root / f"train-{case.name}"
    generate(case.dataset, data, case.train_records)
    output = root / f"model-{case.name}"
    result = elasticdl.train(
        model_def=case.model_def,
        params=case.params,
        data=str(data),
        output=str(output),
        num_workers=1,
        num_ps=1,
        minibatch_size=case.train_batch,
        records_per_task=case.train_records,
        num_epochs=1,
        intra_op_threads=threads,
        log_dir=str(root / f"log-train-{case.name}"),
    )
    if not result.succeeded:
        raise RuntimeError(f"training {case.name} failed: {result.error}")
    return output


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the dnn case on few rows (~45 s)")
    ap.add_argument("--dir", help="where to write data and outputs (default: a temp dir)")
    ap.add_argument("--cases", help="comma-separated: dnn, mnist (default: both; quick: dnn)")
    ap.add_argument("--threads", type=int, default=1, help="TF intra/inter-op threads, all sides")
    ap.add_argument(
        "--profile-tasks", type=int, help="tasks of the worker profile (6; quick 3; 0: none)"
    )
    ap.add_argument(
        "--quiet-wait",
        type=float,
        default=0.0,
        help="seconds to wait for other processes to go quiet before each run (default 0)",
    )
    ap.add_argument("--keras-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    if args.keras_child:
        figures = keras_predict(json.loads(args.keras_child))
        print("KERAS " + json.dumps(figures), flush=True)
        return 0

    t_main = time.perf_counter()
    bench = load_train_overhead()
    cases = (args.cases or ("dnn" if args.quick else "dnn,mnist")).split(",")
    profile_tasks = (
        args.profile_tasks if args.profile_tasks is not None else (3 if args.quick else 6)
    )
    tmp = tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-predict-")
    root = Path(tmp.name)
    results: list[tuple[str, float, str]] = []

    def result(name: str, value: float, target: str = "none") -> None:
        results.append((name, value, target))
        print(f"  {name} = {value:.4g}", flush=True)

    print(f"runtime: {bench.runtime_revision()}")
    print(
        f"threads: {args.threads} intra + {args.threads} inter op per TF process (job workers "
        f"and the Keras process); nproc {os.cpu_count()}; load average {loadavg()}; in {root}",
        flush=True,
    )
    for name in cases:
        case = CASES[name]
        rows = case.quick_rows if args.quick else case.rows
        per_file = case.quick_records_per_file if args.quick else case.records_per_file
        per_task = case.quick_records_per_task if args.quick else case.records_per_task
        t0 = time.perf_counter()
        from elasticdl.runtime.data.generate import generate

        data = root / f"data-{name}"
        generate(case.dataset, data, rows, records_per_file=per_file)
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        model = train_model(case, root, args.threads)
        print(
            f"[{name}] {rows} {case.dataset} rows ({rows // per_file} files, {per_task} "
            f"rows/task), batch {case.batch}; data written in {gen_s:.1f} s, model trained in "
            f"{time.perf_counter() - t0:.1f} s (not measured)",
            flush=True,
        )
        jobs: dict[int, dict[str, Any]] = {}
        for workers in (1, 2):
            if args.quiet_wait > 0:
                bench.wait_quiet(args.quiet_wait)
            print(f"  {workers} worker(s): load average before {loadavg()}", flush=True)
            other = OtherLoad(bench.machine_busy_s)
            run = elastic_predict(case, data, model, root, args.threads, workers, per_task)
            run["other_cores"] = other.cores()
            jobs[workers] = run
            print(
                f"  {workers} worker(s): {run['rows_per_s']:.0f} rows/s end to end "
                f"({run['call_s']:.2f} s call, report {run['report_seconds']:.2f} s), steady "
                f"{run['steady_rows_per_s']:.0f} rows/s ({run['steady_rows']:.0f} rows over "
                f"{run['steady_window_s']:.2f} s); phases: prepare {run['prepare_s']:.2f} s, "
                f"workers ready at {run['worker_ready_s']} s, first task {run['first_task_s']} "
                f"s, later tasks median {run['later_task_median_s']:.3f} s, after last task "
                f"{run['tail_s']:.2f} s (checking parts {run['check_parts_s']:.2f} s, publishing "
                f"{run['publish_s']:.2f} s, the rest mostly stopping workers); tasks by worker "
                f"{run['tasks_by_worker']}; other processes {run['other_cores']:.2f} cores",
                flush=True,
            )
        if args.quiet_wait > 0:
            bench.wait_quiet(args.quiet_wait)
        print(f"  keras: load average before {loadavg()}", flush=True)
        other = OtherLoad(bench.machine_busy_s)
        keras = keras_in_subprocess(
            {
                "data": str(data),
                "trained_model": str(model),
                "threads": args.threads,
                "batch": case.batch,
                "job_output": jobs[1]["output"],
                "job_json": jobs[1]["job_json"],
                "records_per_task": per_task,
                "profile_tasks": profile_tasks,
                "scratch": str(root / f"scratch-{name}"),
            }
        )
        keras["other_cores"] = other.cores()
        profile = keras.pop("worker_profile", None)
        print(
            "  keras: "
            + json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in keras.items()}),
            flush=True,
        )
        if profile:
            phases = profile.pop("phases")
            print(f"  worker profile (in the Keras process): {json.dumps(profile)}", flush=True)
            for phase, figures in phases.items():
                print(f"    {phase:28s} {figures}", flush=True)

        result(f"{name}_keras_cold_rows_per_s", keras["cold_rows_per_s"])
        result(f"{name}_keras_process_rows_per_s", keras["process_rows_per_s"])
        result(f"{name}_keras_warm_rows_per_s", keras["warm_rows_per_s"])
        result(f"{name}_keras_warm_steady_rows_per_s", keras["warm_steady_rows_per_s"])
        result(f"{name}_keras_model_only_rows_per_s", keras["model_only_rows_per_s"])
        for workers, run in jobs.items():
            result(f"{name}_job_{workers}w_rows_per_s", run["rows_per_s"])
            result(f"{name}_job_{workers}w_steady_rows_per_s", run["steady_rows_per_s"])
            result(f"{name}_job_{workers}w_call_s", run["call_s"])
        if profile:
            result(f"{name}_worker_task_loop_rows_per_s", profile["later_rows_per_s"])
        for workers, run in jobs.items():
            result(
                f"{name}_ratio_{workers}w_over_keras_end_to_end",
                run["rows_per_s"] / keras["cold_rows_per_s"],
            )
            result(
                f"{name}_ratio_{workers}w_over_keras_process",
                run["rows_per_s"] / keras["process_rows_per_s"],
            )
            result(
                f"{name}_ratio_{workers}w_over_keras_steady",
                run["steady_rows_per_s"] / keras["warm_rows_per_s"],
            )
        result(
            f"{name}_speedup_2w_over_1w_end_to_end", jobs[2]["rows_per_s"] / jobs[1]["rows_per_s"]
        )
        result(
            f"{name}_speedup_2w_over_1w_steady",
            jobs[2]["steady_rows_per_s"] / jobs[1]["steady_rows_per_s"],
        )
        result(
            f"{name}_other_processes_cores_busy",
            statistics.mean([jobs[1]["other_cores"], jobs[2]["other_cores"], keras["other_cores"]]),
        )

    tmp.cleanup()
    print(f"\nwall {time.perf_counter() - t_main:.0f} s; load average at the end {loadavg()}")
    for name, value, target in results:
        print(f"RESULT {name} {value:.4g} target={target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
