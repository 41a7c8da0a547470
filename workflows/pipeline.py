"""A pipeline: parameters, steps and their order, the one definition both engines run."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from elasticdl.workflows.parameters import Check, PipelineParam, Rule
from elasticdl.workflows.steps import Engine, Step
from elasticdl.workflows.values import Param, TaskOutput


class PipelineError(ValueError):
    """A definition that cannot run (unknown step, cycle...), or bad parameter values."""


@dataclass(frozen=True)
class Pipeline:
    """`steps` run in dependency order (`Step.after`); `exit_step` runs at the end on Argo
    whatever happened (cleanup); `checks` are value combinations refused up front (`Check`s
    and, for what a condition cannot say, `Rule`s)."""

    name: str
    template_name: str
    description: str
    params: tuple[PipelineParam, ...]
    steps: tuple[Step, ...]
    exit_step: Step | None = None
    checks: tuple[Check | Rule, ...] = ()

    def __post_init__(self) -> None:
        self.validate()

    # -- structure -----------------------------------------------------------------------------

    def param(self, name: str) -> PipelineParam:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(name)

    def params_on(self, engine: Engine) -> tuple[PipelineParam, ...]:
        """The parameters the pipeline has on `engine` (Argo's omit the local-only ones)."""
        return tuple(p for p in self.params if p.on(engine))

    def step(self, name: str) -> Step:
        for step in self.all_steps():
            if step.name == name:
                return step
        raise KeyError(name)

    def all_steps(self) -> tuple[Step, ...]:
        return self.steps + ((self.exit_step,) if self.exit_step else ())

    def validate(self) -> None:
        """PipelineError naming the first inconsistency of the definition itself."""
        names = [p.name for p in self.params]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise PipelineError(f"pipeline {self.name}: duplicate parameters {duplicates}")
        step_names = [s.name for s in self.all_steps()]
        duplicates = sorted({n for n in step_names if step_names.count(n) > 1})
        if duplicates:
            raise PipelineError(f"pipeline {self.name}: duplicate steps {duplicates}")
        known = set(names)
        by_name = {s.name: s for s in self.steps}
        for step in self.all_steps():
            for dep in step.after:
                if dep not in by_name:
                    raise PipelineError(f"step {step.name}: runs after unknown step {dep!r}")
            if step is self.exit_step and step.after:
                raise PipelineError(f"exit step {step.name} cannot depend on steps")
            conds = [step.when] if step.when else []
            for value in step.values():
                conds += list(value.conditions())
                for leaf in value.refs():
                    if isinstance(leaf, Param) and leaf.name not in known:
                        raise PipelineError(f"step {step.name}: unknown parameter {leaf.name!r}")
                    if isinstance(leaf, TaskOutput):
                        self._check_task_output(step, leaf, by_name)
            for cond in conds:
                for leaf in cond.refs():
                    if isinstance(leaf, Param) and leaf.name not in known:
                        raise PipelineError(f"step {step.name}: unknown parameter {leaf.name!r}")
        on_argo = {p.name for p in self.params_on(Engine.ARGO)}
        for step in self.all_steps():
            if not step.runs_on(Engine.ARGO):
                continue
            for value in (step.image, *step.argv_args(Engine.ARGO)):
                for leaf in value.refs():
                    if isinstance(leaf, Param) and leaf.name not in on_argo:
                        raise PipelineError(
                            f"step {step.name}: parameter {leaf.name!r} is the local engine's "
                            "only; pass it in local_args"
                        )
        for check in self.checks:
            for name in check.params():
                if name not in known:
                    raise PipelineError(f"check {check!r}: unknown parameter {name}")
        self.order()

    def _check_task_output(self, step: Step, ref: TaskOutput, by_name: dict[str, Step]) -> None:
        if ref.step not in by_name:
            raise PipelineError(f"step {step.name}: output of unknown step {ref.step!r}")
        if ref.name not in {o.name for o in by_name[ref.step].outputs}:
            raise PipelineError(f"step {step.name}: step {ref.step} has no output {ref.name!r}")
        if ref.step not in self._ancestors(step.name, by_name):
            raise PipelineError(
                f"step {step.name} reads an output of {ref.step} but does not run after it"
            )
        if by_name[ref.step].when is not None:
            raise PipelineError(
                f"step {step.name} reads an output of {ref.step}, which is skipped unless "
                f"{by_name[ref.step].when.describe()} (Argo 4 may hang on that): read it from "
                "a step that always runs"
            )

    def _ancestors(self, name: str, by_name: dict[str, Step]) -> set[str]:
        seen: set[str] = set()
        todo = list(by_name[name].after) if name in by_name else []
        while todo:
            dep = todo.pop()
            if dep not in seen:
                seen.add(dep)
                todo += list(by_name[dep].after)
        return seen

    def order(self) -> list[Step]:
        """Steps in an order that respects `after`, declaration order among equals."""
        done: list[Step] = []
        placed: set[str] = set()
        pending = list(self.steps)
        while pending:
            ready = [s for s in pending if set(s.after) <= placed]
            if not ready:
                cycle = ", ".join(s.name for s in pending)
                raise PipelineError(f"pipeline {self.name}: steps depend on each other: {cycle}")
            step = ready[0]
            done.append(step)
            placed.add(step.name)
            pending.remove(step)
        return done

    def with_step(self, step: Step) -> Pipeline:
        """A copy with one more step (validated)."""
        return dataclasses.replace(self, steps=(*self.steps, step))

    # -- values --------------------------------------------------------------------------------

    def resolve(
        self,
        values: Mapping[str, str | None],
        *,
        engine: Engine,
        require: bool = True,
        run_checks: bool = True,
    ) -> dict[str, str]:
        """Every parameter's value (given or default), checked; PipelineError on the first
        problem, in one line naming the flag. `require=False` leaves required parameters
        without a value out (a WorkflowTemplate asks for them at submission)."""
        known = {p.name: p for p in self.params_on(engine)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise PipelineError(
                f"{self.name} pipeline: unknown parameter(s) {', '.join(unknown)}; "
                f"known: {', '.join(known)}"
            )
        resolved: dict[str, str] = {}
        missing = []
        for param in known.values():
            value = values.get(param.name)
            if value is None:
                value = param.default_on(engine)
            if value is None:
                if param.argo_only and engine is Engine.LOCAL:
                    continue
                missing.append(param.name)
                continue
            try:
                resolved[param.name] = param.check(value)
            except ValueError as err:
                raise PipelineError(str(err)) from None
        if missing and require:
            raise PipelineError(
                f"{self.name} pipeline: missing required "
                + ", ".join(f"--{name}" for name in missing)
            )
        if run_checks:
            complete = {p.name: resolved.get(p.name, "") for p in self.params}
            for check in self.checks:
                problem = check.problem(complete, engine)
                if problem:
                    raise PipelineError(problem)
        return resolved
