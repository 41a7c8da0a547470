"""The local engine: run a pipeline definition on this machine, step by step.

Each step's argv is evaluated from the same definition the Argo builder renders, parsed by the
step module's own `add_arguments` (the parser its container's `main` uses) and handed to its
`run_from_args`, which calls `run(...)`. Steps that only make sense on Argo (building an image,
resolving one, deleting pods) are skipped, and so is a step whose `when` does not hold, exactly
as on Argo. The first failing step stops the run.

There is no cluster here: the elastic job's master runs in this process and starts its
parameter servers and workers as local processes (`--instance_manager local`, the local
default; `kubernetes` is refused before any step runs), and a step's Argo-only arguments (the
Kubernetes flags, `Step.argo_args`) are not passed; its local-only ones (`Step.local_args`: the
job options the Argo templates do not show, such as --chaos or --seed) are.

`elasticdl train|predict` on the local engine run their pipeline through here
(elasticdl/local_engine.py), with `raise_errors` so bad input reads as one line.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticdl.runtime.job_options import RaisingParser
from elasticdl.workflows.pipeline import Pipeline, PipelineError
from elasticdl.workflows.steps import Engine, Step
from elasticdl.workflows.values import LocalContext, evaluate, holds

log = logging.getLogger("elasticdl.workflows")


@dataclass
class StepRun:
    name: str
    status: str
    """succeeded | skipped | failed"""
    reason: str = ""
    argv: list[str] = field(default_factory=list)
    result: Any = None
    outputs: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class LocalRun:
    pipeline: str
    run_id: str
    status: str
    steps: list[StepRun]
    error: str = ""

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def step(self, name: str) -> StepRun:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    @property
    def ran(self) -> list[str]:
        return [s.name for s in self.steps if s.status != "skipped"]


def step_parser(step: Step) -> argparse.ArgumentParser:
    """The step module's own parser (its `add_arguments`), raising ValueError on bad argv."""
    module = importlib.import_module(str(step.module))
    parser = RaisingParser(prog=str(step.module))
    module.add_arguments(parser)
    return parser


def new_run_id(pipeline: str) -> str:
    return f"{pipeline}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def run_local(
    pipeline: Pipeline,
    values: Mapping[str, str | None],
    *,
    run_id: str | None = None,
    work_dir: str | None = None,
    raise_errors: bool = False,
) -> LocalRun:
    """Run `pipeline` with parameter `values` (strings, as flags give them).

    Bad values raise PipelineError before any step runs. `work_dir` holds the steps' output
    files and, when the pipeline's `work_dir` parameter is empty, its intermediate data.
    A step's bad input (ValueError, OSError) fails the run, or with `raise_errors` (what the
    `elasticdl` commands use) propagates as it is, for the caller's one-line error.
    """
    params = pipeline.resolve(values, engine=Engine.LOCAL)
    run_id = run_id or new_run_id(pipeline.name)
    root = Path(work_dir or tempfile.mkdtemp(prefix=f"elasticdl-{pipeline.name}-"))
    if "work_dir" in params and not params["work_dir"]:
        params["work_dir"] = str((root / "work").resolve())
    runs: list[StepRun] = []
    outputs: dict[str, dict[str, str]] = {}
    for step in pipeline.order():
        if not step.runs_on(Engine.LOCAL):
            runs.append(StepRun(step.name, "skipped", "runs on Argo only"))
            continue
        if step.when is not None and not holds(step.when, params):
            runs.append(StepRun(step.name, "skipped", f"runs only when {step.when.describe()}"))
            continue
        step_dir = root / "steps" / step.name
        ctx = LocalContext(
            params=params,
            run_id=run_id,
            output_path=lambda name, d=step_dir: str(d / name),
            outputs=outputs,
        )
        argv = [evaluate(arg, ctx) for arg in step.argv_args(Engine.LOCAL)]
        run = _run_step(step, argv, raise_errors)
        if run.status == "succeeded":
            for output in step.outputs:
                path = step_dir / output.name
                if path.exists():
                    run.outputs[output.name] = path.read_text()
            outputs[step.name] = run.outputs
        runs.append(run)
        if run.status == "failed":
            return LocalRun(pipeline.name, run_id, "failed", runs, f"{step.name}: {run.reason}")
    return LocalRun(pipeline.name, run_id, "succeeded", runs)


def _run_step(step: Step, argv: list[str], raise_errors: bool = False) -> StepRun:
    # Debug only: the argv may hold a database URL with its password.
    log.debug("step %s: %s %s", step.name, step.module, " ".join(argv))
    t0 = time.monotonic()
    module = importlib.import_module(str(step.module))
    try:
        args = step_parser(step).parse_args(argv)
        result = module.run_from_args(args)
    except (ValueError, OSError, PipelineError) as err:
        if raise_errors:
            raise
        return StepRun(step.name, "failed", str(err), argv, seconds=time.monotonic() - t0)
    seconds = time.monotonic() - t0
    if getattr(result, "succeeded", True) is False:
        reason = getattr(result, "error", "") or "failed"
        return StepRun(step.name, "failed", reason, argv, result, seconds=seconds)
    return StepRun(step.name, "succeeded", "", argv, result, seconds=seconds)
