"""Pipeline parameters: what a user sets, with the description and choices the Argo UI shows,
and the checks that refuse bad values (alone or in combination) before anything runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from elasticdl.runtime.job_options import ARGO_ONLY as ARGO_ONLY_OPTION
from elasticdl.runtime.job_options import LOCAL_ONLY as LOCAL_ONLY_OPTION
from elasticdl.runtime.job_options import Option
from elasticdl.workflows.steps import BOTH, Engine
from elasticdl.workflows.values import Cond, Param, check_user_value, holds


@dataclass(frozen=True)
class PipelineParam:
    """One parameter of a pipeline, named like the `elasticdl` flag that sets it.

    `default` None means required. `enum` lists the values when they are a set (the Argo UI
    shows a drop-down). `kind` "int" values are checked and normalized (`"007"` -> `"7"`) so
    that conditions compare them as the steps read them; `minimum` and `maximum` bound them.
    `validate` checks a value further (it raises ValueError with one line naming the flag),
    e.g. a Kubernetes resource list parsed by the parser the job itself uses.
    """

    name: str
    description: str
    default: str | None = ""
    enum: tuple[str, ...] | None = None
    kind: str = "str"
    minimum: int | None = None
    argo_only: bool = False
    """Only meaningful on Argo (images, registries, pod settings); the local engine ignores
    it (and passes no step a flag made from it: see `Step.argo_args`)."""
    local_default: str | None = None
    """The default on the local engine when it differs from `default` (the Argo default, the
    one the Argo UI and `elasticdl render` show); None: the same."""
    maximum: int | None = None
    validate: Callable[[str], object] | None = None
    local_only: bool = False
    """A parameter of the local engine only (a job option Argo has no parameter for: the
    workflow templates stay what the Argo UI shows); the job step gets it as `local_args`."""

    @classmethod
    def of(cls, option: Option, **changes: object) -> PipelineParam:
        """The parameter a job option (runtime/job_options.py) is: its help as description,
        its default as text (the Argo one first), choices as enum, bounds, engines."""
        on_argo = option.default if option.argo_default is None else option.argo_default
        enum = option.choices
        if enum is None and option.type is bool and option.default is not None:
            enum = ("false", "true")
        kwargs: dict = {
            "description": option.help,
            "default": None if option.required else option.text(on_argo),
            "enum": enum,
            "kind": "int" if option.type is int else "str",
            "minimum": option.minimum if option.type is int else None,
            "maximum": option.maximum if option.type is int else None,
            "argo_only": option.engines == ARGO_ONLY_OPTION,
            "local_only": option.engines == LOCAL_ONLY_OPTION,
            "local_default": None if option.argo_default is None else option.text(option.default),
            "validate": option.validate,
        }
        kwargs.update(changes)
        return cls(option.name, **kwargs)

    def on(self, engine: Engine) -> bool:
        """Whether the pipeline has this parameter on `engine`."""
        return not (self.local_only and engine is Engine.ARGO)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"parameter name {self.name!r} must be an identifier")
        for default in (self.default, self.local_default):
            if self.enum is not None and default is not None and default not in self.enum:
                raise ValueError(f"parameter {self.name}: default {default!r} not in enum")

    @property
    def required(self) -> bool:
        return self.default is None

    def default_on(self, engine: Engine) -> str | None:
        """The default value on `engine` (None: required)."""
        if engine is Engine.LOCAL and self.local_default is not None:
            return self.local_default
        return self.default

    def check(self, value: str) -> str:
        """The value, normalized; ValueError with one line naming the flag if it is invalid."""
        if not isinstance(value, str):
            value = str(value)
        check_user_value(self.name, value)
        if self.enum is not None and value not in self.enum:
            raise ValueError(f"--{self.name} {value!r}: expected one of {', '.join(self.enum)}")
        if self.kind == "int" and not (value == "" and self.default == ""):
            try:
                number = int(value.strip())
            except ValueError:
                raise ValueError(f"--{self.name} {value!r} is not an integer") from None
            if self.minimum is not None and number < self.minimum:
                raise ValueError(f"--{self.name} must be >= {self.minimum}, got {number}")
            if self.maximum is not None and number > self.maximum:
                raise ValueError(f"--{self.name} must be <= {self.maximum}, got {number}")
            value = str(number)
        if self.validate is not None:
            self.validate(value)
        return value


@dataclass(frozen=True)
class Check:
    """A combination of values that is an error: `when` holds -> `message`. `engines`: where
    the check applies (say, only Argo needs an image)."""

    when: Cond
    message: str
    engines: frozenset[Engine] = BOTH

    def params(self) -> Iterator[str]:
        for leaf in self.when.refs():
            if isinstance(leaf, Param):
                yield leaf.name

    def problem(self, values: Mapping[str, str], engine: Engine) -> str | None:
        if engine not in self.engines:
            return None
        return self.message if holds(self.when, values) else None


@dataclass(frozen=True)
class Rule:
    """A check that a condition cannot express: `test(values)` returns the problem (one line)
    or None. `names` are the parameters it reads (checked to exist, like a Check's)."""

    names: tuple[str, ...]
    test: Callable[[Mapping[str, str]], str | None]
    engines: frozenset[Engine] = BOTH

    def params(self) -> Iterator[str]:
        yield from self.names

    def problem(self, values: Mapping[str, str], engine: Engine) -> str | None:
        if engine not in self.engines:
            return None
        return self.test(values)
