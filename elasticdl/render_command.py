"""`elasticdl render` and `elasticdl lint`: pipelines as Argo YAML, and offline validation.

    elasticdl render train|predict [job flags] [--kind workflow|template|cron]
        [--schedule CRON] [--timezone TZ] [--argo_version 4|3.7] [...]
    elasticdl render install [--namespace NS] [--max_concurrent_jobs N]   # | kubectl apply -f -
    elasticdl lint FILE... [--argo_version 4|3.7|all]

The job flags are the pipeline's parameters (`elasticdl render train --help` lists them, with
the descriptions the Argo UI shows). `render` prints YAML on stdout; bad input is one line on
stderr and exit status 2. `lint` prints one line per problem and exits 1 if there is any.

Wiring (elasticdl/cli.py): `add_render_command(commands)`, `add_lint_command(commands)`, and
`return run(args)` when `args.command` is "render" or "lint".
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

COMMANDS = ("render", "lint")


def add_param_argument(group: Any, param: Any, note: str = "") -> None:
    """Pipeline parameter `param` as the flag --NAME (None when not given), its description,
    default and `note` in the help."""
    default = "required" if param.required else f"default {param.default!r}"
    group.add_argument(
        f"--{param.name}",
        default=None,
        choices=list(param.enum) if param.enum else None,
        help=f"{param.description} ({default}{note})",
    )


def _add_argo_options(parser: argparse.ArgumentParser) -> None:
    from elasticdl.workflows.argo import ARGO_VERSIONS, ArgoOptions

    d = ArgoOptions()
    argo = parser.add_argument_group("Argo objects (render-time settings)")
    argo.add_argument(
        "--argo_version",
        default=d.argo_version,
        choices=ARGO_VERSIONS,
        help="Argo Workflows version to target (the output is valid for both)",
    )
    argo.add_argument("--namespace", default=None, help="metadata.namespace of every object")
    add_workflow_settings(argo)


def add_render_command(commands: argparse._SubParsersAction) -> None:
    """Add `render train|predict|install` to the `elasticdl` subcommands."""
    from elasticdl.workflows.definitions import PIPELINES, pipeline
    from elasticdl.workflows.render import KINDS, SEMAPHORE
    from elasticdl.workflows.steps import Engine

    render = commands.add_parser(
        "render",
        help="print a pipeline as Argo Workflows YAML (Workflow, WorkflowTemplate, CronWorkflow)",
        description="Print a pipeline as Argo Workflows YAML: a Workflow for `argo submit`, a "
        "WorkflowTemplate for the Argo UI, a CronWorkflow, or everything `kubectl apply` needs.",
    )
    sub = render.add_subparsers(dest="render_what", required=True, metavar="WHAT")
    for name in PIPELINES:
        spec = pipeline(name)
        parser = sub.add_parser(
            name,
            help=spec.description,
            description=f"{spec.description}. Job flags set the pipeline's parameters.",
        )
        job = parser.add_argument_group("job flags (pipeline parameters)")
        for param in spec.params_on(Engine.ARGO):
            add_param_argument(job, param)
        out = parser.add_argument_group("what to print")
        out.add_argument(
            "--kind",
            default="workflow",
            choices=KINDS,
            help="what to print: a Workflow to submit, a WorkflowTemplate for the Argo UI, or "
            "a CronWorkflow (with --schedule)",
        )
        out.add_argument(
            "--schedule",
            action="append",
            default=None,
            help="with --kind cron: a cron expression (repeat for several)",
        )
        out.add_argument("--timezone", default="UTC", help="with --kind cron: IANA time zone")
        out.add_argument(
            "--starting_deadline_seconds",
            type=int,
            default=600,
            help="with --kind cron: how late a missed run may still start",
        )
        out.add_argument("--name", default=None, help="with --kind cron: the CronWorkflow's name")
        out.add_argument(
            "--semaphore",
            action="store_true",
            help=f"cap concurrent runs with the semaphore of ConfigMap {SEMAPHORE[0]} "
            "(see render install --max_concurrent_jobs)",
        )
        _add_argo_options(parser)
    install = sub.add_parser(
        "install",
        help="both WorkflowTemplates plus their ServiceAccount, Role and RoleBinding",
        description="Print the WorkflowTemplates elasticdl-train and elasticdl-predict and the "
        "least-privilege RBAC their pods need, for `kubectl apply -f -`.",
    )
    install.add_argument(
        "--max_concurrent_jobs",
        type=int,
        default=None,
        help="also create a semaphore ConfigMap and make the templates wait for a free slot",
    )
    _add_argo_options(install)


def add_lint_command(commands: argparse._SubParsersAction) -> None:
    """Add `lint FILE...` to the `elasticdl` subcommands."""
    from elasticdl.workflows.lint import KUBERNETES_VERSION

    lint = commands.add_parser(
        "lint",
        help="validate Argo and Kubernetes YAML offline (schemas plus a semantic lint)",
        description="Validate YAML files offline: Argo objects against the Argo CRD schemas "
        "(strict: unknown keys are errors), Argo's published JSON Schema (what editors and the "
        "argo-workflows SDK check) and a semantic lint (unknown templates, dependency cycles, "
        "undeclared parameters, outputs of tasks that may be skipped...); other Kubernetes "
        "objects with kubernetes-validate.",
    )
    lint.add_argument("files", nargs="+", metavar="FILE", help="YAML file, or - for stdin")
    lint.add_argument(
        "--argo_version",
        default="4",
        choices=["4", "3.7", "all"],
        help="Argo Workflows version whose schemas the Argo objects are checked against",
    )
    lint.add_argument(
        "--kubernetes_version",
        default=KUBERNETES_VERSION,
        help="Kubernetes version whose schemas other objects are checked against",
    )


def argo_options(args: argparse.Namespace, semaphore: Any = None, **overrides: Any) -> Any:
    """The render-time settings the flags give (`add_workflow_settings`, --argo_version,
    --namespace) as ArgoOptions, with `semaphore` and `overrides`."""
    from elasticdl.runtime.job_options import copy_fields
    from elasticdl.workflows.argo import ArgoOptions

    fields = copy_fields(ArgoOptions, args, semaphore=semaphore)
    return ArgoOptions(**{**fields, **overrides})


def render(args: argparse.Namespace) -> str:
    """The YAML `elasticdl render ...` prints; ValueError (one line) on bad input."""
    from elasticdl.workflows.argo import Schedule
    from elasticdl.workflows.definitions import pipeline
    from elasticdl.workflows.render import SEMAPHORE, install_objects, render_objects, to_yaml
    from elasticdl.workflows.steps import Engine

    if args.render_what == "install":
        objects = install_objects(argo_options(args), args.max_concurrent_jobs)
        return to_yaml(_validated(objects, args.argo_version))
    spec = pipeline(args.render_what)
    values = {p.name: getattr(args, p.name) for p in spec.params_on(Engine.ARGO)}
    schedule = None
    if args.kind == "cron":
        schedule = Schedule(
            tuple(args.schedule or ()),
            timezone=args.timezone,
            starting_deadline_seconds=args.starting_deadline_seconds,
            name=args.name,
        )
        _check_timezone(args.timezone)
    elif args.schedule:
        raise ValueError("--schedule applies to --kind cron only")
    options = argo_options(args, SEMAPHORE if args.semaphore else None)
    objects = render_objects(
        args.render_what, values, kind=args.kind, options=options, schedule=schedule
    )
    check_pod_paths(values)
    return to_yaml(_validated(objects, args.argo_version))


_PATHS = {"data": False, "validation_data": False, "trained_model": False, "output": True}
"""The pipeline parameters that name data or a model, and whether the pods write there."""


def check_pod_paths(values: dict[str, Any]) -> None:
    """ValueError (one line) for a local path the pipeline's pods could not reach: a path on
    this machine means nothing in a pod, unless a shared --volume (a claim, a hostPath) is
    mounted there (runtime/k8s/options.py `check_reachable_from_pods`)."""
    from elasticdl.runtime.k8s.options import check_reachable_from_pods

    for name, writable in _PATHS.items():
        value = values.get(name)
        if value:
            check_reachable_from_pods(f"--{name}", str(value), values.get("volume") or "", writable)


def _validated(objects: list[dict[str, Any]], argo_version: str) -> list[dict[str, Any]]:
    """The objects, once they pass `elasticdl lint` for the chosen Argo version: a value the
    API server would refuse (say --master_cpu two) is reported here, not at submission."""
    from elasticdl.workflows.lint import lint_documents

    try:
        problems = lint_documents(
            objects,
            source="rendered",
            argo_version=argo_version,
            kubernetes_schemas="if_installed",
        )
    except FileNotFoundError as err:
        print(f"elasticdl render: warning: not validated: {err}", file=sys.stderr)
        return objects
    if problems:
        raise ValueError(f"the rendered YAML does not validate: {problems[0]}")
    return objects


def _check_timezone(timezone: str) -> None:
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"--timezone {timezone!r} is not an IANA time zone") from None


def lint(args: argparse.Namespace) -> int:
    """Print one line per problem; 1 if there is any, else 0."""
    from elasticdl.workflows.lint import lint_file, lint_text

    versions = ["4", "3.7"] if args.argo_version == "all" else [args.argo_version]
    stdin = sys.stdin.read() if "-" in args.files else ""
    problems = []
    for version in versions:
        for name in args.files:
            kwargs = {"argo_version": version, "kubernetes_version": args.kubernetes_version}
            if name == "-":
                found = lint_text(stdin, source="<stdin>", **kwargs)
            else:
                found = lint_file(name, **kwargs)
            tag = f"[argo {version}] " if len(versions) > 1 else ""
            problems += [f"{tag}{p}" for p in found]
    for line in problems:
        print(line)
    if problems:
        print(f"elasticdl lint: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"elasticdl lint: {', '.join(args.files)}: no problems", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    """Run `render` or `lint` from parsed arguments; returns the exit status."""
    if args.command == "lint":
        return lint(args)
    try:
        text = render(args)
    except ValueError as err:
        print(f"elasticdl render: error: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


def add_workflow_settings(group: argparse._ArgumentGroup) -> None:
    """Render-time settings of the workflow objects, shared by `render` and `--engine argo`."""
    from elasticdl.workflows.argo import INSTALL_SERVICE_ACCOUNT, ArgoOptions

    d = ArgoOptions()
    argo = group
    argo.add_argument(
        "--service_account",
        default=d.service_account,
        help="ServiceAccount the pods run as (default: none named, the namespace's default; "
        f"`render install` creates {INSTALL_SERVICE_ACCOUNT} with the Role the pods need, "
        "and its templates run as it)",
    )
    argo.add_argument(
        "--deadline_seconds",
        type=int,
        default=d.deadline_seconds,
        help="activeDeadlineSeconds of the workflow",
    )
    argo.add_argument(
        "--job_deadline_seconds",
        type=int,
        default=d.job_deadline_seconds,
        help="activeDeadlineSeconds of the elastic job's step",
    )
    argo.add_argument(
        "--retry_limit",
        type=int,
        default=d.retry_limit,
        help="retries of a step after an infrastructure failure (evicted, deleted...)",
    )
    argo.add_argument("--master_cpu", default=d.master_cpu, help="CPU request of the master")
    argo.add_argument(
        "--master_memory", default=d.master_memory, help="memory request of the master"
    )
    argo.add_argument(
        "--output_artifact",
        action="store_true",
        help="also keep the model summary as an output artifact (it is an output parameter "
        "in any case): needs an artifact repository configured in Argo",
    )
    argo.add_argument(
        "--no_output_artifact",
        action="store_true",
        help="the default now (kept for earlier scripts)",
    )
