"""Values in a pipeline definition: what a step's argv element, image or condition is made of.

A step's arguments are not strings but small expressions over the pipeline's parameters, so the
same definition can be evaluated in Python (the local engine) and rendered for Argo:

=====================  ==========================================  ===========================
value                  Argo                                        local engine
=====================  ==========================================  ===========================
``Lit("--data=")``     the text                                    the text
``Param("data")``      ``{{workflow.parameters.data}}``            the parameter's value
``RunName()``          ``{{workflow.name}}``                       the local run id
``Namespace()``        ``{{workflow.namespace}}``                  ``""``
``Out("image")``       ``/tmp/elasticdl/outputs/image``            a file in the step's folder
``TaskOutput(s, o)``   ``{{tasks.s.outputs.parameters.o}}``         what step ``s`` wrote
``Join(a, b, ...)``    the parts concatenated                      the parts concatenated
``Choice(c, a, b)``    ``{{=c ? a : b}}`` (an expr expression)     ``a if c else b``
=====================  ==========================================  ===========================

Conditions (``IsSet``, ``IsEmpty``, ``Is``, ``All``) render as expr expressions over
``workflow.parameters`` (``{{=workflow.parameters.sql != ''}}``), never by pasting a value into
expression text: a user value is data to Argo, not code (see ``check_user_value``).

Two rules keep Argo's ``{{...}}`` substitution from ever seeing a tag that a user value helped
to form: a literal has no braces, quotes or backslashes, and two references are never adjacent
in a ``Join`` (a literal separates them), so text a user typed cannot join with its neighbour
into ``{{``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

ARGO_OUTPUT_DIR = "/tmp/elasticdl/outputs"
"""Where a step's container writes the files Argo reads as output parameters and artifacts."""

_LITERAL_FORBIDDEN = set("{}'\"\\\n\r")


class Value:
    """Base of the value expressions; see the module documentation."""

    def refs(self) -> Iterator[Value]:
        """The leaves that are not literals (parameters, run name, outputs...)."""
        return iter(())

    def conditions(self) -> Iterator[Cond]:
        return iter(())


@dataclass(frozen=True)
class Lit(Value):
    text: str

    def __post_init__(self) -> None:
        bad = sorted(_LITERAL_FORBIDDEN & set(self.text))
        if bad:
            raise ValueError(f"literal {self.text!r} contains {bad}: not allowed in a definition")


@dataclass(frozen=True)
class Param(Value):
    name: str

    def refs(self) -> Iterator[Value]:
        yield self


@dataclass(frozen=True)
class RunName(Value):
    """The run's unique name: the Workflow's name on Argo, a generated id locally."""

    def refs(self) -> Iterator[Value]:
        yield self


@dataclass(frozen=True)
class Namespace(Value):
    """The Kubernetes namespace the workflow runs in (Argo only)."""

    def refs(self) -> Iterator[Value]:
        yield self


@dataclass(frozen=True)
class Out(Value):
    """The path of a file the step writes for its declared output `name`."""

    name: str

    def refs(self) -> Iterator[Value]:
        yield self


@dataclass(frozen=True)
class TaskOutput(Value):
    """Output `name` of an earlier step; "" when that step was skipped (or runs on Argo only)."""

    step: str
    name: str

    def refs(self) -> Iterator[Value]:
        yield self


@dataclass(frozen=True)
class Join(Value):
    parts: tuple[Value, ...]

    def __init__(self, *parts: Value) -> None:
        object.__setattr__(self, "parts", tuple(parts))
        for left, right in zip(self.parts, self.parts[1:], strict=False):
            if not isinstance(left, Lit) and not isinstance(right, Lit):
                raise ValueError(
                    f"Join: {left!r} and {right!r} are adjacent; separate references by a "
                    "literal so user text cannot combine into '{{'"
                )

    def refs(self) -> Iterator[Value]:
        for part in self.parts:
            yield from part.refs()

    def conditions(self) -> Iterator[Cond]:
        for part in self.parts:
            yield from part.conditions()


@dataclass(frozen=True)
class Choice(Value):
    cond: Cond
    then: Value
    otherwise: Value

    def refs(self) -> Iterator[Value]:
        yield from self.cond.refs()
        yield from self.then.refs()
        yield from self.otherwise.refs()

    def conditions(self) -> Iterator[Cond]:
        yield self.cond
        yield from self.then.conditions()
        yield from self.otherwise.conditions()


# -- conditions --------------------------------------------------------------------------------


class Cond:
    """A condition over parameters: a step's `when`, a Choice, a pipeline check."""

    def refs(self) -> Iterator[Value]:
        return iter(())

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class IsSet(Cond):
    param: str

    def refs(self) -> Iterator[Value]:
        yield Param(self.param)

    def describe(self) -> str:
        return f"--{self.param} is given"


@dataclass(frozen=True)
class IsEmpty(Cond):
    param: str

    def refs(self) -> Iterator[Value]:
        yield Param(self.param)

    def describe(self) -> str:
        return f"--{self.param} is empty"


@dataclass(frozen=True)
class Is(Cond):
    param: str
    value: str

    def __post_init__(self) -> None:
        Lit(self.value)  # the same character rules as literals: it is rendered into expr text

    def refs(self) -> Iterator[Value]:
        yield Param(self.param)

    def describe(self) -> str:
        return f"--{self.param} is {self.value}"


@dataclass(frozen=True)
class All(Cond):
    conds: tuple[Cond, ...] = field(default=())

    def __init__(self, *conds: Cond) -> None:
        object.__setattr__(self, "conds", tuple(conds))

    def refs(self) -> Iterator[Value]:
        for cond in self.conds:
            yield from cond.refs()

    def describe(self) -> str:
        return " and ".join(c.describe() for c in self.conds)


# -- local evaluation --------------------------------------------------------------------------


@dataclass
class LocalContext:
    """What the local engine knows when it evaluates a value."""

    params: Mapping[str, str]
    run_id: str
    output_path: Callable[[str], str]
    """Path of the current step's output file `name`."""
    outputs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """step name -> output name -> value, for the steps that ran."""


def holds(cond: Cond, params: Mapping[str, str]) -> bool:
    """Evaluate a condition on parameter values (all strings)."""
    if isinstance(cond, IsSet):
        return params.get(cond.param, "") != ""
    if isinstance(cond, IsEmpty):
        return params.get(cond.param, "") == ""
    if isinstance(cond, Is):
        return params.get(cond.param, "") == cond.value
    if isinstance(cond, All):
        return all(holds(c, params) for c in cond.conds)
    raise TypeError(f"unknown condition {cond!r}")


def evaluate(value: Value, ctx: LocalContext) -> str:
    """The string the local engine uses for `value`."""
    if isinstance(value, Lit):
        return value.text
    if isinstance(value, Param):
        return ctx.params.get(value.name, "")
    if isinstance(value, RunName):
        return ctx.run_id
    if isinstance(value, Namespace):
        return ""
    if isinstance(value, Out):
        return ctx.output_path(value.name)
    if isinstance(value, TaskOutput):
        return ctx.outputs.get(value.step, {}).get(value.name, "")
    if isinstance(value, Join):
        return "".join(evaluate(part, ctx) for part in value.parts)
    if isinstance(value, Choice):
        chosen = value.then if holds(value.cond, ctx.params) else value.otherwise
        return evaluate(chosen, ctx)
    raise TypeError(f"unknown value {value!r}")


# -- Argo rendering ----------------------------------------------------------------------------


def _quote_expr(text: str) -> str:
    Lit(text)  # checked: no quotes or backslashes to escape
    return f"'{text}'"


class ArgoNames:
    """How the leaves of a value are spelled in Argo, in one of two scopes.

    *global*: parameters as ``workflow.parameters.x`` (substituted in Argo's first pass over a
    template, together with ``workflow.name``); *inputs*: every leaf as an input parameter of
    the step's template (``inputs.parameters.x``), for values that mix earlier steps' outputs
    with parameters: an expression must see all its variables in one pass.
    """

    def __init__(self, inputs: Mapping[Value, str] | None = None) -> None:
        self.inputs = dict(inputs or {})

    def variable(self, leaf: Value) -> str:
        """The leaf as a variable name (without braces)."""
        if leaf in self.inputs:
            return f"inputs.parameters.{self.inputs[leaf]}"
        if isinstance(leaf, Param):
            return f"workflow.parameters.{leaf.name}"
        if isinstance(leaf, RunName):
            return "workflow.name"
        if isinstance(leaf, Namespace):
            return "workflow.namespace"
        if isinstance(leaf, TaskOutput):
            return f"tasks.{leaf.step}.outputs.parameters.{leaf.name}"
        raise TypeError(f"{leaf!r} has no Argo variable")

    def tag(self, value: Value) -> str:
        """`value` as Argo text: literals, ``{{variable}}`` tags and ``{{=expr}}`` tags."""
        if isinstance(value, Lit):
            return value.text
        if isinstance(value, Out):
            return f"{ARGO_OUTPUT_DIR}/{value.name}"
        if isinstance(value, Join):
            return "".join(self.tag(part) for part in value.parts)
        if isinstance(value, Choice):
            return "{{=" + self.expr(value) + "}}"
        return "{{" + self.variable(value) + "}}"

    def expr(self, value: Value) -> str:
        """`value` as an expr-language expression."""
        if isinstance(value, Lit):
            return _quote_expr(value.text)
        if isinstance(value, Out):
            return _quote_expr(f"{ARGO_OUTPUT_DIR}/{value.name}")
        if isinstance(value, Join):
            return " + ".join(self._operand(part) for part in value.parts)
        if isinstance(value, Choice):
            then, otherwise = self._operand(value.then), self._operand(value.otherwise)
            return f"{self.cond(value.cond)} ? {then} : {otherwise}"
        return self.variable(value)

    def _operand(self, value: Value) -> str:
        text = self.expr(value)
        return f"({text})" if isinstance(value, Choice) else text

    def cond(self, cond: Cond) -> str:
        if isinstance(cond, IsSet):
            return f"{self.variable(Param(cond.param))} != ''"
        if isinstance(cond, IsEmpty):
            return f"{self.variable(Param(cond.param))} == ''"
        if isinstance(cond, Is):
            return f"{self.variable(Param(cond.param))} == {_quote_expr(cond.value)}"
        if isinstance(cond, All):
            return " && ".join(f"({self.cond(c)})" for c in cond.conds)
        raise TypeError(f"unknown condition {cond!r}")

    def when(self, cond: Cond) -> str:
        """A DAG task's `when`: an expression tag that Argo evaluates to true or false."""
        return "{{=" + self.cond(cond) + "}}"


def has_task_output(value: Value) -> bool:
    return any(isinstance(leaf, TaskOutput) for leaf in value.refs())


# -- user values -------------------------------------------------------------------------------


def check_user_value(name: str, value: str) -> None:
    """Refuse a parameter value that Argo would read as a template tag.

    Argo substitutes ``{{...}}`` in a template in two passes (global parameters, then the
    template's inputs), and the second pass scans the text the first one inserted: a value
    holding ``{{inputs.parameters.x}}`` or ``{{=expression}}`` would be evaluated. Argo has no
    escape for ``{{``, so such a value is refused here with one clear line instead of being
    rewritten into something the user did not write. Everything else (quotes, newlines, ``$``,
    backquotes, ``;``...) is passed as data: argv elements never go through a shell.
    """
    if "{{" in value:
        raise ValueError(
            f"--{name}: the value contains '{{{{', which Argo Workflows would evaluate as a "
            "template expression (it has no escape for it); remove it or store the text "
            "where the step reads it (a file or table) and pass its location"
        )
