"""`--chaos "SPEC"`: scripted failures for users and tests, as pure logic.

SPEC is a comma-separated list of `TARGET:ACTION@TRIGGER=VALUE`:

    worker1:kill@tasks=3     SIGKILL worker 1 after it finished 3 tasks
    worker0:term@seconds=5   SIGTERM worker 0 five seconds after the job started
    worker1:stop@tasks=1     SIGSTOP worker 1 (it hangs: the task timeout must catch it)
    ps0:kill@seconds=20      SIGKILL parameter server 0
    worker:add@seconds=4     scale up by one worker
    worker:remove@seconds=9  scale down by one worker (the newest gets SIGTERM)

Each action fires once. `tasks=` counts tasks the named worker finished.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_ITEM = re.compile(
    r"^(?P<role>worker|ps)(?P<index>\d+)?:(?P<action>kill|term|stop|add|remove)"
    r"@(?P<trigger>tasks|seconds)=(?P<value>\d+(\.\d+)?)$"
)
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

    def __str__(self) -> str:
        target = f"{self.role}{'' if self.index is None else self.index}"
        value = int(self.value) if self.value.is_integer() else self.value
        return f"{target}:{self.action}@{self.trigger}={value}"


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
                "worker1:kill@tasks=3, worker0:term@seconds=5, ps0:kill@seconds=20, "
                "worker:add@seconds=4 (actions kill|term|stop|add|remove, triggers tasks|seconds)"
            )
        role, index, action = match["role"], match["index"], match["action"]
        if action in _SIGNAL_ACTIONS and index is None:
            raise ChaosSpecError(f"--chaos: {item!r} must name one process, e.g. {role}0")
        if action in ("add", "remove") and (role != "worker" or index is not None):
            raise ChaosSpecError(f"--chaos: {item!r}: add/remove apply to `worker` only")
        if match["trigger"] == "tasks" and role != "worker":
            raise ChaosSpecError(f"--chaos: {item!r}: tasks= triggers apply to workers only")
        if match["trigger"] == "tasks" and index is None:
            raise ChaosSpecError(f"--chaos: {item!r}: tasks= needs a worker index")
        actions.append(
            ChaosAction(
                role,
                None if index is None else int(index),
                action,
                match["trigger"],
                float(match["value"]),
            )
        )
    return actions


def due_actions(
    actions: list[ChaosAction], elapsed_s: float, tasks_done: Mapping[int, int]
) -> list[ChaosAction]:
    """Actions whose trigger has come; each is marked fired and returned once."""
    ready = []
    for action in actions:
        if action.fired:
            continue
        if action.trigger == "seconds":
            hit = elapsed_s >= action.value
        else:
            hit = tasks_done.get(action.index, 0) >= action.value
        if hit:
            action.fired = True
            ready.append(action)
    return ready
