"""The worker's next training task, asked for ahead and made ready while the current one trains.

A task switch used to start from nothing: report the result and get the next task, read its
shard, put it in visiting order, and push the first minibatch through an empty input pipeline
(~22 ms of a DNN worker's time per task of 16 minibatches, 13-14 ms of it that first
minibatch). Here, once the current training task has trained a minibatch, the worker asks the
master for a task to hold ahead (`get_task` with `ahead`, sent without waiting;
runtime/master/task_manager.py says when the master hands one out). When one comes, a
background thread reads and orders its records and has the pipeline make its first minibatch
(pipeline.py's `prepare`). `finish_task` names it; the master answers with it when the worker
is to train it now, and its records are taken from here; any other answer (evaluations went
first, training stopped) drops it.

Only the background thread touches the readers while a task is held ahead, and `take` waits for
it before the training thread reads again. A failure while preparing is not the task's: the
training thread reads the records again, and a real problem fails the task there as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.runtime.rpc_calls import CallThreads

log = logging.getLogger("elasticdl.worker")


class TaskAhead:
    """At most one training task held ahead, and its records once prepared."""

    def __init__(self, master: Any, worker_id: int, prepare: Callable[[Any], list[bytes]]) -> None:
        """`prepare(task)`: the task's records in visiting order, its pipeline filled (called
        on this object's background thread)."""
        self._master = master
        self._worker_id = worker_id
        self._prepare = prepare
        self._asked: Any = None
        self._calls = CallThreads(1, name="task-ahead-ask")
        self._asked_beside = 0
        self._task: Any = None
        self._records: Future[list[bytes]] | None = None
        self._thread: ThreadPoolExecutor | None = None

    def ask(self, current_task_id: int) -> None:
        """Ask the master for a task ahead of task `current_task_id`: once per task, and
        not while one is held."""
        if self._asked_beside != current_task_id and self._task is None:
            self._asked_beside = current_task_id
            request = pb.GetTaskRequest(worker_id=self._worker_id, ahead=True)
            self._asked = self._calls.submit(self._master.get_task, request, timeout=60)

    def poll(self) -> None:
        """Start preparing the task once the master's answer is in (never waits)."""
        if self._asked is not None and self._asked.done():
            self._take_answer()

    def held_id(self) -> int:
        """The id of the task held ahead, 0 for none (an answer still on its way is waited
        for: the master must hear of every task it handed out)."""
        if self._asked is not None:
            self._take_answer()
        return self._task.task_id if self._task is not None else 0

    def take(self, task: Any) -> list[bytes] | None:
        """`task`'s prepared records when it is the task held ahead, else None; either way
        nothing is held afterwards."""
        if self._asked is not None:
            self._take_answer()
        held, prepared = self._task, self._records
        self._task = self._records = None
        if held is None or prepared is None:
            return None
        try:
            records = prepared.result()
        except Exception:  # noqa: BLE001 - see the module docstring
            log.warning("worker %d: preparing task %d failed", self._worker_id, held.task_id)
            return None
        return records if held.task_id == task.task_id else None

    def _take_answer(self) -> None:
        asked, self._asked = self._asked, None
        try:
            task = asked.result()
        except Exception as err:  # noqa: BLE001 - no task ahead then; finish_task still works
            log.debug("worker %d: no task ahead: %s", self._worker_id, err)
            return
        if task.task_id and task.type == pb.TRAINING:
            self._task = task
            if self._thread is None:
                self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="task-ahead")
            self._records = self._thread.submit(self._prepare, task)
