"""The exit vocabulary and the one relaunch decision table, tested as tables."""

from __future__ import annotations

import signal

import pytest

from elasticdl.runtime.master.exits import (
    PORT_RETRIES,
    Action,
    ExitKind,
    Phase,
    Role,
    Situation,
    Why,
    cause_of,
    decide,
    kind_of_status,
    refine,
)
from elasticdl.runtime.master.instances import InstanceExit

K, A, W, P = ExitKind, Action, Role.WORKER, Role.PS
RUN, END = Phase.RUNNING, Phase.FINISHING

# (kind, role, phase, budget left, below target, checkpointed) -> action
DECISIONS = [
    # the job is finishing: nothing an exit changes
    (K.FAILED, W, END, 3, True, True, A.IGNORE),
    (K.OOM, P, END, 0, True, False, A.IGNORE),
    # workers
    (K.RETIRED, W, RUN, 3, True, True, A.RETIRE),
    (K.EXITED, W, RUN, 3, True, True, A.IGNORE),
    (K.PREEMPTED, W, RUN, 0, True, True, A.RELAUNCH_FREE),
    (K.PREEMPTED, W, RUN, 3, False, True, A.RETIRE),
    (K.FAILED, W, RUN, 3, False, True, A.RETIRE),
    (K.OOM, W, RUN, 3, True, True, A.REFUSE),
    (K.FAILED, W, RUN, 1, True, True, A.RELAUNCH_BUDGET),
    (K.KILLED, W, RUN, 1, True, True, A.RELAUNCH_BUDGET),
    (K.TIMED_OUT, W, RUN, 1, True, True, A.RELAUNCH_BUDGET),
    (K.HUNG, W, RUN, 1, True, True, A.RELAUNCH_BUDGET),
    (K.FAILED, W, RUN, 0, True, True, A.REFUSE),
    (K.TIMED_OUT, W, RUN, 0, True, True, A.REFUSE),
    # parameter servers
    (K.OOM, P, RUN, 3, True, True, A.FAIL_JOB),
    (K.KILLED, P, RUN, 3, True, False, A.FAIL_JOB),
    (K.KILLED, P, RUN, 3, True, True, A.RELAUNCH_BUDGET),
    (K.HUNG, P, RUN, 1, True, True, A.RELAUNCH_BUDGET),
    (K.PREEMPTED, P, RUN, 1, True, True, A.RELAUNCH_BUDGET),
    (K.FAILED, P, RUN, 0, True, True, A.FAIL_JOB),
]


@pytest.mark.parametrize(
    ("kind", "role", "phase", "left", "below", "checkpointed", "action"), DECISIONS
)
def test_the_decision_table(kind, role, phase, left, below, checkpointed, action) -> None:
    situation = Situation(phase, budget_left=left, below_target=below, checkpointed=checkpointed)
    assert decide(kind, role, situation, budget=3).action is action


def test_every_kind_and_role_has_a_decision() -> None:
    for kind in ExitKind:
        for role in Role:
            for left in (0, 1):
                decision = decide(kind, role, Situation(budget_left=left))
                assert decision.action in Action
                if decision.action in (Action.REFUSE, Action.FAIL_JOB):
                    assert decision.reason, (kind, role)


def test_refusals_and_job_failures_say_why() -> None:
    spent = decide(K.FAILED, W, Situation(budget_left=0), budget=2)
    assert spent.reason == "the relaunch budget (--max_worker_relaunches=2) is spent"
    ps = decide(K.KILLED, P, Situation(budget_left=0), budget=1)
    assert ps.reason == "the relaunch budget (--max_ps_relaunches=1) is spent"
    lost = decide(K.KILLED, P, Situation(budget_left=3, checkpointed=False))
    assert "no checkpoint to restore from (--checkpoint_steps)" in lost.reason


# A PS that exited with PORT_TAKEN_EXIT: (phase, retries left, checkpointed) -> action
PORT_TAKEN = [
    (RUN, 3, False, A.RELAUNCH_FREE),  # it never served: nothing lost, no checkpoint needed
    (RUN, 1, True, A.RELAUNCH_FREE),
    (RUN, 0, False, A.FAIL_JOB),
    (RUN, 0, True, A.FAIL_JOB),
    (END, 0, False, A.IGNORE),
]


@pytest.mark.parametrize(("phase", "left", "checkpointed", "action"), PORT_TAKEN)
def test_a_ps_whose_port_was_taken(phase, left, checkpointed, action) -> None:
    situation = Situation(
        phase, budget_left=0, checkpointed=checkpointed, port_taken=True, port_retries_left=left
    )
    decision = decide(K.FAILED, P, situation)
    assert decision.action is action
    if action is A.FAIL_JOB:
        assert f"taken at {PORT_RETRIES + 1} starts in a row" in decision.reason


# (manager's kind, what the master sent, work left) -> the kind the job acts on
REFINED = [
    (K.EXITED, None, True, K.PREEMPTED),  # exit 0 with work left: a preemption notice obeyed
    (K.EXITED, None, False, K.EXITED),
    (K.EXITED, Why.RETIRE, True, K.RETIRED),
    (K.PREEMPTED, Why.RETIRE, True, K.RETIRED),  # a pod the master deleted to shrink
    (K.KILLED, Why.TIMEOUT, True, K.TIMED_OUT),
    (K.KILLED, Why.HUNG, True, K.HUNG),
    (K.KILLED, Why.CHAOS, True, K.KILLED),
    (K.KILLED, None, True, K.KILLED),
    (K.OOM, None, True, K.OOM),
    (K.FAILED, None, True, K.FAILED),
]


@pytest.mark.parametrize(("kind", "sent", "work_left", "refined"), REFINED)
def test_refine(kind, sent, work_left, refined) -> None:
    assert refine(kind, sent, work_left) is refined


@pytest.mark.parametrize(
    ("code", "sig", "kind"),
    [(0, None, K.EXITED), (1, None, K.FAILED), (None, signal.SIGKILL, K.KILLED)],
)
def test_a_local_exit_status_is_a_kind(code, sig, kind) -> None:
    assert kind_of_status(code, sig) is kind
    exit_ = InstanceExit(Role.WORKER, 0, code, sig, at=0.0)
    assert exit_.kind is kind and exit_.reason == str(kind)
    assert InstanceExit(Role.WORKER, 0, code, sig, 0.0, observed=K.OOM).kind is K.OOM


def test_failures_and_non_failures() -> None:
    assert {k for k in ExitKind if not k.is_failure} == {K.EXITED, K.PREEMPTED, K.RETIRED}


def test_causes() -> None:
    assert cause_of(K.KILLED, None, 9, sent="chaos w1:kill") == "killed by SIGKILL (chaos w1:kill)"
    outside = cause_of(K.KILLED, None, 9)
    assert outside.startswith("killed by SIGKILL from outside the job (exit status 137")
    assert cause_of(K.FAILED, 1, None, last_line="ValueError: x") == (
        "exited with code 1: ValueError: x"
    )
    assert cause_of(K.OOM, None, 9, message="pod p was OOMKilled") == "pod p was OOMKilled"
    assert cause_of(K.EXITED, 0, None, sent="job finished") == "exited (job finished)"
