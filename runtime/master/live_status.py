"""The live report of a running training job (`elasticdl status`): a view of the event log
and the task state at one instant, and its text.

`status_report` is pure: the caller gives it what it read (the log, a task snapshot, the
workers alive and those holding a task, the clock). `format_status` turns the report into the
lines the command prints. The report is JSON-able; the master serves it (status_service.py).
"""

from __future__ import annotations

import math
from typing import Any

from elasticdl.runtime.master import report as views
from elasticdl.runtime.master.events import EvaluationDone, EventLog, InstanceLost, WorkerLaunched

RECENT_FAILURES = 5
LISTED_WORKERS = 50
"""The text lists at most this many workers one by one (the counts by state cover all)."""


def _epoch_mean_loss(log: EventLog, epoch: int) -> float | None:
    found = log.epoch_loss(epoch)
    return round(found.mean, 6) if found is not None else None


def worker_states(
    log: EventLog, t0: float, alive: list[int], holding: set[int]
) -> list[dict[str, Any]]:
    """Every worker the job launched: `training` (alive, holds a task), `idle` (alive, no
    task), `starting` (launched, not yet seen alive) or how it ended (its last exit's kind)."""
    ended = {e.id: e.exit_kind for e in log.of(InstanceLost) if e.role == "worker"}
    alive_now = set(alive)
    states = []
    for launch in log.of(WorkerLaunched):
        worker_id = launch.worker_id
        if worker_id in ended:
            state = ended[worker_id]
        elif worker_id in alive_now:
            state = "training" if worker_id in holding else "idle"
        else:
            state = "starting"
        states.append({"worker_id": worker_id, "state": state})
    return states


def status_report(
    job_name: str,
    log: EventLog,
    snapshot: Any,
    t0: float,
    now: float,
    num_epochs: int,
    alive: list[int],
    holding: set[int],
) -> dict[str, Any]:
    """What a running job is doing now: progress, workers, recent failures, metrics."""
    seconds = max(now - t0, 1e-9)
    planned = max(snapshot.records_planned, 1)
    evaluations = log.of(EvaluationDone)
    loss = snapshot.loss if math.isfinite(snapshot.loss) else None
    return {
        "job_name": job_name,
        "state": "finishing" if snapshot.finished else "running",
        "elapsed_s": round(seconds, 1),
        "progress": {
            "records_planned": snapshot.records_planned,
            "records_trained": snapshot.records_trained,
            "percent": round(100.0 * snapshot.records_trained / planned, 1),
            "epoch": min(snapshot.epoch + 1, num_epochs),
            "num_epochs": num_epochs,
            "model_version": snapshot.model_version,
            "records_per_second": round(snapshot.records_trained / seconds, 1),
            "last_loss": loss,
            "epoch_mean_loss": _epoch_mean_loss(log, snapshot.epoch),
        },
        "workers": worker_states(log, t0, alive, holding),
        "failures": views.failures_section(log, t0, last=RECENT_FAILURES),
        "metrics": dict(evaluations[-1].metrics) if evaluations else {},
        "metrics_model_version": evaluations[-1].model_version if evaluations else None,
    }


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def format_status(status: dict[str, Any]) -> str:
    """The report as the lines `elasticdl status` prints."""
    p = status["progress"]
    lines = [
        f"job {status['job_name']}: {status['state']}, {status['elapsed_s']}s",
        f"progress: {p['records_trained']}/{p['records_planned']} records ({p['percent']}%), "
        f"epoch {p['epoch']}/{p['num_epochs']}, model version {p['model_version']}, "
        f"{p['records_per_second']} records/s",
        f"loss: last {_number(p['last_loss'])}, epoch mean {_number(p['epoch_mean_loss'])}",
    ]
    workers = status["workers"]
    counts: dict[str, int] = {}
    for w in workers:
        counts[w["state"]] = counts.get(w["state"], 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none"
    lines.append(f"workers: {summary}")
    shown = workers
    if len(workers) > LISTED_WORKERS:  # the ones not training say the most
        shown = [w for w in workers if w["state"] != "training"][:LISTED_WORKERS]
    lines += [f"  worker {w['worker_id']}: {w['state']}" for w in shown]
    if len(shown) < len(workers):
        lines.append(
            f"  ({len(workers) - len(shown)} more not listed, training ones first; --json "
            "lists every worker)"
        )
    failures = status["failures"]
    lines.append(f"recent failures: {len(failures) or 'none'}")
    for f in failures:
        lines.append(f"  {f['role']} {f['id']} {f['kind']} at {f['at_s']}s: {f['cause']}")
    if status["metrics"]:
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in sorted(status["metrics"].items()))
        lines.append(f"metrics (model version {status['metrics_model_version']}): {metrics}")
    else:
        lines.append("metrics: none yet")
    return "\n".join(lines)
