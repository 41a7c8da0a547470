"""Why an instance ended, and what the job does about it: one vocabulary, one table.

Both instance managers report exits in `ExitKind` words (local processes: from the exit
status; Kubernetes pods: from `pod_states`). The supervisor refines a kind with what only the
master knows (`refine`: it asked the worker to leave, it killed it for a task timeout, the exit
0 came while work remained), then `decide` -- a pure function written as a table -- says what
to do. Nothing here does I/O or reads a clock.

Exit kinds:

    exited      exit code 0 (a worker with nothing left to do)
    failed      a non-zero exit code (an error in user code, a bad config, ...)
    killed      ended by a signal (SIGKILL, or one it did not handle)
    preempted   the platform took it (exit 0 after SIGTERM with work left; on Kubernetes a pod
                deleted, evicted, on a lost node, or killed by SIGKILL without OOMKilled)
    oom         killed for running out of memory (Kubernetes: OOMKilled)
    retired     the master asked it to leave (the job shrank)
    timed_out   the master killed it: its task made no progress past the task timeout
    hung        the master killed it: a PS that answered no liveness probe past its timeout

The decision table (`decide`), first matching row wins:

    role    when                                          action
    any     every task was done when it ended             ignore
    worker  retired                                       retire (no relaunch, no failure)
    worker  exited                                        ignore (nothing left to do)
    worker  the job has its target of workers             retire
    worker  oom                                           refuse: it would run out again
    worker  preempted                                     relaunch, free of the budget
    worker  failed, killed, timed_out, hung: budget left  relaunch, from the budget
    worker  failed, killed, timed_out, hung: none left    refuse: the budget is spent
    ps      oom                                           fail the job
    ps      its port was taken before it served: retries  relaunch on a fresh port, free
    ps      the same, PORT_RETRIES times in a row         fail the job
    ps      the job keeps no checkpoints                  fail the job (parameters lost)
    ps      budget left                                   relaunch from the checkpoint
    ps      none left                                     fail the job

A refused worker relaunch does not fail the job by itself: the job fails when fewer than
--min_workers workers are left alive (the same rule for training and inference). A PS whose
port another process took between the master's choice and its bind (ports.py) exits with
`PORT_TAKEN_EXIT` before it serves: it held no parameters, so even a job without checkpoints
loses nothing by relaunching it elsewhere, and the workers find it there as they find any
relaunched PS.
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass

PORT_TAKEN_EXIT = 75
"""A PS's exit status when it could not bind its port at start (sysexits' EX_TEMPFAIL)."""
PORT_RETRIES = 3
"""Relaunches of one PS on a fresh port after its port was taken, in a row, before the job
fails: one taken port is a race; three in a row say the ports cannot be bound at all."""


class ExitKind(enum.StrEnum):
    EXITED = "exited"
    FAILED = "failed"
    KILLED = "killed"
    PREEMPTED = "preempted"
    OOM = "oom"
    RETIRED = "retired"
    TIMED_OUT = "timed_out"
    HUNG = "hung"

    @property
    def is_failure(self) -> bool:
        """The instance did something wrong (counts against task retries and in `failures`)."""
        return self not in (ExitKind.EXITED, ExitKind.PREEMPTED, ExitKind.RETIRED)


def kind_of_status(exit_code: int | None, sig: int | None) -> ExitKind:
    """The kind of a process exit from its status alone (what a local process tells)."""
    if sig is not None:
        return ExitKind.KILLED
    return ExitKind.EXITED if exit_code == 0 else ExitKind.FAILED


class Why(enum.StrEnum):
    """Why the master itself signalled an instance (remembered until its exit)."""

    CHAOS = "chaos"
    RETIRE = "retire"
    TIMEOUT = "timeout"
    HUNG = "hung"
    FINISHED = "finished"


def refine(kind: ExitKind, sent: Why | None, work_left: bool) -> ExitKind:
    """The kind the job acts on: the manager's word refined by what the master knows.

    `sent`: why the master signalled this instance, if it did; `work_left`: whether tasks
    remain for the job (a worker that exits 0 then has obeyed a preemption notice)."""
    if sent is Why.RETIRE:
        return ExitKind.RETIRED
    if sent is Why.TIMEOUT:
        return ExitKind.TIMED_OUT
    if sent is Why.HUNG:
        return ExitKind.HUNG
    if kind is ExitKind.EXITED and work_left:
        return ExitKind.PREEMPTED
    return kind


class Role(enum.StrEnum):
    PS = "ps"
    WORKER = "worker"


class Phase(enum.StrEnum):
    RUNNING = "running"
    FINISHING = "finishing"
    """Every task is done: nothing an exit can change."""


class Action(enum.StrEnum):
    IGNORE = "ignore"
    RETIRE = "retire"
    """Not relaunched, and nothing wrong: retired, or the job has its workers."""
    RELAUNCH_FREE = "relaunch_free"
    RELAUNCH_BUDGET = "relaunch_budget"
    REFUSE = "refuse"
    """Not relaunched although it is missing (the job fails below --min_workers)."""
    FAIL_JOB = "fail_job"


@dataclass(frozen=True)
class Situation:
    """What `decide` looks at besides the exit kind and role."""

    phase: Phase = Phase.RUNNING
    budget_left: int = 0
    """Relaunches of this role left (--max_worker_relaunches / --max_ps_relaunches)."""
    below_target: bool = True
    """A worker: fewer workers alive than the job wants now."""
    checkpointed: bool = True
    """A PS: the job writes checkpoints to restore it from."""
    port_taken: bool = False
    """A PS: it exited with PORT_TAKEN_EXIT, before it served."""
    port_retries_left: int = PORT_RETRIES
    """A PS: relaunches on a fresh port left (PORT_RETRIES, less those in a row so far)."""


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str = ""
    """For REFUSE and FAIL_JOB: why, as a phrase ("the relaunch budget ... is spent")."""

    @property
    def relaunch(self) -> bool:
        return self.action in (Action.RELAUNCH_FREE, Action.RELAUNCH_BUDGET)


_BUDGET_FLAG = {Role.WORKER: "--max_worker_relaunches", Role.PS: "--max_ps_relaunches"}
_GIVEN_UP = frozenset({ExitKind.FAILED, ExitKind.KILLED, ExitKind.TIMED_OUT, ExitKind.HUNG})


def decide(kind: ExitKind, role: Role, at: Situation, budget: int = 0) -> Decision:
    """What to do about one exit (the table in the module docstring).

    `budget` is the configured relaunch budget of the role, named in refusals."""
    spent = f"the relaunch budget ({_BUDGET_FLAG[role]}={budget}) is spent"
    if at.phase is Phase.FINISHING:
        return Decision(Action.IGNORE)
    if role is Role.PS:
        if kind is ExitKind.OOM:
            return Decision(Action.FAIL_JOB, "out of memory; give the PS more memory")
        if at.port_taken and at.port_retries_left > 0:
            return Decision(Action.RELAUNCH_FREE)
        if at.port_taken:
            return Decision(
                Action.FAIL_JOB,
                f"its port was taken at {PORT_RETRIES + 1} starts in a row; check what holds the "
                "ports on this host (ports.py draws them outside the kernel's ephemeral range)",
            )
        if not at.checkpointed:
            return Decision(
                Action.FAIL_JOB,
                "its parameters are lost and this job has no checkpoint to restore from "
                "(--checkpoint_steps)",
            )
        if at.budget_left > 0:
            return Decision(Action.RELAUNCH_BUDGET)
        return Decision(Action.FAIL_JOB, spent)
    if kind is ExitKind.RETIRED:
        return Decision(Action.RETIRE)
    if kind is ExitKind.EXITED:
        return Decision(Action.IGNORE)
    if not at.below_target:
        return Decision(Action.RETIRE, "the job has its workers")
    if kind is ExitKind.OOM:
        return Decision(Action.REFUSE, "ran out of memory (not relaunched: it would again)")
    if kind is ExitKind.PREEMPTED:
        return Decision(Action.RELAUNCH_FREE)
    if kind in _GIVEN_UP and at.budget_left > 0:
        return Decision(Action.RELAUNCH_BUDGET)
    return Decision(Action.REFUSE, spent)


def cause_of(
    kind: ExitKind,
    exit_code: int | None,
    sig: int | None,
    sent: str = "",
    message: str = "",
    last_line: str = "",
) -> str:
    """Why an instance ended, as a phrase after "worker 3 " / "parameter server 0 ".

    `sent`: the master's own words for a signal it sent ("chaos worker1:kill@tasks=2");
    `message`: the instance manager's words (Kubernetes: OOMKilled, evicted, ...)."""
    if message and not sent:
        return message
    if sig is not None:
        name = signal.Signals(sig).name
        if sent:
            return f"killed by {name} ({sent})"
        if sig == signal.SIGKILL and kind is not ExitKind.OOM:
            return (
                f"killed by SIGKILL from outside the job (exit status {128 + sig}:"
                " most often the kernel's OOM killer; check how much memory it needs)"
            )
        return f"killed by {name}"
    if exit_code == 0:
        return "exited" + (f" ({sent})" if sent else "")
    return f"exited with code {exit_code}" + (f": {last_line}" if last_line else "")


def last_line(text: str) -> str:
    """The last non-blank line of a log tail (at most 500 characters)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""
