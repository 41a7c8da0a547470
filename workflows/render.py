"""Rendering pipelines as YAML: a Workflow, a WorkflowTemplate, a CronWorkflow, the install set.

Values given for a Workflow or a CronWorkflow are checked as a run would check them (required
parameters, enums, integers, combinations, and no ``{{`` in any value: see
`values.check_user_value`); values given for a WorkflowTemplate become its parameters'
defaults, and the rest is asked for when it is submitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from elasticdl.workflows.argo import (
    INSTALL_SERVICE_ACCOUNT,
    ArgoOptions,
    Schedule,
    build_cron,
    build_template,
    build_workflow,
)
from elasticdl.workflows.definitions import PIPELINES, pipeline
from elasticdl.workflows.network_policy import job_network_policy
from elasticdl.workflows.rbac import rbac_objects, semaphore_configmap
from elasticdl.workflows.steps import Engine

KINDS = ("workflow", "template", "cron")
SEMAPHORE = ("elasticdl-limits", "jobs")
"""The ConfigMap and key of the semaphore `elasticdl render install --max_concurrent_jobs`
creates and `--semaphore` refers to."""


def render_objects(
    name: str,
    values: Mapping[str, str | None],
    *,
    kind: str = "workflow",
    options: ArgoOptions | None = None,
    schedule: Schedule | None = None,
) -> list[dict[str, Any]]:
    """The object(s) of one pipeline as plain dicts; ValueError (one line) on bad input."""
    options = options or ArgoOptions()
    spec = pipeline(name)
    given = {k: v for k, v in values.items() if v is not None}
    if kind == "workflow":
        resolved = spec.resolve(given, engine=Engine.ARGO)
        return [build_workflow(spec, resolved, options).to_dict()]
    if kind == "template":
        resolved = spec.resolve(given, engine=Engine.ARGO, require=False, run_checks=False)
        return [build_template(spec, resolved, options).to_dict()]
    if kind == "cron":
        if schedule is None or not schedule.schedules:
            raise ValueError("--kind cron needs --schedule (a cron expression, e.g. '0 3 * * *')")
        if "versioned" in given and given["versioned"] != "true":
            raise ValueError(
                "a CronWorkflow always writes versioned outputs (OUTPUT/runs/<run>), so runs "
                "never overwrite each other; leave --versioned out"
            )
        given["versioned"] = "true"
        resolved = spec.resolve(given, engine=Engine.ARGO)
        explicit = {k: resolved[k] for k in given}
        return [build_cron(spec, explicit, options, schedule).to_dict()]
    raise ValueError(f"--kind {kind!r}: expected one of {', '.join(KINDS)}")


def install_objects(
    options: ArgoOptions | None = None, max_concurrent_jobs: int | None = None
) -> list[dict[str, Any]]:
    """Both WorkflowTemplates with their default parameters, then RBAC (a ServiceAccount,
    INSTALL_SERVICE_ACCOUNT unless the options name one, which the templates run as), the job
    pods' NetworkPolicy (and the semaphore)."""
    options = options or ArgoOptions()
    extra: list[dict[str, Any]] = []
    if max_concurrent_jobs is not None:
        name, key = SEMAPHORE
        extra.append(semaphore_configmap(name, key, max_concurrent_jobs, options.namespace))
        options = _replace(options, semaphore=SEMAPHORE)
    account = options.service_account or INSTALL_SERVICE_ACCOUNT
    options = _replace(options, service_account=account)
    objects = [render_objects(n, {}, kind="template", options=options)[0] for n in PIPELINES]
    policy = [job_network_policy(options.namespace)]
    return objects + rbac_objects(account, options.namespace) + policy + extra


def _replace(options: ArgoOptions, **changes: Any) -> ArgoOptions:
    import dataclasses

    return dataclasses.replace(options, **changes)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """Multi-document YAML, keys in the builders' order, long lines kept whole."""
    return yaml.safe_dump_all(
        objects, sort_keys=False, default_flow_style=False, width=1_000_000, allow_unicode=True
    )
