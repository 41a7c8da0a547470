"""Views of the job's event log: `job_report.json`, the summary line, progress, TensorBoard.

Every number about instances, failures, recoveries, evaluation and checkpoints in a report is
derived here from the one event log (events.py); task and record counts come from the task
state at the end. Training and inference reports share the shape of `workers`, `failures`,
`recoveries`, `events`, `chaos` and `throughput`; job_report.schema.json is the contract.

Documented keys tools rely on: `status` ("succeeded" | "failed" | "stopped"),
`records.planned/trained/redone`, `workers.launched/failed/relaunched/preempted`,
`failures`, `recoveries` (`{cause, seconds}`), `metrics`, `throughput.records_per_second`,
`tasks.by_worker`.

A report stays small at any size: the counts are exact, and each list of details (events,
task events, exits, failures, recoveries, scaling: `DETAIL_CAP` entries; worker instances:
`INSTANCES_CAP`) keeps its first and last entries, `left_out` saying how many were left out
of which list (a job of 1,000 workers that lost 100 of them reports every one; 5,000 do not).
"""

from __future__ import annotations

import json
import logging
import math
import time
from importlib import resources
from pathlib import Path
from typing import Any

from elasticdl.runtime.master.events import (
    ChaosFired,
    ChaosSkipped,
    CheckpointFailed,
    CheckpointFound,
    EvaluationDone,
    EventLog,
    InstanceLost,
    LossDiverged,
    LossReported,
    PSRecovered,
    Scaled,
    SpareLaunched,
    SparePromoted,
    TaskEvent,
    WorkerAdded,
    WorkerLaunched,
    WorkerRelaunched,
    WorkerRemoved,
    WorkerTraining,
)
from elasticdl.runtime.master.progress import ProgressDisplay
from elasticdl.runtime.master.task_state import Snapshot

SCHEMA_NAME = "job_report.schema.json"
DETAIL_CAP = 200
"""Entries kept of each list of details in a report (the first and the last halves)."""
INSTANCES_CAP = 2000
"""Worker instances kept in a report's `workers.instances` (the first and the last halves)."""


def schema() -> dict[str, Any]:
    """The JSON Schema every job report follows (shipped with the package)."""
    text = resources.files("elasticdl.runtime.master").joinpath(SCHEMA_NAME).read_text()
    return dict(json.loads(text))


def _s(at: float, t0: float) -> float:
    return round(at - t0, 3)


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def workers_section(log: EventLog, t0: float, initial: int, min_workers: int, target: int):
    lost = {e.id: e for e in log.of(InstanceLost) if e.role == "worker"}
    promoted = {e.worker_id: e for e in log.of(SparePromoted)}
    instances = []
    for launch in log.of(WorkerLaunched):
        end = lost.get(launch.worker_id)
        promotion = promoted.get(launch.worker_id)
        replaces = launch.replaces if isinstance(launch, WorkerRelaunched) else None
        spare = {}
        if isinstance(launch, SpareLaunched):
            replaces = promotion.replaces if promotion else None
            spare = {"spare": {"promoted_at": _s(promotion.at, t0) if promotion else None}}
        instances.append(
            {
                "worker_id": launch.worker_id,
                "launched_at": _s(launch.at, t0),
                "replaces": replaces,
                **spare,
                "exit": None
                if end is None
                else {
                    "reason": end.exit_kind,
                    "exit_code": end.exit_code,
                    "signal": end.signal,
                    "at_s": _s(end.at, t0),
                    "detail": end.detail,
                },
            }
        )
    return {
        "initial": initial,
        "min_workers": min_workers,
        "target": target,
        "scaling": [
            {k: v for k, v in e.as_dict(t0).items() if k != "kind"} for e in log.of(Scaled)
        ],
        "launched": len(instances),
        "failed": sum(1 for e in lost.values() if e.failure),
        "relaunched": sum(1 for e in log.of(WorkerRelaunched) if e.from_budget)
        + sum(1 for e in promoted.values() if e.from_budget),
        "preempted": sum(1 for e in lost.values() if e.exit_kind == "preempted"),
        "instances": instances,
        "exits": [
            {"worker_id": e.id, "reason": e.exit_kind, "at_s": _s(e.at, t0), "detail": e.detail}
            for e in log.of(InstanceLost)
            if e.role == "worker"
        ],
    }


def _ps_recovery(log: EventLog, lost: InstanceLost) -> PSRecovered | None:
    for e in log.of(PSRecovered):
        if e.ps_id == lost.id and e.at >= lost.at:
            return e
    return None


def _rolled_back(recovered: PSRecovered) -> list[int]:
    """[first, last] model version whose updates the relaunched shard lost; [] for none."""
    first, last = recovered.restored_version + 1, recovered.model_version_before
    return [first, last] if last >= first else []


def failures_section(log: EventLog, t0: float, last: int | None = None) -> list[dict[str, Any]]:
    """One entry per instance that failed: what, why, when, and how fast it was recovered
    (`last`: only the last so many)."""
    found = []
    training: dict[int, WorkerTraining] = {}
    for started in log.of(WorkerTraining):
        training.setdefault(started.worker_id, started)
    failed = [e for e in log.of(InstanceLost) if e.failure]
    for e in failed[-last:] if last else failed:
        entry: dict[str, Any] = {
            "role": e.role,
            "id": e.id,
            "kind": e.exit_kind,
            "cause": e.cause,
            "at_s": _s(e.detected_at, t0),
            "requeue_s": _r(e.requeue_s),
            "tasks_requeued": e.tasks_requeued,
            "records_requeued": e.records_requeued,
        }
        if e.role == "worker":
            entry["relaunched_as"] = e.relaunched_as
            again = training.get(e.relaunched_as) if e.relaunched_as is not None else None
            if again is not None and again.at >= e.at:
                entry["training_again_s"] = _r(again.at - e.at)
        recovered = _ps_recovery(log, e) if e.role == "ps" else None
        if recovered is not None:
            entry["relaunch_s"] = _r(recovered.seconds)
            entry["spawn_s"] = _r(recovered.spawn_s)
            if recovered.restored_version is not None:
                # The relaunched shard restores the newest valid checkpoint: every update after
                # it is gone. The version before is the newest the workers reported.
                entry["restored_version"] = recovered.restored_version
                entry["model_version_before"] = recovered.model_version_before
                entry["rolled_back_versions"] = max(
                    0, recovered.model_version_before - recovered.restored_version
                )
                entry["rolled_back"] = _rolled_back(recovered)
            if recovered.restored_rows is not None:
                entry["restored_rows"] = sum(recovered.restored_rows.values())
                entry["restored_table_rows"] = dict(sorted(recovered.restored_rows.items()))
        found.append(entry)
    return found


def recoveries_section(log: EventLog) -> list[dict[str, Any]]:
    """How long each loss took to recover from: a worker's tasks back in the queue, a PS
    serving again (its real downtime)."""
    found = []
    for e in log.of(InstanceLost):
        if e.role == "worker" and e.requeue_s is not None:
            found.append((e.at, f"worker {e.id} {e.exit_kind}", e.requeue_s, e.tasks_requeued))
        elif e.role == "ps":
            recovered = _ps_recovery(log, e)
            if recovered is not None:
                found.append((e.at, f"ps{e.id} {e.exit_kind}", recovered.seconds, 0))
    return [
        {"cause": cause, "seconds": round(seconds, 4), "tasks_requeued": n}
        for _, cause, seconds, n in sorted(found, key=lambda f: f[0])
    ]


def events_section(log: EventLog, t0: float) -> list[dict[str, Any]]:
    listed = sorted(log.listed(), key=lambda e: e.at)
    return [e.as_dict(t0) for e in listed]


def chaos_section(log: EventLog, t0: float) -> list[str]:
    found = []
    for e in log.of(ChaosFired, ChaosSkipped, WorkerAdded, WorkerRemoved):
        if isinstance(e, ChaosSkipped):
            found.append((e.at, f"{e.chaos} skipped at {_s(e.at, t0)}s: {e.reason}"))
            continue
        action = e.action if isinstance(e, ChaosFired) else e.chaos
        found.append((e.at, f"{action} at {_s(e.at, t0)}s"))
    return [text for _, text in sorted(found)]


def tasks_section(log: EventLog, t0: float, finished: int, by_worker: dict[str, int]):
    task_events = []
    for e in log.of(TaskEvent):
        entry: dict[str, Any] = {
            "kind": e.name,
            "at_s": _s(e.at, t0),
            "seconds": round(e.seconds, 4),
        }
        if e.worker_id is not None:
            entry["worker_id"] = e.worker_id
        if e.task_id is not None:
            entry["task_id"] = e.task_id
        if e.detail:
            entry["detail"] = e.detail
        task_events.append(entry)
    return {
        "finished": finished,
        "requeued": sum(1 for e in log.of(TaskEvent) if e.name == "task_requeued"),
        "by_worker": by_worker,
        "events": task_events,
    }


def shared_sections(
    log: EventLog,
    t0: float,
    counts: dict[str, Any],
    workers: tuple[int, int, int],
    records: int,
    seconds: float,
) -> dict[str, Any]:
    """The sections every job report has, in the same shape: `workers` is (initial,
    min_workers, target); `records` is what the job processed in `seconds`. Long lists of
    details are capped (`left_out`: see the module docstring)."""
    left_out: dict[str, int] = {}

    def cap(path: str, entries: list[Any], limit: int = DETAIL_CAP) -> list[Any]:
        kept, dropped = capped(entries, limit)
        if dropped:
            left_out[path] = dropped
        return kept

    tasks = tasks_section(log, t0, counts["tasks_finished"], counts["by_worker"])
    tasks["events"] = cap("tasks.events", tasks["events"])
    found = workers_section(log, t0, *workers)
    found["instances"] = cap("workers.instances", found["instances"], INSTANCES_CAP)
    found["exits"] = cap("workers.exits", found["exits"])
    found["scaling"] = cap("workers.scaling", found["scaling"])
    return {
        "tasks": tasks,
        "workers": found,
        "recoveries": cap("recoveries", recoveries_section(log)),
        "failures": cap("failures", failures_section(log, t0)),
        "events": cap("events", events_section(log, t0)),
        "chaos": cap("chaos", chaos_section(log, t0)),
        "throughput": {
            "records_per_second": round(records / max(seconds, 1e-9), 2),
            "seconds": round(seconds, 3),
        },
        "left_out": left_out,
    }


def capped(entries: list[Any], limit: int) -> tuple[list[Any], int]:
    """At most `limit` of `entries`: the first half and the last, and how many were left out."""
    if len(entries) <= limit:
        return entries, 0
    head = limit // 2
    return entries[:head] + entries[len(entries) - (limit - head) :], len(entries) - limit


def training_report(
    log: EventLog,
    counts: dict[str, Any],
    *,
    job_name: str,
    status: str,
    error: str,
    model_def: str,
    output: str,
    workers: tuple[int, int, int],
    num_ps: int,
    t0: float,
    seconds: float,
    preparing_s: float,
    resumed_from: dict[str, Any] | None = None,
    final_version: int = 0,
) -> dict[str, Any]:
    """A training job's report from its event log and its task counts (`TaskState.counts`):
    `workers` is (initial, min_workers, target); `seconds` the training time, `preparing_s`
    the time before it (checking inputs, building the model once)."""
    # First: it may add its event to the log, which the shared sections list.
    diverged = diverged_section(log, counts["records"]["skipped_nonfinite_loss"])
    shared = shared_sections(log, t0, counts, workers, counts["records"]["trained"], seconds)
    shared["throughput"]["training_seconds"] = shared["throughput"]["seconds"]
    shared["throughput"]["preparing_seconds"] = round(preparing_s, 3)
    evaluated = evaluation_section(log)
    return {
        "job_name": job_name,
        "kind": "train",
        "status": status,
        "error": error,
        "model_def": model_def,
        "output": output,
        "records": counts["records"],
        "epochs": counts["epochs"],
        **shared,
        "parameter_servers": parameter_servers_section(log, num_ps),
        "checkpoints": checkpoints_section(log),
        "checkpoint_failures": checkpoint_failures_section(log, t0),
        "resumed_from": resumed_from,
        "model_version": max(counts["model_version"], final_version),
        "metrics": dict(evaluated[-1]["metrics"]) if evaluated else {},
        "evaluation": evaluated,
        "history": history_section(log),
        "final_loss": final_loss(counts["last_loss"]),
        "diverged": diverged,
        "learning": learning_section(log, resumed_from is not None, diverged is not None),
    }


def parameter_servers_section(log: EventLog, num_ps: int) -> dict[str, Any]:
    lost = [e for e in log.of(InstanceLost) if e.role == "ps"]
    return {
        "num_ps": num_ps,
        "exits": [{"ps_id": e.id, "kind": e.exit_kind, "detail": e.detail} for e in lost],
        "relaunched": sum(1 for e in lost if e.action.startswith("relaunch")),
        "recovered": len(log.of(PSRecovered)),
    }


def evaluation_section(log: EventLog) -> list[dict[str, Any]]:
    return [
        {
            "model_version": e.model_version,
            "metrics": dict(e.metrics),
            "seconds": round(e.seconds, 3),
        }
        for e in log.of(EvaluationDone)
    ]


def history_section(log: EventLog) -> dict[str, Any]:
    """The training curves: per epoch, the mean of the minibatch losses the workers reported
    in it (and how many, and the model versions they span); per evaluation, its metrics.

    A loss whose epoch is not known (-1) counts in no epoch."""
    epochs = [
        {
            "epoch": epoch,
            "loss": round(found.mean, 6),
            "losses_reported": found.count,
            "model_versions": [found.first_version, found.last_version],
        }
        for epoch, found in sorted(log.epoch_losses().items())
    ]
    evaluations = [
        {"model_version": e.model_version, "metrics": dict(e.metrics)}
        for e in log.of(EvaluationDone)
    ]
    return {"epochs": epochs, "evaluation": evaluations}


def checkpoints_section(log: EventLog) -> list[dict[str, Any]]:
    return [{"version": e.version, "path": e.path} for e in log.of(CheckpointFound)]


def checkpoint_failures_section(log: EventLog, t0: float) -> list[dict[str, Any]]:
    """Failed checkpoint writes as the master saw them (one entry may stand for several)."""
    return [
        {
            "ps_id": e.ps_id,
            "version": e.version,
            "failed": e.failed,
            "failed_in_a_row": e.failed_in_a_row,
            "error": e.error,
            "at_s": _s(e.at, t0),
        }
        for e in log.of(CheckpointFailed)
    ]


def diverged_section(log: EventLog, nonfinite_records: int) -> dict[str, Any] | None:
    """Whether the loss diverged (divergence.py), from the loss reports; the first time a
    report is made it adds a `loss_diverged` event."""
    from elasticdl.runtime.master.divergence import divergence

    found = log.of(LossDiverged)
    if not found:
        points = sorted(log.of(LossReported), key=lambda e: e.model_version)
        verdict = divergence(
            [e.loss for e in points], nonfinite_records, counts=[e.count for e in points]
        )
        if verdict is None:
            return None
        found = [
            log.add(
                LossDiverged(
                    time.monotonic(), verdict.reason, verdict.first_loss, verdict.final_loss
                )
            )
        ]
    e = found[0]
    return {"reason": e.reason, "first_loss": _r(e.first_loss), "final_loss": _r(e.final_loss)}


def learning_section(log: EventLog, resumed: bool, diverged: bool) -> dict[str, str] | None:
    """Whether the loss says the model was not learning, or still learning fast when training
    ended (learning.py), with the flag or WITH key that would help; None when neither (or when
    it diverged: that verdict is said instead)."""
    from elasticdl.runtime.master.learning import learning

    if diverged:
        return None
    points = sorted(log.of(LossReported), key=lambda e: e.model_version)
    verdict = learning([(e.epoch, e.loss) for e in points], resumed)
    if verdict is None:
        return None
    return {"verdict": verdict.verdict, "reason": verdict.reason, "hint": verdict.hint}


def final_loss(loss: float) -> float | None:
    return loss if math.isfinite(loss) else None


def write(report: dict[str, Any], *directories: Path) -> None:
    text = json.dumps(report, indent=1)
    for directory in directories:
        (directory / "job_report.json").write_text(text)


def write_logged(report: dict[str, Any], directory: Path) -> None:
    """`write` into the log directory; one that vanished or filled up is said in one line
    (the summary line still says how the job went)."""
    try:
        write(report, directory)
    except OSError as err:
        logging.getLogger("elasticdl.master").error(
            "could not write the job report in %s: %s", directory, err.strerror or err
        )


def summary_line(report: dict[str, Any]) -> str:
    """One line that says how a job went (printed at the end of every job)."""
    if not report:
        return "job: no report"
    if report.get("kind") in ("predict", "evaluate"):
        return _inference_summary(report)
    records = report.get("records", {})
    workers = report.get("workers", {})
    text = (
        f"job {report.get('job_name')} {report.get('status')}: "
        f"{records.get('trained', 0)}/{records.get('planned', 0)} records trained, "
        f"{records.get('redone', 0)} redone, {workers.get('launched', 0)} worker(s) launched, "
        f"{workers.get('failed', 0)} failed, {workers.get('relaunched', 0)} relaunched, "
        f"{len(report.get('failures', []))} failure(s), "
        f"{len(report.get('checkpoints', []))} checkpoint(s), "
        f"{_failed_writes(report)}"
        f"{report.get('throughput', {}).get('records_per_second', 0)} records/s"
    )
    resumed = report.get("resumed_from")
    if resumed:
        text += f", resumed from model version {resumed['model_version']}"
        passed = [f"{s['version']} ({s['reason']})" for s in resumed.get("skipped", [])]
        text += f" (passed over version {', '.join(passed)})" if passed else ""
    if report.get("final_loss") is not None:
        text += f", final loss {report['final_loss']:.4g}"
    if report.get("diverged"):
        text += f", DIVERGED: {report['diverged']['reason']}"
    learned = report.get("learning")
    if learned:
        text += f", {learned['verdict'].replace('_', ' ').upper()}: {learned['reason']}"
        text += f" ({learned['hint']})"
    if report.get("error"):
        text += f"; error: {report['error']}"
    return text


def _failed_writes(report: dict[str, Any]) -> str:
    failed = sum(f.get("failed", 1) for f in report.get("checkpoint_failures", []))
    return f"{failed} checkpoint write(s) failed, " if failed else ""


def _inference_summary(report: dict[str, Any]) -> str:
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


class LiveViews:
    """The views kept up to date while a job runs, from the event log and the task state:
    the progress display and TensorBoard (tensorboard.py: written live, if given)."""

    def __init__(self, log: EventLog, progress: ProgressDisplay, tensorboard: Any = None) -> None:
        self._log = log
        self._progress = progress
        self.tensorboard = tensorboard
        """A tensorboard.TensorBoardFeed, or None."""

    def update(self, snapshot: Snapshot, workers: int, force: bool = False) -> None:
        found = self._log.epoch_loss(snapshot.epoch)
        if found is not None:
            self._progress.epoch_losses(snapshot.epoch, found.total, found.count)
        self._progress.update(snapshot.records_trained, snapshot.epoch, None, workers, force)
        if self.tensorboard is not None:
            self.tensorboard.update(snapshot, force)

    def close(self) -> None:
        self._progress.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
