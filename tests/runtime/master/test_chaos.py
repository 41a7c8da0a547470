import signal
import time

import pytest

from elasticdl.runtime.master.chaos import ChaosSpecError, due_actions, parse_chaos
from elasticdl.runtime.master.events import ChaosFired, ChaosSkipped, EventLog
from elasticdl.runtime.master.resizing import Resizer


def test_parse_the_documented_examples():
    actions = parse_chaos(
        "worker1:kill@tasks=3, worker0:term@seconds=5,ps0:kill@seconds=20,worker:add@seconds=4"
    )
    assert [str(a) for a in actions] == [
        "worker1:kill@tasks=3",
        "worker0:term@seconds=5",
        "ps0:kill@seconds=20",
        "worker:add@seconds=4",
    ]
    assert parse_chaos("") == [] and parse_chaos(None) == []


@pytest.mark.parametrize(
    "spec",
    [
        "worker1:explode@tasks=3",
        "worker1:kill",
        "worker:kill@tasks=1",
        "ps:add@seconds=1",
        "ps0:kill@minutes=2",
        "worker0+ps1:kill@tasks=1",
        "worker0+worker0:kill@tasks=1",
        "worker+worker1:kill@tasks=1",
        "worker0+:kill@tasks=1",
        "worker1:kill@tasks=-1",
        "worker1;kill@tasks=1",
    ],
)
def test_bad_specs_are_clear_errors(spec):
    with pytest.raises(ChaosSpecError, match="--chaos"):
        parse_chaos(spec)


def test_triggers_fire_once():
    actions = parse_chaos("worker1:kill@tasks=2,worker:add@seconds=1.5")
    assert due_actions(actions, 0.0, {1: 1}) == []
    fired = due_actions(actions, 2.0, {1: 1})
    assert [str(a) for a in fired] == ["worker:add@seconds=1.5"]
    fired = due_actions(actions, 3.0, {1: 2})
    assert [str(a) for a in fired] == ["worker1:kill@tasks=2"]
    assert due_actions(actions, 9.0, {1: 9}) == []


def test_task_triggers_of_a_ps_or_of_scaling_count_every_workers_tasks():
    actions = parse_chaos("ps0:kill@tasks=5,worker:add@tasks=3,worker1:kill@tasks=3")
    assert [str(a) for a in actions] == [
        "ps0:kill@tasks=5",
        "worker:add@tasks=3",
        "worker1:kill@tasks=3",
    ]
    # 3 tasks in all, but none by worker 1: only the job-wide trigger fires.
    assert [str(a) for a in due_actions(actions, 0.0, {0: 2, 2: 1})] == ["worker:add@tasks=3"]
    # Tasks of workers that are gone (0 was replaced by 2) still count for the job.
    assert [str(a) for a in due_actions(actions, 0.0, {0: 2, 2: 3})] == ["ps0:kill@tasks=5"]
    assert [str(a) for a in due_actions(actions, 0.0, {0: 2, 1: 3, 2: 3})] == [
        "worker1:kill@tasks=3"
    ]


def test_a_group_fires_together_once_every_member_got_there():
    actions = parse_chaos("worker0+worker2:kill@tasks=2")
    assert [str(a) for a in actions] == ["worker0+worker2:kill@tasks=2"]
    assert actions[0].group == (0, 2) and actions[0].index == 0
    assert due_actions(actions, 0.0, {0: 5, 1: 9}) == []
    assert due_actions(actions, 0.0, {0: 5, 2: 1}) == []
    fired = due_actions(actions, 0.0, {0: 5, 2: 2})
    assert [a.group for a in fired] == [(0, 2)]
    assert due_actions(actions, 0.0, {0: 9, 2: 9}) == []


def test_a_worker_stop_is_due_like_any_action_and_lands_on_dispatch():
    """Due, a worker `stop` is armed: the Resizer sends it as the worker is handed a task."""
    actions = parse_chaos("worker1:stop@tasks=1,worker0:kill@tasks=1")
    assert [a.lands_on_dispatch for a in actions] == [True, False]
    on_ps = parse_chaos("ps0:kill@tasks=2,ps0:kill@seconds=2,worker:add@tasks=1")
    assert [a.lands_on_dispatch for a in on_ps] == [True, False, False]
    assert due_actions(actions, 0.0, {0: 0, 1: 0}) == []
    fired = due_actions(actions, 0.0, {0: 1, 1: 1})
    assert [str(a) for a in fired] == ["worker1:stop@tasks=1", "worker0:kill@tasks=1"]


class _RecordingSupervisor:
    """What the Resizer uses of a supervisor: the signals it sends, the events it logs."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.sent: list[tuple[int, int]] = []
        self.events = EventLog()

    def send(self, role, index, sig, why, words) -> bool:
        self.sent.append((str(role), index, sig))
        return True


def test_a_due_stop_lands_on_each_worker_as_it_is_handed_a_task():
    sup = _RecordingSupervisor()
    resizer = Resizer(sup, parse_chaos("worker0+worker1:stop@tasks=1"), None)
    assert resizer.acts_on_dispatch
    resizer.on_dispatch(0, {0: 1, 1: 0})  # not due: worker 1 has finished nothing yet
    resizer.on_pass({0: 1, 1: 1})  # the loop leaves dispatch actions alone
    assert sup.sent == [] and sup.events.of(ChaosFired) == []
    resizer.on_dispatch(1, {0: 1, 1: 1})
    assert sup.sent == [("worker", 1, signal.SIGSTOP)] and sup.events.of(ChaosFired) == []
    resizer.on_dispatch(1, {0: 1, 1: 2})  # once per worker
    resizer.on_dispatch(0, {0: 2, 1: 2})
    assert sup.sent == [("worker", 1, signal.SIGSTOP), ("worker", 0, signal.SIGSTOP)]
    (fired,) = sup.events.of(ChaosFired)
    assert fired.delivered and fired.to == ("worker1", "worker0")


def test_a_ps_signal_with_a_task_trigger_lands_as_the_next_task_goes_to_any_worker():
    """Checked in the call that reports the N-th task and hands out the next: the job still
    has that task to train, so it cannot end before the PS is down."""
    sup = _RecordingSupervisor()
    resizer = Resizer(sup, parse_chaos("ps0:kill@tasks=2"), None)
    resizer.on_dispatch(1, {0: 1, 1: 0})
    resizer.on_pass({0: 1, 1: 1})
    assert sup.sent == [] and sup.events.of(ChaosFired) == []
    resizer.on_dispatch(0, {0: 1, 1: 1})
    resizer.on_dispatch(1, {0: 1, 1: 2})
    assert sup.sent == [("ps", 0, signal.SIGKILL)]
    (fired,) = sup.events.of(ChaosFired)
    assert fired.action == "ps0:kill@tasks=2" and fired.to == ("ps0",)


def test_actions_that_never_fired_are_reported_skipped_at_the_end():
    """A job can end before a trigger comes, or (a dispatch action) before a task starts after
    it came: the report says so instead of leaving the action out."""
    sup = _RecordingSupervisor()
    resizer = Resizer(
        sup,
        parse_chaos(
            "worker0:kill@tasks=1, ps0:kill@tasks=3, worker0+worker1:stop@tasks=1, "
            "worker1:term@tasks=9"
        ),
        None,
    )
    resizer.on_pass({0: 1, 1: 0})
    resizer.on_dispatch(1, {0: 1, 1: 1})  # the stop lands on worker 1; worker 0 never starts
    resizer.at_end({0: 2, 1: 1})  # the PS kill came due with no task left to start
    assert [f.action for f in sup.events.of(ChaosFired)] == ["worker0:kill@tasks=1"]
    skipped = {e.chaos: e.reason for e in sup.events.of(ChaosSkipped)}
    assert skipped == {
        "ps0:kill@tasks=3": "the job ended before a worker started a task after it came due",
        "worker0+worker1:stop@tasks=1": "the job ended before worker0 started a task after it "
        "came due (sent to worker1)",
        "worker1:term@tasks=9": "the job ended before it came due",
    }
    resizer.at_end({0: 2, 1: 1})
    assert len(sup.events.of(ChaosSkipped)) == 3  # once
