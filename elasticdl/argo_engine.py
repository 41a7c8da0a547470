"""`elasticdl train|predict --engine argo`: the job flags as an Argo Workflow, submitted.

    elasticdl train --engine argo --argo_server https://argo.example.com:2746 [--token T]
        [--namespace argo] [--wait [--wait_timeout S]] [--argo_ui_url URL] [job flags]

The job flags are parsed by the command's own parser; `add_argo_arguments` adds the Argo
flags and the pipeline parameters the job flags lack (--image, --zoo_context, --work_dir...).
The Workflow is the one `elasticdl render train|predict` prints for the same values (same
builder, same checks, validated against the Argo schemas), with `--job_name X` as its
generateName prefix ``X-``. A job flag the Argo pipeline has no parameter for (--loss,
--chaos...) set to anything but its default is an error, not silently dropped.

Output: ``workflow NAME submitted to namespace NS`` and the workflow's Argo UI URL on stdout;
with --wait, each phase change (``NAME: Running``). Errors: one line on stderr, never the token.

Exit status: 0 submitted (with --wait: Succeeded); 1 submitted but not succeeded (Failed,
Error, still running at --wait_timeout, or unreadable while waiting); 2 nothing submitted
(bad input, or the server refused or could not be reached); 130 interrupted while waiting
(the workflow goes on).

Wiring: ``add_argo_arguments(parser, "train")`` next to ``add_train_arguments(parser)`` (and
"predict" next to ``add_inference_arguments(parser, "predict")``), then
``return submit_train(args)`` / ``return submit_predict(args)`` when ``args.engine == "argo"``
(and, with the local engine, refuse `argo_only_flags(args, job)` if any).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from elasticdl.workflows.steps import Engine
from elasticdl.workflows.submit import (
    ArgoError,
    ArgoWaitTimeout,
    print_phase,
    submit_workflow,
    wait_for,
)

JOBS = ("train", "predict", "evaluate")
TOKEN_ENV = "ARGO_TOKEN"
DEFAULT_NAMESPACE = "argo"
POLL_S = 2.0
"""First interval between status requests with --wait (it backs off to MAX_POLL_S)."""
MAX_POLL_S = 30.0
WAIT_MARGIN_S = 600
"""--wait_timeout defaults to the workflow's --deadline_seconds plus this."""
_MAX_PREFIX = 57
"""Longest --job_name: the workflow name (prefix, '-', 5 random characters) is a label value
on Argo's own step pods (workflows.argoproj.io/workflow), at most 63 characters."""

_ARGO_DESTS = frozenset(
    {
        "argo_server",
        "token",
        "namespace",
        "wait",
        "wait_timeout",
        "argo_ui_url",
        "insecure_skip_verify",
        "argo_version",
        "service_account",
        "deadline_seconds",
        "job_deadline_seconds",
        "retry_limit",
        "master_cpu",
        "master_memory",
        "no_output_artifact",
        "output_artifact",
        "semaphore",
    }
)
_NEUTRAL_DESTS = frozenset({"help", "engine", "job_name", "log_level", "command"})
"""Flags that mean the same on both engines, or are handled apart (--job_name)."""


def add_argo_arguments(parser: argparse.ArgumentParser, job: str = "train") -> None:
    """Add the Argo flags (--argo_server, --token, --namespace, --wait, --argo_ui_url, ...)
    and the `job` pipeline's parameters the parser lacks. Adding twice is a no-op."""
    from elasticdl.workflows.argo import ARGO_VERSIONS, ArgoOptions
    from elasticdl.workflows.definitions import pipeline
    from elasticdl.workflows.render import SEMAPHORE

    if job not in JOBS:
        raise ValueError(f"no Argo pipeline for {job!r}; known: {', '.join(JOBS)}")
    if "--argo_server" in parser._option_string_actions:
        return
    argo = parser.add_argument_group("Argo Workflows (with --engine argo)")
    argo.add_argument(
        "--argo_server",
        default=None,
        metavar="URL",
        help="base URL of the Argo server, e.g. https://argo.example.com:2746",
    )
    argo.add_argument(
        "--token",
        default=None,
        help=f"bearer token for the Argo server (default: ${TOKEN_ENV}, e.g. from `argo auth "
        "token`; prefer the variable: other users can read a flag with ps)",
    )
    argo.add_argument(
        "--namespace",
        default=DEFAULT_NAMESPACE,
        help=f"namespace to run the workflow in (default {DEFAULT_NAMESPACE})",
    )
    argo.add_argument(
        "--wait",
        action="store_true",
        help="wait until the workflow ends, printing its phase changes; exit 0 only if it "
        "succeeded",
    )
    argo.add_argument(
        "--wait_timeout",
        type=float,
        default=None,
        help="with --wait: seconds to wait at most (default: --deadline_seconds + "
        f"{WAIT_MARGIN_S})",
    )
    argo.add_argument(
        "--argo_ui_url",
        default=None,
        metavar="URL",
        help="base URL of the Argo UI for the printed link (default: --argo_server)",
    )
    argo.add_argument(
        "--insecure_skip_verify",
        action="store_true",
        help="do not verify the Argo server's TLS certificate",
    )
    d = ArgoOptions()
    argo.add_argument(
        "--argo_version",
        default=d.argo_version,
        choices=ARGO_VERSIONS,
        help="Argo Workflows version of the server (the workflow is valid for both)",
    )
    from elasticdl.render_command import add_param_argument, add_workflow_settings

    add_workflow_settings(argo)
    argo.add_argument(
        "--semaphore",
        action="store_true",
        help=f"wait for a slot of the semaphore in ConfigMap {SEMAPHORE[0]} "
        "(see elasticdl render install --max_concurrent_jobs)",
    )
    for param in pipeline(job).params_on(Engine.ARGO):
        if f"--{param.name}" in parser._option_string_actions:
            continue
        add_param_argument(argo, param, "; Argo only")


def submit_train(args: argparse.Namespace) -> int:
    """`elasticdl train --engine argo`: submit the train Workflow; the exit status."""
    return submit_job(args, "train")


def submit_predict(args: argparse.Namespace) -> int:
    """`elasticdl predict --engine argo`: submit the predict Workflow; the exit status."""
    return submit_job(args, "predict")


def _job_parser(job: str) -> argparse.ArgumentParser:
    """A parser with the command's job flags plus the Argo ones: defaults and destinations."""
    parser = argparse.ArgumentParser(add_help=False)
    if job == "train":
        from elasticdl.train_command import add_train_arguments

        add_train_arguments(parser)
    else:
        from elasticdl.predict_command import add_inference_arguments

        add_inference_arguments(parser, "predict")
    add_argo_arguments(parser, job)
    return parser


def argo_only_flags(args: argparse.Namespace, job: str) -> list[str]:
    """The flags set (to anything but their default) that only --engine argo uses: for the
    local engine to refuse rather than ignore them."""
    bare = argparse.ArgumentParser(add_help=False)
    if job == "train":
        from elasticdl.train_command import add_train_arguments

        add_train_arguments(bare)
    else:
        from elasticdl.predict_command import add_inference_arguments

        add_inference_arguments(bare, "predict")
    local = {a.dest for a in bare._actions}
    return [
        action.option_strings[0]
        for action in _job_parser(job)._actions
        if action.option_strings
        and action.dest not in local
        and getattr(args, action.dest, action.default) != action.default
    ]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def pipeline_values(args: argparse.Namespace, job: str) -> dict[str, str]:
    """The pipeline parameters the parsed flags set (train's --data is `training_data`);
    ValueError naming the job flags the Argo pipeline cannot take."""
    from elasticdl.workflows.definitions import pipeline

    parser = _job_parser(job)
    dest_of = {opt: a.dest for a in parser._actions for opt in a.option_strings}
    values: dict[str, str] = {}
    mapped = set()
    for param in pipeline(job).params_on(Engine.ARGO):
        dest = dest_of[f"--{param.name}"]
        mapped.add(dest)
        value = getattr(args, dest, None)
        if value is not None:
            values[param.name] = _text(value)
    local_only = []
    for action in parser._actions:
        dest = action.dest
        if not action.option_strings or dest in mapped | _ARGO_DESTS | _NEUTRAL_DESTS:
            continue
        if getattr(args, dest, action.default) != action.default:
            local_only.append(action.option_strings[0])
    if local_only:
        raise ValueError(
            f"{', '.join(local_only)}: not parameter(s) of the Argo {job} pipeline (the local "
            "engine's only); leave them out with --engine argo"
        )
    return values


def build_workflow(
    args: argparse.Namespace, job: str, values: dict[str, str] | None = None
) -> dict[str, Any]:
    """The Workflow (a dict) for the parsed flags (or the pipeline `values` given: a SQL
    statement's): `elasticdl render`'s, validated, with --job_name as generateName prefix;
    ValueError (one line) on bad input."""
    from elasticdl.render_command import argo_options, check_pod_paths
    from elasticdl.workflows.lint import lint_documents
    from elasticdl.workflows.render import SEMAPHORE, render_objects
    from elasticdl.workflows.submit import check_namespace

    namespace = check_namespace(getattr(args, "namespace", None) or DEFAULT_NAMESPACE)
    if values is None:
        values = pipeline_values(args, job)
    semaphore = SEMAPHORE if args.semaphore else None
    options = argo_options(args, semaphore, namespace=namespace)
    (workflow,) = render_objects(job, values, kind="workflow", options=options)
    check_pod_paths(values)
    job_name = getattr(args, "job_name", "") or ""
    if job_name:
        if len(job_name) > _MAX_PREFIX or not _is_dns_label(job_name):
            raise ValueError(
                f"--job_name {job_name!r}: with --engine argo it prefixes the workflow's name: "
                f"lowercase letters, digits and '-', at most {_MAX_PREFIX} characters"
            )
        workflow["metadata"]["generateName"] = f"{job_name}-"
    try:
        problems = lint_documents([workflow], source="rendered", argo_version=args.argo_version)
    except FileNotFoundError as err:
        print(f"elasticdl {job}: warning: not validated: {err}", file=sys.stderr)
        problems = []
    if problems:
        raise ValueError(f"the workflow does not validate: {problems[0]}")
    return workflow


def _is_dns_label(text: str) -> bool:
    import re

    return re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", text) is not None


def submit_job(args: argparse.Namespace, job: str, values: dict[str, str] | None = None) -> int:
    """Build, submit and (with --wait) follow the `job` Workflow (for the flags, or the
    pipeline `values` given); the exit status (module docs). Prints the name and UI URL on
    stdout, errors as one line on stderr."""
    prog = f"elasticdl {job}"
    token = getattr(args, "token", None) or os.environ.get(TOKEN_ENV) or None
    verify = not getattr(args, "insecure_skip_verify", False)
    try:
        if not getattr(args, "argo_server", None):
            raise ValueError(
                "--engine argo needs --argo_server URL (the Argo server's base URL, e.g. "
                "https://argo.example.com:2746)"
            )
        workflow = build_workflow(args, job, values)
        submitted = submit_workflow(
            workflow,
            args.argo_server,
            token,
            workflow["metadata"]["namespace"],
            verify,
            ui_url=getattr(args, "argo_ui_url", None),
        )
    except (ValueError, ArgoError) as err:
        print(f"{prog}: error: {_safe(err, token)}", file=sys.stderr)
        return 2
    print(f"workflow {submitted.name} submitted to namespace {submitted.namespace}", flush=True)
    print(submitted.ui_url, flush=True)
    if not getattr(args, "wait", False):
        return 0
    timeout = args.wait_timeout
    if timeout is None:
        timeout = float(args.deadline_seconds + WAIT_MARGIN_S)
    messages: list[str] = []
    report = print_phase(submitted.name)

    def on_phase(phase: str, message: str) -> None:
        messages.append(message)
        report(phase, message)

    try:
        phase = wait_for(
            submitted.name,
            args.argo_server,
            token,
            submitted.namespace,
            verify,
            timeout_s=timeout,
            poll_s=POLL_S,
            max_poll_s=MAX_POLL_S,
            on_phase=on_phase,
        )
    except ArgoWaitTimeout as err:
        print(f"{prog}: {_safe(err, token)}: {submitted.ui_url}", file=sys.stderr)
        return 1
    except (ArgoError, ValueError) as err:
        print(
            f"{prog}: error while waiting for workflow {submitted.name} (it goes on): "
            f"{_safe(err, token)}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print(
            f"{prog}: stopped waiting; workflow {submitted.name} goes on: {submitted.ui_url}",
            file=sys.stderr,
        )
        return 130
    if phase == "Succeeded":
        return 0
    detail = f": {messages[-1]}" if messages and messages[-1] else ""
    print(
        f"{prog}: workflow {submitted.name} {phase}{detail}; see {submitted.ui_url}",
        file=sys.stderr,
    )
    return 1


def _safe(err: Exception, token: str | None) -> str:
    """The error's message without the token (ArgoErrors are clean; a ValueError from a
    server-provided value might not be)."""
    text = " ".join(str(err).split())
    if token:
        for secret in {token.strip(), token.strip().split()[-1] if token.strip() else ""}:
            if len(secret) >= 4:
                text = text.replace(secret, "***")
    return text
