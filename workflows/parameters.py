"""Pipeline parameters: what a user sets, with the description and choices the Argo UI shows."""

from __future__ import annotations

from dataclasses import dataclass

from elasticdl.workflows.values import Cond, check_user_value, holds


@dataclass(frozen=True)
class PipelineParam:
    """One parameter of a pipeline, named like the `elasticdl` flag that sets it.

    `default` None means required. `enum` lists the values when they are a set (the Argo UI
    shows a drop-down). `kind` "int" values are checked and normalized (`"007"` -> `"7"`) so
    that conditions compare them as the steps read them; `minimum` bounds them.
    """

    name: str
    description: str
    default: str | None = ""
    enum: tuple[str, ...] | None = None
    kind: str = "str"
    minimum: int | None = None
    argo_only: bool = False
    """Only meaningful on Argo (images, registries); the local engine ignores it."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"parameter name {self.name!r} must be an identifier")
        if self.enum is not None and self.default is not None and self.default not in self.enum:
            raise ValueError(f"parameter {self.name}: default {self.default!r} not in enum")

    @property
    def required(self) -> bool:
        return self.default is None

    def check(self, value: str) -> str:
        """The value, normalized; ValueError with one line naming the flag if it is invalid."""
        if not isinstance(value, str):
            value = str(value)
        check_user_value(self.name, value)
        if self.enum is not None and value not in self.enum:
            raise ValueError(f"--{self.name} {value!r}: expected one of {', '.join(self.enum)}")
        if self.kind == "int":
            try:
                number = int(value.strip())
            except ValueError:
                raise ValueError(f"--{self.name} {value!r} is not an integer") from None
            if self.minimum is not None and number < self.minimum:
                raise ValueError(f"--{self.name} must be >= {self.minimum}, got {number}")
            return str(number)
        return value


@dataclass(frozen=True)
class Check:
    """A combination of values that is an error: `when` holds -> `message`."""

    when: Cond
    message: str
    argo_only: bool = False

    def problem(self, values: dict[str, str], argo: bool) -> str | None:
        if self.argo_only and not argo:
            return None
        return self.message if holds(self.when, values) else None
