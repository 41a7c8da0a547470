"""The supervisor's liveness checks (hangs.py): which silent role is killed, which is waited
for, and what is said. A scripted instance manager stands for the processes' /proc views."""

from __future__ import annotations

import logging
import signal
from types import SimpleNamespace

from elasticdl.runtime.master.events import EventLog, InstanceSlow, PSUnresponsive, TaskTimeout
from elasticdl.runtime.master.exits import Role, Why
from elasticdl.runtime.master.hangs import Hangs
from elasticdl.runtime.master.instances import InstanceManager
from elasticdl.runtime.master.liveness import Sample
from elasticdl.runtime.master.task_state import Expired


class ScriptedManager(InstanceManager):
    """`views[(role, index)]`: (state, CPU seconds per second of wall time) of each process."""

    def __init__(self, views: dict[tuple[Role, int], tuple[str, float]]) -> None:
        self.views = views

    def sample(self, role, index, now):
        state, rate = self.views[(role, index)]
        return Sample(now, state, rate * now, pid=100 + index)

    def alive(self, role):
        return sorted(i for r, i in self.views if r == role)

    start_ps = start_worker = signal = exits = shutdown = None  # type: ignore[assignment]


def supervisor(views, silent_ps=(), checkpoint=None):
    sent = []
    plugin = SimpleNamespace(
        unresponsive_ps=lambda now: [(i, 10.0) for i in silent_ps],
        latest_checkpoint=lambda: checkpoint,
    )
    sup = SimpleNamespace(
        manager=ScriptedManager(views),
        plugin=plugin,
        events=EventLog(),
        retired=set(),
        send=lambda *args: sent.append(args) or True,
    )
    hangs = Hangs(sup)
    hangs.load = lambda: 0.5
    for t in range(0, 31):  # watched from before the silence began
        hangs.observe(float(t))
    return sup, hangs, sent


def test_a_starved_ps_without_checkpoint_is_waited_for_and_said_once(caplog):
    sup, hangs, sent = supervisor({(Role.PS, 0): ("R", 0.0)}, silent_ps=[0])
    caplog.set_level(logging.WARNING, "elasticdl.master")
    for now in (20.0, 25.0, 30.0):
        hangs.check_ps(now)
    assert sent == [] and not hangs.hung_ps
    [slow] = sup.events.of(InstanceSlow)
    assert (slow.role, slow.id) == ("ps", 0) and "waiting for a CPU" in slow.reason
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("parameter server 0 is slow, not hung: answered no liveness probe")
    assert line.endswith(
        "the job waits: it holds the only copy of its parameters (no checkpoint to restore)"
    )


def test_a_stopped_ps_is_killed_as_hung():
    sup, hangs, sent = supervisor({(Role.PS, 0): ("T", 0.0)}, silent_ps=[0], checkpoint=40)
    hangs.check_ps(17.0)
    assert sent == [(Role.PS, 0, signal.SIGKILL, Why.HUNG, sent[0][4])]
    assert sent[0][4].startswith("hung: stopped (state T): answered no liveness probe for 7.0 s")
    assert hangs.hung_ps == {0: 10.0} and len(sup.events.of(PSUnresponsive)) == 1
    hangs.check_ps(18.0)
    assert len(sent) == 1, "killed once; its exit relaunches it"


def test_a_working_worker_waits_a_stopped_one_is_killed():
    views = {(Role.WORKER, 0): ("S", 0.5), (Role.WORKER, 1): ("t", 0.0)}
    sup, hangs, sent = supervisor(views)
    expired = [Expired(0, 7, 15.0), Expired(1, 8, 15.0)]
    hangs.check_workers(expired, 30.0)
    assert [(s[0], s[1], s[3]) for s in sent] == [(Role.WORKER, 1, Why.TIMEOUT)]
    assert hangs.timed_out[1][1].startswith("hung: no progress on task 8 for more than the task")
    assert [e.worker_id for e in sup.events.of(TaskTimeout)] == [1]
    [slow] = sup.events.of(InstanceSlow)
    assert (slow.role, slow.id) == ("worker", 0) and "is working" in slow.reason
