"""The console's view of the event log: a line the moment a role is lost or comes back.

A worker or parameter server that ended while the job ran used to be counted only in the
summary at the end; now each `InstanceLost` that was a failure, each refused relaunch and
each parameter server that serves again is one log line as it happens (hung and slow roles
are said by hangs.py when it judges them). `announce` is pure; `EventLog.listen` calls
`log_event` for every event added.
"""

from __future__ import annotations

import logging

from elasticdl.runtime.master.events import Event, InstanceLost, PSRecovered, RelaunchRefused

log = logging.getLogger("elasticdl.master")

_ACTIONS = {
    "relaunch_free": "relaunched",
    "relaunch_budget": "relaunched",
    "refuse": "not relaunched",
    "fail_job": "the job fails",
    "retire": "not relaunched: the job has its workers",
    "ignore": "not relaunched",
}


def _name(role: str, index: int) -> str:
    return f"parameter server {index}" if role == "ps" else f"worker {index}"


def announce(event: Event) -> str | None:
    """The console line for `event`, or None when it is not one to announce."""
    if isinstance(event, InstanceLost) and event.failure:
        then = _ACTIONS.get(event.action, event.action)
        if event.relaunched_as is not None:
            then = f"relaunched as worker {event.relaunched_as}"
        if event.tasks_requeued:
            then = f"{event.tasks_requeued} task(s) back in the queue; {then}"
        return f"{_name(event.role, event.id)} lost: {event.cause} ({then})"
    if isinstance(event, RelaunchRefused):
        return f"worker {event.worker_id} not relaunched: {event.reason}"
    if isinstance(event, PSRecovered):
        restored = (
            f", restored checkpoint version {event.restored_version}"
            if event.restored_version is not None
            else ""
        )
        return f"parameter server {event.ps_id} serves again after {event.seconds:.1f} s{restored}"
    return None


def log_event(event: Event) -> None:
    """Log `event`'s console line, if it has one (an `EventLog` listener)."""
    line = announce(event)
    if line is not None:
        log.warning("%s", line)
