"""Pipeline steps: one container entry point each, with its argv built from parameters."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

from elasticdl.workflows.values import Cond, Join, Lit, Out, Param, Value


class Retry(Enum):
    """How a step's pod is retried on Argo (the local engine never retries a step)."""

    INFRA = "infra"
    """Retry infrastructure failures only: pod deleted or evicted, node shut down, killed by a
    signal (exit 137/143) without an out-of-memory kill. A code error fails at once."""
    NONE = "none"


class Engine(Enum):
    LOCAL = "local"
    ARGO = "argo"


BOTH = frozenset({Engine.LOCAL, Engine.ARGO})
ARGO_ONLY = frozenset({Engine.ARGO})


@dataclass(frozen=True)
class StepOutput:
    """A small file the step writes (at `Out(name)`): an Argo output parameter, and also an
    output artifact when `artifact` is set."""

    name: str
    description: str
    artifact: bool = False


@dataclass(frozen=True)
class SecretMount:
    """A Kubernetes Secret (its name a value) mounted read-only; `items` maps key -> file."""

    volume: str
    secret: Value
    path: str
    items: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SecretEnv:
    """On Argo, environment variable `env` from a key of a Kubernetes Secret: parameter
    `param` holds NAME:KEY (`job_options.split_db_secret`); empty, the variable stays unset.
    The local engine sets nothing (there is no Secret)."""

    env: str
    param: str


@dataclass(frozen=True)
class Step:
    """One step of a pipeline.

    The container runs `command` (default ``python -m <module>``) with `args`, an argv list
    whose elements are values (never a shell string), followed on Argo by `argo_args`. The
    local engine parses `args` alone with the module's ``add_arguments`` and calls its
    ``run_from_args`` (which calls ``run``).
    """

    name: str
    description: str
    image: Value
    args: tuple[Value, ...]
    module: str | None = None
    command: tuple[str, ...] | None = None
    when: Cond | None = None
    after: tuple[str, ...] = ()
    retry: Retry = Retry.INFRA
    outputs: tuple[StepOutput, ...] = ()
    engines: frozenset[Engine] = BOTH
    long_running: bool = False
    """The elastic job's master: gets the job's deadline and resource requests on Argo (both
    render-time settings: Kubernetes checks quantities before Argo could substitute them)."""
    secrets: tuple[SecretMount, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(("PYTHONUNBUFFERED", "1"),))
    argo_args: tuple[Value, ...] = ()
    """More argv elements, on Argo only: flags that mean nothing on this machine (the pods'
    image, resources, node selector... of a job whose master creates pods). The local engine
    never passes them, so the step's local argv stays what the local run needs."""
    secret_env: tuple[SecretEnv, ...] = ()
    local_args: tuple[Value, ...] = ()
    """More argv elements on the local engine only: the job options that are parameters of
    the local engine alone (`PipelineParam.local_only`: chaos, seed, ...)."""

    def __post_init__(self) -> None:
        if (self.module is None) == (self.command is None):
            raise ValueError(f"step {self.name}: give exactly one of module and command")
        if not self.name.replace("-", "").isalnum() or not self.name[0].isalpha():
            raise ValueError(f"step name {self.name!r}: letters, digits and '-', letter first")
        declared = {o.name for o in self.outputs}
        for value in (self.image, *self.args, *self.argo_args, *self.local_args):
            for leaf in value.refs():
                if isinstance(leaf, Out) and leaf.name not in declared:
                    raise ValueError(f"step {self.name}: Out({leaf.name!r}) is not declared")

    @property
    def argv_command(self) -> tuple[str, ...]:
        if self.command is not None:
            return self.command
        return ("python", "-m", str(self.module))

    def values(self) -> Iterator[Value]:
        yield self.image
        yield from self.args
        yield from self.argo_args
        yield from self.local_args
        for mount in self.secrets:
            yield mount.secret
        for variable in self.secret_env:
            yield Param(variable.param)

    def argv_args(self, engine: Engine) -> tuple[Value, ...]:
        """The arguments on `engine`: `args`, plus `argo_args` on Argo, `local_args` here."""
        extra = self.argo_args if engine is Engine.ARGO else self.local_args
        return (*self.args, *extra)

    def runs_on(self, engine: Engine) -> bool:
        return engine in self.engines


def flag(name: str, value: Value) -> Value:
    """One argv element ``--name=value``: a value that starts with '-' stays a value."""
    return Join(Lit(f"--{name}="), value)
