"""A worker process: asks the master for tasks and runs them until told to stop.

argv: --config JOB_JSON --worker_id N --master_addr HOST:PORT [--ps_addrs A,B,...]

Training jobs train against the parameter servers (`trainer.py`); prediction and evaluation
jobs load the trained model instead (`predictor.py`) and have no parameter servers.

Exit status: 0 when the master has no more work, or after SIGTERM (preemption notice: a
training task stops after the current minibatch, a prediction or evaluation task, which is
redone whole if lost, is finished first); 1 with a one-line reason on a fatal error.
An error in user code while processing a task is reported to the master as that task's
failure (the master retries it elsewhere up to its cap) and the worker goes on.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import time
import traceback
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from elasticdl.runtime.devices import LOCAL_JOB_FLAG, LOCAL_JOB_HELP
from elasticdl.runtime.worker.progress import ProgressReports

if TYPE_CHECKING:
    from elasticdl.runtime.worker.task_ahead import TaskAhead

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

log = logging.getLogger("elasticdl.worker")


class _Stop:
    requested = False


def _on_sigterm(signum: int, frame: object) -> None:
    _Stop.requested = True


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="elasticdl-worker")
    parser.add_argument("--config", required=True)
    parser.add_argument("--worker_id", type=int, required=True)
    parser.add_argument("--master_addr", required=True)
    parser.add_argument("--ps_addrs", default="", help="empty for predict/evaluate jobs")
    parser.add_argument("--log_level", default="info")
    parser.add_argument(LOCAL_JOB_FLAG, action="store_true", help=LOCAL_JOB_HELP)
    return parser.parse_args(argv)


class _Readers:
    """A few open RecordIO readers (their indexes are worth keeping), least recent dropped."""

    def __init__(self, capacity: int = 16) -> None:
        self._open: OrderedDict[str, Any] = OrderedDict()
        self._capacity = capacity

    def get(self, url: str) -> Any:
        from elasticdl.runtime.data.recordio import RecordIOReader

        reader = self._open.pop(url, None) or RecordIOReader(url)
        self._open[url] = reader
        while len(self._open) > self._capacity:
            self._open.popitem(last=False)[1].close()
        return reader


def _task_records(task: Any, readers: Any) -> list[bytes]:
    """A training task's records in its visiting order, those an earlier attempt did skipped."""
    from elasticdl.runtime.worker.order import visiting_order

    shard = list(readers.get(task.shard_name).read(task.start, task.end))
    return [shard[i] for i in visiting_order(len(shard), task.shuffle_seed)][task.skip :]


def _train_task(
    task: Any,
    trainer: Any,
    readers: Any,
    progress: ProgressReports,
    ahead: TaskAhead,
    records: list[bytes] | None = None,
) -> tuple[int, int, bool]:
    """Train on one task (`records`: its records, prepared while the task was held ahead);
    return (records done, records skipped for a non-finite loss, whether SIGTERM cut it short).

    Returns early, with the progress made reported, when SIGTERM arrived (checked per
    minibatch); a task that ran to its end is the caller's to report, SIGTERM or not. After
    its first minibatch the next task is asked for ahead (task_ahead.py).
    """
    records = records if records is not None else _task_records(task, readers)
    metadata = trainer.metadata_for(task.shard_name, records[0])
    trainer.ensure_built(records, metadata)
    done = seen = nonfinite = 0
    for features, labels in trainer.batches(records, metadata):
        size = trainer.batch_size(labels)
        end = min(seen + size, len(records))
        result = trainer.train_batch(features, labels, size, task.task_id, end)
        first, seen = seen == 0, end
        if result.finite:
            # Records whose gradients were applied (with a push in flight, up to the previous
            # minibatch); non-finite minibatches before them are covered by this report.
            done = result.applied_end
        else:
            # Nothing done, but it counts as progress: the no-progress clock restarts.
            nonfinite += result.records
        loss = result.loss if result.finite else math.nan
        progress.minibatch(task.task_id, done, loss, trainer.model_version, first)
        ahead.ask(task.task_id)
        ahead.poll()
        if _Stop.requested:
            # The push in flight lands first and the worker reports it before it leaves: a
            # preempted worker's remainder is known without asking the parameter servers.
            done = trainer.finish_task()
            progress.task_end(task.task_id, done, trainer.model_version)
            return done, nonfinite, True
    done = trainer.finish_task()
    if done == 0 and nonfinite:
        raise FloatingPointError(
            f"the loss was NaN or infinite for every minibatch of records [{task.start}, "
            f"{task.end}) of {task.shard_name}; check the data and the loss function"
        )
    return len(records), nonfinite, False


def _evaluate_task(task: Any, trainer: Any, readers: _Readers, master: Any) -> int:
    """Evaluate the current model on one task's records and send the metric state.

    No progress is reported: if this worker dies, the whole task is evaluated again, and the
    master keeps one state per task, so no record is counted twice.
    """
    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.runtime.tensor_codec import encode

    records = list(readers.get(task.shard_name).read(task.start, task.end))[task.skip :]
    metadata = trainer.metadata_for(task.shard_name, records[0])
    trainer.ensure_built(records, metadata)
    states = trainer.evaluate(records, metadata)
    master.report_evaluation_metrics(
        pb.ReportEvaluationMetricsRequest(
            worker_id=trainer.worker_id,
            task_id=task.task_id,
            model_version=trainer.model_version,
            metric_states=[encode(name, value) for name, value in states.items()],
        ),
        timeout=60,
    )
    return len(records)


def _predict_task(task: Any, predictor: Any, readers: _Readers) -> int:
    """Predict one task's records and write its part (replacing an earlier attempt's)."""
    from elasticdl.runtime import prediction_output as out

    config = predictor.config
    records = list(readers.get(task.shard_name).read(task.start, task.end))
    metadata = predictor.metadata_for(task.shard_name, records[0])
    predictor.ensure_built(records, metadata)
    outputs = predictor.predict(records, metadata)
    columns = out.prediction_columns(outputs, len(records))
    part = task.extended_config["part"]
    data = out.encode_part(config.output_format, records, config.keep_columns, columns)
    out.write_part(config.prediction_dir, part, data)
    predictor.process_outputs(
        outputs, {"part": part, "file": task.shard_name, "start": task.start, "end": task.end}
    )
    return len(records)


def run(args: argparse.Namespace) -> int:
    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.proto import elasticdl_pb2_grpc
    from elasticdl.runtime import auth
    from elasticdl.runtime.devices import ProcessRole, use_devices
    from elasticdl.runtime.job_config import GRPC_OPTIONS, JobConfig, configure_tensorflow
    from elasticdl.runtime.ps.client import PSNeverReadyError

    config = JobConfig.read(args.config)
    configure_tensorflow(config)
    use_devices(ProcessRole.WORKER, args.local_job, args.worker_id)
    credentials = auth.for_process(args.config, config.secret_file, config.tls_dir)
    channel = auth.channel(args.master_addr, credentials, GRPC_OPTIONS)
    master = elasticdl_pb2_grpc.MasterStub(channel)
    worker_id = args.worker_id
    ps = None
    if config.job_type == "train":
        from elasticdl.runtime.ps.client import PSClient
        from elasticdl.runtime.worker.trainer import Trainer

        def ps_addresses() -> list[str]:  # a relaunched PS may listen elsewhere
            request = pb.PSAddressesRequest(worker_id=worker_id)
            return list(master.get_ps_addresses(request, timeout=10).addresses)

        ps = PSClient(args.ps_addrs.split(","), credentials=credentials, resolve=ps_addresses)
        ps.wait_ready_behind(timeout_s=120)  # the first task's model is built meanwhile
        engine: Any = Trainer(config, ps, worker_id)
    else:
        from elasticdl.runtime.worker.predictor import Predictor

        engine = Predictor(config, worker_id)
    from elasticdl.runtime.worker.custom_reader import readers_for

    readers: Any = readers_for(config) or _Readers()
    progress = ProgressReports(master, worker_id)

    def prepare(task: Any) -> list[bytes]:
        records = _task_records(task, readers)
        if records:
            engine.prepare(records, engine.metadata_for(task.shard_name, records[0]))
        return records

    from elasticdl.runtime.worker.task_ahead import TaskAhead

    ahead = TaskAhead(master, worker_id, prepare)
    log.info("worker %d ready for %s (master %s)", worker_id, config.job_type, args.master_addr)

    task = None if _Stop.requested else _get_task(master, worker_id)
    warmed = False
    while task is not None and not _Stop.requested:
        if task.type == pb.WAIT:
            if task.shard_name:  # a spare: get ready to train, then ask again soon
                warmed = warmed or _warm_up(task, engine, readers)
            time.sleep(task.wait_s or (0.1 if task.shard_name else 0.2))  # the master's pace
            task = _get_task(master, worker_id)
            continue
        if task.task_id == 0:
            log.info("worker %d: no more tasks", worker_id)
            break
        progress.pace(task.progress_every_s)
        error = ""
        done = nonfinite = 0
        cut_short = False
        prepared = ahead.take(task)
        try:
            if task.type == pb.EVALUATION:
                done = _evaluate_task(task, engine, readers, master)
            elif task.type == pb.PREDICTION:
                done = _predict_task(task, engine, readers)
            else:
                done, nonfinite, cut_short = _train_task(
                    task, engine, readers, progress, ahead, prepared
                )
        except PSNeverReadyError:
            raise  # no task's failure: this worker ends, as when it could not start
        except Exception as err:  # noqa: BLE001 - user code: report it as the task's failure
            error = f"{type(err).__name__}: {err}"
            log.error("worker %d: task %d failed:\n%s", worker_id, task.task_id, _short_tb())
        progress.flush()
        if cut_short:
            log.info("worker %d: SIGTERM, stopped after the current minibatch", worker_id)
            break
        result = pb.ReportTaskResultRequest(
            worker_id=worker_id,
            task_id=task.task_id,
            err_message=error,
            exec_counters={"records_done": done, "nonfinite_records": nonfinite},
            ahead_task_id=ahead.held_id(),
            **progress.tail(engine.model_version),
        )
        if _Stop.requested:
            master.report_task_result(result, timeout=60)
            break
        # The result and the next task in one call; a task taken just before a SIGTERM (or
        # held ahead) is left unstarted, and the master requeues it when this worker exits.
        task = master.finish_task(result, timeout=60)
    if ps is not None:
        ps.close()
    channel.close()
    return 0


def _warm_up(task: Any, engine: Any, readers: Any) -> bool:
    """A spare worker builds and traces its model on the records the WAIT names, so that
    once promoted it trains at once. A failure here is logged, not fatal: the first task
    runs into it again and reports it as that task's failure."""
    try:
        records = list(readers.get(task.shard_name).read(task.start, task.end))
        if records:
            engine.warm_up(records, engine.metadata_for(task.shard_name, records[0]))
            log.info("worker %d: spare, ready to train", engine.worker_id)
    except Exception:  # noqa: BLE001 - user code; see the docstring
        log.warning("worker %d: warming up failed:\n%s", engine.worker_id, _short_tb())
    return True


def _get_task(master: Any, worker_id: int) -> Any:
    from elasticdl.proto import elasticdl_pb2 as pb

    return master.get_task(pb.GetTaskRequest(worker_id=worker_id), timeout=60)


def _short_tb() -> str:
    return "".join(traceback.format_exc().splitlines(keepends=True)[-12:])


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format=f"%(asctime)s worker{args.worker_id} %(levelname)s: %(message)s",
    )
    signal.signal(signal.SIGTERM, _on_sigterm)
    from elasticdl.runtime.process_guard import exit_when_orphaned

    exit_when_orphaned()
    try:
        return run(args)
    except Exception as err:  # noqa: BLE001 - one line for the master's log tail
        log.error("worker %d fatal: %s", args.worker_id, _short_tb())
        print(f"worker {args.worker_id} failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    from elasticdl.runtime.process_guard import exit_process

    exit_process(main())
