"""A worker's progress reports to the master (runtime/worker/main.py sends them)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.runtime.rpc_calls import CallThreads

PROGRESS_EVERY_S = 0.1
"""Within a task, at most one progress report this often (see `ProgressReports`) unless the
master names another interval in the task (`Task.progress_every_s`: a master serving many
workers asks for fewer, runtime/master/call_budget.py). Exact accounting does not rest on it: a
lost worker's task is requeued from what the parameter servers applied
(`TaskManager.recover_worker`), not from its last report."""


class ProgressReports:
    """A worker's progress reports: sent without waiting for the answer (at most one in
    flight), and within a task at most one every `every_s` seconds.

    A task's first minibatch is always reported (the master times a task's lead to it), and a
    task's minibatches since its last report go with its result (`tail`: one call less a
    task), or in a report of their own when the worker leaves (SIGTERM). A report's loss is
    the mean of the finite losses of the minibatches it covers (NaN: none). One report a minibatch
    cost the worker and the master 1-2 ms of CPU a minibatch (a regressor.DNN minibatch takes
    ~8 ms); exact accounting does not need them (the master asks the parameter servers how far
    a lost worker's gradients got), the no-progress clock counts seconds, and a master serving
    many workers gets at most `1 / every_s` reports a second from each.
    """

    def __init__(
        self,
        master: Any,
        worker_id: int,
        every_s: float = PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._master = master
        self._clock = clock
        self._worker_id = worker_id
        self._every_s = every_s
        self._pending: Any = None
        self._calls = CallThreads(1, name="progress-reports")
        self._due: tuple[int, int, int] | None = None
        self._losses: list[float] = []
        self._sent_at = -math.inf

    def pace(self, every_s: float) -> None:
        """From now on, at most one report every `every_s` seconds (0: `PROGRESS_EVERY_S`):
        what the master named in the task it handed out."""
        self._every_s = every_s if every_s > 0 else PROGRESS_EVERY_S

    def minibatch(self, task_id: int, done: int, loss: float, version: int, first: bool) -> None:
        """A minibatch of task `task_id` was trained (`done`: its records applied so far)."""
        if math.isfinite(loss):
            self._losses.append(loss)
        self._due = (task_id, done, version)
        if first or self._clock() - self._sent_at >= self._every_s:
            self._send_due()

    def task_end(self, task_id: int, done: int, version: int) -> None:
        """Report `done` now, with the losses the task's last report left out (a worker leaving
        on SIGTERM reports before it goes: no result follows)."""
        self._due = (task_id, done, version)
        self._send_due()

    def tail(self, version: int) -> dict[str, Any]:
        """What the task's last report left out, as fields of its result
        (`ReportTaskResultRequest`): the mean of the losses since (none: no `loss`) and the
        model `version` they were trained on."""
        losses, self._losses, self._due = self._losses, [], None
        if not losses:
            return {"model_version": version}
        return {"loss": sum(losses) / len(losses), "model_version": version}

    def _send_due(self) -> None:
        if self._due is None:
            return
        task_id, done, version = self._due
        losses, self._losses, self._due = self._losses, [], None
        request = pb.ReportProgressRequest(
            worker_id=self._worker_id,
            task_id=task_id,
            records_done=done,
            loss=sum(losses) / len(losses) if losses else math.nan,
            model_version=version,
        )
        self.flush()
        self._pending = self._calls.submit(self._master.report_progress, request, timeout=60)
        self._sent_at = self._clock()

    def flush(self) -> None:
        if self._pending is not None:
            self._pending.result()
            self._pending = None
