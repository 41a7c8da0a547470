"""`--chaos "SPEC"`: scripted failures for users and tests, as pure logic.

SPEC is a comma-separated list of `TARGET:ACTION@TRIGGER=VALUE`:

    worker1:kill@tasks=3          SIGKILL worker 1 after it finished 3 tasks
    worker0:term@seconds=5        SIGTERM worker 0 five seconds after the job started
    worker1:stop@tasks=1          SIGSTOP worker 1 as it is handed a task, once it finished
                                  one (the task timeout must catch it)
    ps0:kill@seconds=20           SIGKILL parameter server 0
    ps0:kill@tasks=6              SIGKILL parameter server 0 once the workers finished 6 tasks
    worker0+worker1:kill@tasks=2  SIGKILL workers 0 and 1 together, once each finished 2 tasks
    worker:add@seconds=4          scale up by one worker
    worker:remove@seconds=9       scale down by one worker (the newest gets SIGTERM)

Each action fires once. `tasks=` counts the tasks the named worker finished (every named
worker, for a group `worker0+worker1`: the group fires in one pass of the master's loop, when
the last of them gets there). A parameter server and `worker:add`/`worker:remove` have no tasks
of their own: for them `tasks=` counts the tasks all workers finished. Task triggers do not
depend on how fast the machine is.

Two kinds of action are not fired from the master's loop: their triggers are checked, and
they land, inside the call in which a worker starts a task (`Resizer.on_dispatch`, which sees
the task reported in the same call; a task handed ahead starts when the worker takes it up):

* a worker `stop` lands on each named worker as it starts its next task: the worker then
  certainly holds a task it cannot have reported, so the task timeout has something to catch.
  Sent from the loop, it raced the worker's report of the task it was finishing: a worker
  stopped just after that report hangs holding nothing (CI caught it twice);
* a parameter server's signal with a `tasks=` trigger lands as any worker starts its next
  task: that task is still to be trained, so the job cannot end before the PS is down and
  has to recover it. Sent from the loop, a short job could finish between the trigger and the
  loop's next pass (CI caught it), and the action never fired.

An action that never fired by the job's end (its trigger did not come, or no task started
after it came) is reported as skipped, with the reason (`Resizer.at_end`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_ITEM = re.compile(
    r"^(?P<targets>(worker|ps)\d*(\+(worker|ps)\d*)*):(?P<action>kill|term|stop|add|remove)"
    r"@(?P<trigger>tasks|seconds)=(?P<value>\d+(\.\d+)?)$"
)
_TARGET = re.compile(r"^(?P<role>worker|ps)(?P<index>\d+)?$")
_SIGNAL_ACTIONS = {"kill", "term", "stop"}


class ChaosSpecError(ValueError):
    """A --chaos item does not parse; the message shows the grammar."""


@dataclass
class ChaosAction:
    role: str
    index: int | None
    action: str
    trigger: str
    value: float
    fired: bool = field(default=False, compare=False)
    group: tuple[int, ...] = ()
    """Every index the action targets, `index` first (one, unless `worker0+worker1`)."""

    def __post_init__(self) -> None:
        if not self.group and self.index is not None:
            self.group = (self.index,)

    def __str__(self) -> str:
        target = "+".join(f"{self.role}{i}" for i in self.group) or self.role
        value = int(self.value) if self.value.is_integer() else self.value
        return f"{target}:{self.action}@{self.trigger}={value}"

    @property
    def lands_on_dispatch(self) -> bool:
        """Checked and sent as a worker starts a task (see the module docstring): a worker
        `stop`, at each named worker's next task; a PS signal with a `tasks=` trigger, at any
        worker's next task."""
        if self.role == "worker":
            return self.action == "stop"
        return self.role == "ps" and self.trigger == "tasks"

    @property
    def counts_all_tasks(self) -> bool:
        """True when a task trigger counts every worker's tasks (nothing of its own to count)."""
        return self.trigger == "tasks" and (self.role == "ps" or self.index is None)


def parse_chaos(spec: str | None) -> list[ChaosAction]:
    """Parse a --chaos string; raise ChaosSpecError naming the bad item."""
    actions: list[ChaosAction] = []
    for raw in (spec or "").split(","):
        item = raw.strip()
        if not item:
            continue
        match = _ITEM.match(item)
        if match is None:
            raise ChaosSpecError(
                f"--chaos: cannot parse {item!r}; expected TARGET:ACTION@TRIGGER=N such as "
                "worker1:kill@tasks=3, worker0:term@seconds=5, ps0:kill@tasks=6, "
                "worker0+worker1:kill@tasks=2, worker:add@seconds=4 (actions "
                "kill|term|stop|add|remove, triggers tasks|seconds)"
            )
        targets = [_TARGET.match(t) for t in match["targets"].split("+")]
        role, action = targets[0]["role"], match["action"]
        indexes = [t["index"] for t in targets]
        if len(targets) > 1:
            if any(t["role"] != role for t in targets) or None in indexes:
                raise ChaosSpecError(
                    f"--chaos: {item!r}: a group names processes of one kind, e.g. worker0+worker1"
                )
            if len(set(indexes)) < len(indexes):
                raise ChaosSpecError(f"--chaos: {item!r} names a process twice")
        if action in _SIGNAL_ACTIONS and indexes[0] is None:
            raise ChaosSpecError(f"--chaos: {item!r} must name one process, e.g. {role}0")
        if action in ("add", "remove") and (role != "worker" or indexes[0] is not None):
            raise ChaosSpecError(f"--chaos: {item!r}: add/remove apply to `worker` only")
        group = tuple(int(i) for i in indexes if i is not None)
        actions.append(
            ChaosAction(
                role,
                group[0] if group else None,
                action,
                match["trigger"],
                float(match["value"]),
                group=group,
            )
        )
    return actions


def due_actions(
    actions: list[ChaosAction],
    elapsed_s: float,
    tasks_done: Mapping[int, int],
) -> list[ChaosAction]:
    """Actions whose trigger has come; each is marked fired and returned once.

    `tasks_done` maps worker id -> tasks that worker finished (workers that are gone included).
    """
    ready = []
    all_tasks = sum(tasks_done.values())
    for action in actions:
        if action.fired:
            continue
        if action.trigger == "seconds":
            hit = elapsed_s >= action.value
        elif action.counts_all_tasks:
            hit = all_tasks >= action.value
        else:
            hit = all(tasks_done.get(i, 0) >= action.value for i in action.group)
        if hit:
            action.fired = True
            ready.append(action)
    return ready
