"""Pieces of job reports shared by training, prediction and evaluation jobs."""

from __future__ import annotations

from typing import Any

from elasticdl.runtime.master.task_manager import Event


def event_dict(event: Event, t0: float) -> dict[str, Any]:
    """A task-manager event as a JSON object, times relative to the job's start `t0`."""
    found: dict[str, Any] = {
        "kind": event.kind,
        "at_s": round(event.at - t0, 3),
        "seconds": round(event.seconds, 4),
    }
    if event.worker_id is not None:
        found["worker_id"] = event.worker_id
    if event.task_id is not None:
        found["task_id"] = event.task_id
    if event.detail:
        found["detail"] = event.detail
    return found
