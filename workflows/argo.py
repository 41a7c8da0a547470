"""The Argo builder: a pipeline definition as hera objects.

One container template per step and one DAG template (`main`) whose tasks are the steps, with
`depends` from `Step.after` and `when` from `Step.when`. The same templates make

* a standalone ``Workflow`` (``argo submit``): the parameters carry the user's values;
* a ``WorkflowTemplate`` (``elasticdl-train`` / ``elasticdl-predict``): the parameters carry
  defaults, descriptions and enums, for the Argo UI's form;
* a ``CronWorkflow`` that runs the template on ``schedules`` (``workflowTemplateRef``), with
  ``concurrencyPolicy: Forbid`` and versioned outputs.

How values reach a container. A parameter appears in argv only as ``{{workflow.parameters.x}}``
(each argv element is one ``--flag=value``: a value that begins with '-' stays a value), a
choice as an expression tag over ``workflow.parameters`` (``{{=... ? ... : ...}}``): a value
is text Argo inserts, never expression source, and since values may not contain ``{{``
(`values.check_user_value`) Argo's second substitution pass finds nothing in them. A value
that needs an earlier step's output (the job image `resolve-image` names) is computed from the
template's own inputs: the DAG task passes ``{{tasks.resolve-image.outputs.parameters.image}}``
as an input. Only outputs of steps that always run are passed on (`Pipeline.validate`; `lint`
checks rendered YAML for it): Argo 4 has hung on a reference to an output of a skipped task.

Robustness: every pod step retries infrastructure failures (see `retry`); the job step and the
workflow have ``activeDeadlineSeconds``; ``podGC: OnPodSuccess`` keeps failed pods for
debugging; ``ttlStrategy`` deletes finished workflows; an optional semaphore caps concurrent
jobs; ``onExit`` deletes the job's leftover pods, Services and ConfigMap by the label the master
gave them (`cleanup`). Argv lists everywhere: no ``sh -c``.

A fresh namespace: no ``serviceAccountName`` unless one is given (``render install`` makes
`INSTALL_SERVICE_ACCOUNT` and its templates name it), output artifacts only when asked for (they
need an artifact repository), and every step that runs this project's code in a pod that passes
Pod Security "restricted" (`_restricted`); the workflow's description says all of it.

The elastic job's step (`Step.long_running`) gets the downward-API variables ``MY_POD_NAME``,
``MY_POD_UID``, ``MY_POD_IP`` and ``MY_POD_NAMESPACE``: with ``--instance_manager kubernetes``
(the default on Argo) its master owns the pods it creates and tells them its address. A step's
container args are `Step.args` followed by `Step.argo_args` (the Kubernetes flags).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from hera.workflows import (
    DAG,
    Artifact,
    Container,
    CronWorkflow,
    EmptyDirVolume,
    Env,
    FieldEnv,
    NoneArchiveStrategy,
    Parameter,
    Resources,
    SecretEnv,
    SecretVolume,
    Task,
    Workflow,
    WorkflowTemplate,
)
from hera.workflows import models as m

from elasticdl.runtime.k8s.manifests import (
    TMP_DIR,
    TMP_ENV,
    TMP_VOLUME,
    container_security_context,
    pod_security_context,
)
from elasticdl.workflows.pipeline import Pipeline
from elasticdl.workflows.retry import retry_strategy
from elasticdl.workflows.steps import Engine, Step
from elasticdl.workflows.values import (
    ARGO_OUTPUT_DIR,
    ArgoNames,
    Namespace,
    Param,
    RunName,
    TaskOutput,
    Value,
    check_user_value,
    has_task_output,
)

ARGO_VERSIONS = ("4", "3.7")
QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]"
    r"|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""A Kubernetes resource quantity (the pattern of the CRD's resources.requests)."""
LABELS = {"app.kubernetes.io/name": "elasticdl", "app.kubernetes.io/managed-by": "elasticdl"}
INSTALL_SERVICE_ACCOUNT = "elasticdl"
"""The ServiceAccount `render install` creates (with its Role) and its templates run as."""
DESCRIPTION_ANNOTATION = "workflows.argoproj.io/description"
ENTRYPOINT = "main"

# The elastic job's master finds its own pod through the downward API: the owner of the PS
# and worker pods it creates (ownerReferences) and the address they reach it at.
_POD_IDENTITY = [
    FieldEnv(name="MY_POD_NAME", field_path="metadata.name"),
    FieldEnv(name="MY_POD_UID", field_path="metadata.uid"),
    FieldEnv(name="MY_POD_IP", field_path="status.podIP"),
    FieldEnv(name="MY_POD_NAMESPACE", field_path="metadata.namespace"),
]


@dataclass(frozen=True)
class ArgoOptions:
    """Render-time settings (the API server checks these fields before Argo could substitute a
    parameter into them, so they are not workflow parameters)."""

    argo_version: str = "4"
    namespace: str | None = None
    service_account: str | None = None
    """The pods' ServiceAccount; None: the namespace's default (`render install` makes one,
    INSTALL_SERVICE_ACCOUNT, and its templates name it)."""
    deadline_seconds: int = 7 * 24 * 3600
    """activeDeadlineSeconds of the whole workflow."""
    job_deadline_seconds: int = 3 * 24 * 3600
    """activeDeadlineSeconds of the elastic job's step (the master's pod)."""
    retry_limit: int = 3
    master_cpu: str = "1"
    master_memory: str = "2Gi"
    ttl_after_success_seconds: int = 24 * 3600
    ttl_after_failure_seconds: int = 7 * 24 * 3600
    semaphore: tuple[str, str] | None = None
    """(ConfigMap name, key) of a semaphore capping concurrent workflows; None: no cap."""
    output_artifact: bool = False
    """Also publish small outputs (the model summary) as Argo artifacts: that needs an artifact
    repository configured in Argo (without one the step fails: "You need to configure artifact
    storage"); they are output parameters in any case."""

    def __post_init__(self) -> None:
        if self.argo_version not in ARGO_VERSIONS:
            raise ValueError(
                f"--argo_version {self.argo_version!r}: expected one of {', '.join(ARGO_VERSIONS)}"
            )
        for name in ("deadline_seconds", "job_deadline_seconds"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be > 0, got {getattr(self, name)}")
        if self.namespace is not None:
            _check_name("namespace", self.namespace, _DNS_LABEL, 63, "a namespace", "'-'")
        if self.service_account is not None:
            _check_name(
                "service_account",
                self.service_account,
                _DNS_SUBDOMAIN,
                253,
                "a ServiceAccount",
                "'-' and '.'",
            )
        if self.retry_limit < 0:
            raise ValueError(f"--retry_limit must be >= 0, got {self.retry_limit}")
        for name, example in (("master_cpu", "500m or 2"), ("master_memory", "512Mi or 4Gi")):
            if not QUANTITY.match(getattr(self, name)):
                raise ValueError(
                    f"--{name} {getattr(self, name)!r} is not a Kubernetes quantity "
                    f"(e.g. {example})"
                )


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _check_name(
    flag: str, value: str, pattern: re.Pattern[str], limit: int, what: str, others: str
) -> None:
    """ValueError (one line) unless `value` is a Kubernetes name of `pattern`: these fields
    are written verbatim into the YAML, where Argo would also evaluate a '{{'."""
    check_user_value(flag, value)
    if len(value) > limit or not pattern.fullmatch(value):
        raise ValueError(
            f"--{flag} {value!r} is not {what} name (lowercase letters, digits and {others}, "
            f"at most {limit} characters)"
        )


def _input_name(leaf: Value) -> str:
    if isinstance(leaf, Param):
        return leaf.name
    if isinstance(leaf, TaskOutput):
        return f"{leaf.step.replace('-', '_')}_{leaf.name}"
    if isinstance(leaf, RunName):
        return "run_name"
    if isinstance(leaf, Namespace):
        return "namespace"
    raise TypeError(f"{leaf!r} cannot be a template input")


@dataclass
class _StepNames:
    """How one step's values are spelled: routed through template inputs or global."""

    routed: ArgoNames
    direct: ArgoNames
    inputs: dict[str, str]
    """input name -> the argument the DAG task passes (global spelling)."""

    def tag(self, value: Value) -> str:
        return (self.routed if has_task_output(value) else self.direct).tag(value)


def _step_names(step: Step) -> _StepNames:
    direct = ArgoNames()
    mapping: dict[Value, str] = {}
    for value in step.values():
        if has_task_output(value):
            for leaf in value.refs():
                mapping.setdefault(leaf, _input_name(leaf))
    inputs = {name: direct.tag(leaf) for leaf, name in mapping.items()}
    return _StepNames(ArgoNames(mapping), direct, inputs)


def _container(step: Step, opts: ArgoOptions) -> Container:
    names = _step_names(step)
    volumes: list = []
    for mount in step.secrets:
        volumes.append(
            SecretVolume(
                name=mount.volume,
                secret_name=names.tag(mount.secret),
                mount_path=mount.path,
                read_only=True,
                optional=True,
                items=[m.KeyToPath(key=k, path=p) for k, p in mount.items] or None,
            )
        )
    restricted = _restricted(step)
    if restricted:
        volumes.append(EmptyDirVolume(name=TMP_VOLUME, mount_path=TMP_DIR))
    elif step.outputs:
        # Images like kaniko's have no /tmp: give the output files a directory.
        volumes.append(EmptyDirVolume(name="outputs", mount_path=ARGO_OUTPUT_DIR))
    outputs: list = [
        Parameter(
            name=o.name,
            description=o.description,
            value_from=m.ValueFrom(path=f"{ARGO_OUTPUT_DIR}/{o.name}"),
        )
        for o in step.outputs
    ]
    if opts.output_artifact:
        outputs += [
            Artifact(name=o.name, path=f"{ARGO_OUTPUT_DIR}/{o.name}", archive=NoneArchiveStrategy())
            for o in step.outputs
            if o.artifact
        ]
    return Container(
        name=step.name,
        image=names.tag(step.image),
        command=list(step.argv_command),
        args=[names.tag(arg) for arg in step.argv_args(Engine.ARGO)],
        env=[Env(name=k, value=v) for k, v in step.env]
        + ([Env(name=k, value=v) for k, v in TMP_ENV.items()] if restricted else [])
        + (_POD_IDENTITY if step.long_running else [])
        + [_secret_env(variable.env, variable.param) for variable in step.secret_env],
        inputs=[Parameter(name=n) for n in names.inputs] or None,
        outputs=outputs or None,
        volumes=volumes or None,
        resources=(
            Resources(cpu_request=opts.master_cpu, memory_request=opts.master_memory)
            if step.long_running
            else None
        ),
        # IntOrString, as a string: see retry.retry_strategy.
        active_deadline_seconds=str(opts.job_deadline_seconds) if step.long_running else None,
        retry_strategy=retry_strategy(step.retry, opts.retry_limit),
        security_context=(
            m.SecurityContext.model_validate(container_security_context()) if restricted else None
        ),
        pod_security_context=(
            m.PodSecurityContext.model_validate(pod_security_context()) if restricted else None
        ),
    )


def _restricted(step: Step) -> bool:
    """Whether the step's pod runs under Pod Security "restricted" (runtime/k8s/manifests.py):
    every step that runs this project's code (`module`) does. A step with a command of its own
    runs as its image needs: kaniko runs as root, since it unpacks images into its own root
    filesystem (`_NEEDS_ROOT` says so in the workflow's description)."""
    return step.module is not None


_NEEDS_ROOT = (
    "Step {steps} runs as root (kaniko unpacks the image into its own filesystem), which Pod "
    "Security 'restricted' refuses: in such a namespace give a prebuilt image (parameter "
    "image); every other step runs as non-root with a read-only root filesystem."
)


def _description(pipeline: Pipeline, opts: ArgoOptions) -> str:
    """The workflow's description (the Argo UI shows it): what it does, which ServiceAccount
    it runs as, whether it needs an artifact repository, which step needs root."""
    parts = [pipeline.description + "."]
    account = opts.service_account
    if account == INSTALL_SERVICE_ACCOUNT:
        parts.append(
            f"Runs as ServiceAccount {account}, which `elasticdl render install` creates with "
            "the Role its pods need."
        )
    elif account:
        parts.append(f"Runs as ServiceAccount {account}, given when it was rendered.")
    else:
        parts.append(
            "Runs as the namespace's default ServiceAccount, which needs Argo's executor "
            "permissions and, with instance_manager kubernetes, the right to create pods: "
            "`elasticdl render install` creates a ServiceAccount with both "
            f"({INSTALL_SERVICE_ACCOUNT}; render with --service_account "
            f"{INSTALL_SERVICE_ACCOUNT})."
        )
    artifacts = [o.name for s in pipeline.all_steps() for o in s.outputs if o.artifact]
    if artifacts and opts.output_artifact:
        parts.append(
            f"Output {', '.join(artifacts)} is also an artifact: that needs an artifact "
            "repository configured in Argo."
        )
    elif artifacts:
        parts.append(
            f"Output {', '.join(artifacts)} is an output parameter; no artifact repository is "
            "needed (render with --output_artifact to keep it as an artifact too)."
        )
    root = [s.name for s in pipeline.all_steps() if s.runs_on(Engine.ARGO) and not _restricted(s)]
    if root:
        parts.append(_NEEDS_ROOT.format(steps=", ".join(root)))
    return " ".join(parts)


_NO_SECRET = "elasticdl-no-db-secret"


def _secret_env(env: str, param: str) -> SecretEnv:
    """`env` from the Secret key that parameter `param` names as NAME:KEY. Argo substitutes
    both parts at run time (sprig's splitList); with `param` empty they name a Secret nobody
    creates, and `optional` leaves the variable unset (an empty Secret name is invalid)."""
    variable = f"workflow.parameters.{param}"

    def part(index: int, otherwise: str) -> str:
        return (
            f"{{{{={variable} == '' ? '{otherwise}' : sprig.splitList(':', {variable})[{index}]}}}}"
        )

    return SecretEnv(
        name=env, secret_name=part(0, _NO_SECRET), secret_key=part(1, "password"), optional=True
    )


def _dag(pipeline: Pipeline) -> DAG:
    direct = ArgoNames()
    tasks = []
    for step in pipeline.order():
        if not step.runs_on(Engine.ARGO):
            continue
        names = _step_names(step)
        tasks.append(
            Task(
                name=step.name,
                template=step.name,
                depends=" && ".join(step.after) or None,
                when=direct.when(step.when) if step.when is not None else None,
                arguments=[Parameter(name=n, value=v) for n, v in names.inputs.items()] or None,
            )
        )
    return DAG(name=ENTRYPOINT, tasks=tasks)


def templates(pipeline: Pipeline, opts: ArgoOptions) -> list:
    """The DAG template followed by one container template per step (the exit step last)."""
    steps = [s for s in pipeline.order() if s.runs_on(Engine.ARGO)]
    if pipeline.exit_step is not None:
        steps.append(pipeline.exit_step)
    return [_dag(pipeline), *[_container(step, opts) for step in steps]]


def arguments(
    pipeline: Pipeline, values: Mapping[str, str], *, for_ui: bool, only_given: bool = False
) -> list[Parameter]:
    """The workflow's parameters: every pipeline parameter, with its value when it has one
    (`only_given`: just those with a value).

    `for_ui` (templates) adds each parameter's description and enum. A --db URL with a
    password is refused (ValueError pointing to --db_secret): YAML never holds one."""
    from elasticdl.runtime.sql.credentials import password_refusal

    refusal = password_refusal(values.get("db", ""))
    if refusal:
        raise ValueError(refusal)
    result = []
    names = {p.name for p in pipeline.params}
    for param in pipeline.params_on(Engine.ARGO):
        if only_given and param.name not in values:
            continue
        kwargs: dict = {"name": param.name}
        if param.name in values:
            kwargs["value"] = values[param.name]
        if for_ui:
            kwargs["description"] = for_form(param.description, names)
            if param.enum:
                kwargs["enum"] = list(param.enum)
        result.append(Parameter(**kwargs))
    return result


_FLAG = re.compile(r"--([a-z][a-z0-9_]*)")


def for_form(description: str, names: set[str]) -> str:
    """A parameter's description as the Argo UI's form shows it: the job options' texts name
    other parameters as command-line flags (`--db`), the form by name (`"db"`)."""
    return _FLAG.sub(lambda f: f'"{f[1]}"' if f[1] in names else f[0], description)


def _spec(pipeline: Pipeline, opts: ArgoOptions) -> dict:
    """Spec fields shared by the Workflow and the WorkflowTemplate."""
    synchronization = None
    if opts.semaphore is not None:
        name, key = opts.semaphore
        synchronization = m.Synchronization(
            semaphores=[
                m.SemaphoreRef(config_map_key_ref=m.ConfigMapKeySelector(name=name, key=key))
            ]
        )
    return {
        "entrypoint": ENTRYPOINT,
        "templates": templates(pipeline, opts),
        "on_exit": pipeline.exit_step.name if pipeline.exit_step else None,
        "service_account_name": opts.service_account,
        "active_deadline_seconds": opts.deadline_seconds,
        "pod_gc": m.PodGC(strategy="OnPodSuccess"),
        "ttl_strategy": m.TTLStrategy(
            seconds_after_success=opts.ttl_after_success_seconds,
            seconds_after_failure=opts.ttl_after_failure_seconds,
        ),
        "synchronization": synchronization,
        "namespace": opts.namespace,
        "labels": {**LABELS, "app.kubernetes.io/component": f"{pipeline.name}-pipeline"},
        "annotations": {DESCRIPTION_ANNOTATION: _description(pipeline, opts)},
    }


def build_workflow(pipeline: Pipeline, values: Mapping[str, str], opts: ArgoOptions) -> Workflow:
    """A standalone Workflow for `argo submit`; `values` are resolved parameter values."""
    return Workflow(
        generate_name=f"{pipeline.template_name}-",
        arguments=arguments(pipeline, values, for_ui=False),
        **_spec(pipeline, opts),
    )


def build_template(
    pipeline: Pipeline, values: Mapping[str, str], opts: ArgoOptions
) -> WorkflowTemplate:
    """The WorkflowTemplate `elasticdl-<pipeline>`; `values` become the parameters' defaults."""
    return WorkflowTemplate(
        name=pipeline.template_name,
        arguments=arguments(pipeline, values, for_ui=True),
        **_spec(pipeline, opts),
    )


@dataclass(frozen=True)
class Schedule:
    schedules: tuple[str, ...]
    timezone: str = "UTC"
    starting_deadline_seconds: int = 600
    name: str | None = None
    successful_jobs_history_limit: int = 3
    failed_jobs_history_limit: int = 3


def build_cron(
    pipeline: Pipeline, values: Mapping[str, str], opts: ArgoOptions, schedule: Schedule
) -> CronWorkflow:
    """A CronWorkflow running the pipeline's WorkflowTemplate (installed separately).

    Both Argo 4 and 3.7 take `schedules:` (a list; 3.6 added it, 4 removed `schedule:`), so
    the same form serves both. `concurrencyPolicy: Forbid`: a run never overlaps the previous
    one, which matters because each run may start from the model the previous one published.
    """
    return CronWorkflow(
        name=schedule.name or f"{pipeline.template_name}-cron",
        namespace=opts.namespace,
        labels={**LABELS, "app.kubernetes.io/component": f"{pipeline.name}-pipeline"},
        annotations={DESCRIPTION_ANNOTATION: f"Scheduled: {pipeline.description}"},
        schedules=list(schedule.schedules),
        timezone=schedule.timezone,
        concurrency_policy="Forbid",
        starting_deadline_seconds=schedule.starting_deadline_seconds,
        successful_jobs_history_limit=schedule.successful_jobs_history_limit,
        failed_jobs_history_limit=schedule.failed_jobs_history_limit,
        workflow_template_ref=m.WorkflowTemplateRef(name=pipeline.template_name),
        arguments=arguments(pipeline, values, for_ui=False, only_given=True),
    )
