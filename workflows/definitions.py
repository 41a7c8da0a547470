"""The two pipelines, train and predict: their parameters, steps, order and conditions.

Train::

    build-image (kaniko; skipped when --image is given; Argo only)
    sql-to-recordio (only with --sql)
        -> train (the elastic master, in the job image)
            -> publish (records the image in the TrainedModel, writes a summary artifact)
                -> update-latest (only with --versioned true: OUTPUT/LATEST -> this run)

Predict::

    sql-to-recordio (only with --sql)    resolve-image (the TrainedModel's image; Argo only)
        -> predict (in that image)
            -> write-back (only with --output_table: the predictions into a SQL table)

Both end (on Argo, whatever happened) with `cleanup` (`workflows/cleanup.py`), which deletes
the job's leftover pods, Services and ConfigMap by the `elasticdl-job-name` label the master
gave them.

Where the workers run. On Argo the master's pod creates a pod per parameter server and worker
through the Kubernetes API (`--instance_manager kubernetes`, the default there: what makes the
job elastic across nodes, with preempted pods relaunched), so the pipelines take the Kubernetes
flags of `runtime/k8s/options.py` as Argo-only parameters (resources, priorities, node
selector, tolerations, volumes, pull secrets, the pods' service account, grace period) and the
job step passes them (`Step.argo_args`). Two are not parameters but fixed by the workflow:
`--pod_image` is the step's own image (the job image: the workers must run the master's code,
and the master cannot read it back reliably from its pod, whose first container is Argo's
`wait`), and `--pod_namespace` is the workflow's namespace (the one the Role grants, and the
one cleanup searches). `--instance_manager local` stays a choice on Argo (workers as processes
in the master's pod: a small job, or a cluster without the Role). The local engine has no
cluster: there `local` is the default and `kubernetes` is refused with one line, and the
Kubernetes parameters are neither needed nor passed.

Where each run writes: with `--versioned true` (what a CronWorkflow uses) the model goes to
`OUTPUT/runs/<run name>` and `OUTPUT/LATEST` names it once it is published, so a run never
overwrites an earlier model and a failed run never becomes the latest; `--warm_start true`
starts from the checkpoints of the model LATEST names. Intermediate data (converted SQL rows,
predictions on their way to a table) goes under `WORK_DIR/<run name>/`. Data is passed as URLs
(`gs://...`), never as Argo artifacts: the job's worker pods read it directly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from elasticdl import __version__
from elasticdl.runtime.k8s import manifests
from elasticdl.runtime.k8s.options import (
    DEFAULT_PS_REQUEST,
    DEFAULT_WORKER_REQUEST,
    KubernetesOptions,
)
from elasticdl.workflows.parameters import Check, PipelineParam, Rule
from elasticdl.workflows.pipeline import Pipeline
from elasticdl.workflows.steps import (
    ARGO_ONLY,
    Engine,
    SecretMount,
    Step,
    StepOutput,
    flag,
)
from elasticdl.workflows.values import (
    All,
    Choice,
    Is,
    IsEmpty,
    IsSet,
    Join,
    Lit,
    Namespace,
    Out,
    Param,
    RunName,
    TaskOutput,
    Value,
)

JOB_LABEL = manifests.LABEL_JOB
"""Label on every pod, Service and ConfigMap an elastic job creates; its value is
`manifests.name_prefix(job name)` (the job name is the workflow's name on Argo). Never a
`workflows.argoproj.io/*` label: Argo would adopt the pods."""

DEFAULT_ELASTICDL_IMAGE = f"elasticdl/elasticdl:{__version__}"
DEFAULT_KANIKO_IMAGE = "gcr.io/kaniko-project/executor:v1.23.2"
BOOL = ("false", "true")
INSTANCE_MANAGERS = ("local", "kubernetes")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _common_params() -> tuple[PipelineParam, ...]:
    return (
        PipelineParam(
            "instance_manager",
            "Where the master starts parameter servers and workers: kubernetes (a pod each, "
            "created through the Kubernetes API and relaunched when preempted; the default on "
            "Argo) or local (processes in the master's pod; the only choice on the local "
            "engine, which runs them on this machine)",
            default="kubernetes",
            enum=INSTANCE_MANAGERS,
            local_default="local",
        ),
        PipelineParam(
            "work_dir",
            "Directory URL for intermediate data of each run (converted SQL rows, "
            "predictions on their way to a table), e.g. gs://bucket/elasticdl-work",
        ),
        PipelineParam(
            "elasticdl_image",
            "Image of the ElasticDL runtime, for the steps that need no model zoo",
            default=DEFAULT_ELASTICDL_IMAGE,
            argo_only=True,
        ),
    )


def _sql_params(with_label: bool) -> tuple[PipelineParam, ...]:
    params = (
        PipelineParam(
            "sql",
            "A SELECT whose rows are the input (instead of --data); needs --db and --work_dir",
        ),
        PipelineParam(
            "db",
            "SQLAlchemy URL of the database --sql reads, e.g. postgresql+psycopg://u:pw@host/db",
        ),
    )
    if with_label:
        params += (PipelineParam("label", "The label column of the --sql rows"),)
    return params


def _input_checks(*sql_checks: Check) -> tuple[Check, ...]:
    """What both pipelines ask of their input: RecordIO --data, or --sql with --db (then the
    pipeline's own `sql_checks`), and on Argo a --work_dir for the converted rows."""
    return (
        Check(All(IsEmpty("data"), IsEmpty("sql")), "give --data (RecordIO) or --sql and --db"),
        Check(All(IsSet("data"), IsSet("sql")), "give either --data or --sql, not both"),
        Check(All(IsSet("sql"), IsEmpty("db")), "--sql needs --db (a SQLAlchemy URL)"),
        *sql_checks,
        Check(
            All(IsSet("sql"), IsEmpty("work_dir")),
            "--sql needs --work_dir: a directory URL (gs://...) for the converted rows",
            engines=ARGO_ONLY,
        ),
    )


def _cleanup() -> Step:
    return Step(
        name="cleanup",
        description="Delete the job's leftover pods, Services and ConfigMap (by the label the "
        "master gave them), whatever happened",
        image=Param("elasticdl_image"),
        module="elasticdl.workflows.cleanup",
        args=(flag("job_name", RunName()), flag("namespace", Namespace())),
        engines=ARGO_ONLY,
    )


# -- the Kubernetes flags of the job step (runtime/k8s/options.py) -----------------------------


def _checked(parse: Callable[[str], object]) -> Callable[[str], object]:
    """A parameter check from a `manifests` parser (its ManifestError names the flag)."""

    def check(value: str) -> object:
        return parse(value) if value.strip() else None

    return check


def _name_check(flag_name: str, what: str) -> Callable[[str], object]:
    def check(value: str) -> None:
        if value and not _DNS_SUBDOMAIN.match(value):
            raise ValueError(
                f"--{flag_name} {value!r}: not a {what} name (lowercase letters, digits, "
                "'-' and '.')"
            )

    return check


def _kubernetes_params(with_ps: bool) -> tuple[PipelineParam, ...]:
    """The pods' settings: the Kubernetes flags the job step takes (Argo only)."""
    resources = "cpu=1,memory=4096Mi[,gpu=1][,ephemeral-storage=10Gi]"
    roles = (("worker", "each worker pod", DEFAULT_WORKER_REQUEST),)
    if with_ps:
        roles += (("ps", "each parameter-server pod", DEFAULT_PS_REQUEST),)
    params: tuple[PipelineParam, ...] = ()
    for role, pods, request in roles:
        params += (
            PipelineParam(
                f"{role}_resource_request",
                f"Resources {pods} requests: {resources}",
                default=request,
                argo_only=True,
                validate=_checked(
                    lambda v, r=role: manifests.parse_resources(v, f"--{r}_resource_request")
                ),
            ),
            PipelineParam(
                f"{role}_resource_limit",
                f"Resource limits of {pods}, the same form; empty: the requests",
                argo_only=True,
                validate=_checked(
                    lambda v, r=role: manifests.parse_resources(v, f"--{r}_resource_limit")
                ),
            ),
        )
    params += (
        PipelineParam(
            "worker_pod_priority",
            "PriorityClass of the worker pods: CLASS, or CLASS=SHARE[,REST] (high=0.5: half "
            "the workers high, the rest low); empty: the cluster's default",
            argo_only=True,
            validate=_checked(manifests.parse_worker_priority),
        ),
    )
    if with_ps:
        params += (
            PipelineParam(
                "ps_pod_priority",
                "PriorityClass of the parameter-server pods; empty: the cluster's default",
                argo_only=True,
                validate=_name_check("ps_pod_priority", "PriorityClass"),
            ),
        )
    params += (
        PipelineParam(
            "node_selector",
            "Node labels the job's pods need: KEY=VALUE[,...], e.g. "
            "cloud.google.com/gke-nodepool=ml",
            argo_only=True,
            validate=_checked(manifests.parse_node_selector),
        ),
        PipelineParam(
            "tolerations",
            "Taints the job's pods tolerate: KEY[=VALUE][:EFFECT][;...], e.g. "
            "nvidia.com/gpu:NoSchedule",
            argo_only=True,
            validate=_checked(manifests.parse_tolerations),
        ),
        PipelineParam(
            "volume",
            "Volumes mounted in the job's pods: claim_name=C,mount_path=/p[;host_path=/h,"
            "mount_path=/q,read_only=true;...] (also config_map, secret, empty_dir=true)",
            argo_only=True,
            validate=_checked(manifests.parse_volumes),
        ),
        PipelineParam(
            "image_pull_secrets",
            "Secrets for pulling the job image in the job's pods, comma-separated",
            argo_only=True,
            validate=_checked(manifests.parse_image_pull_secrets),
        ),
        PipelineParam(
            "image_pull_policy",
            "imagePullPolicy of the job's pods",
            default=KubernetesOptions.image_pull_policy,
            enum=("IfNotPresent", "Always", "Never"),
            argo_only=True,
        ),
        PipelineParam(
            "pod_service_account",
            "ServiceAccount of the job's pods (e.g. one with access to the data); empty: the "
            "namespace's default (the pods need no Kubernetes API access)",
            argo_only=True,
            validate=_name_check("pod_service_account", "ServiceAccount"),
        ),
        PipelineParam(
            "termination_grace_period",
            "Seconds a pod the master stops gets to finish (a worker, its minibatch) before "
            "it is killed",
            default=str(manifests.DEFAULT_GRACE_S),
            kind="int",
            minimum=0,
            maximum=3600,
            argo_only=True,
        ),
    )
    return params


KUBERNETES_FLAGS = (
    # The master's Kubernetes flags (runtime/k8s/options.py) that are pipeline parameters.
    "worker_resource_request",
    "worker_resource_limit",
    "ps_resource_request",
    "ps_resource_limit",
    "worker_pod_priority",
    "ps_pod_priority",
    "node_selector",
    "tolerations",
    "volume",
    "image_pull_secrets",
    "image_pull_policy",
    "pod_service_account",
    "termination_grace_period",
)


def _kubernetes_args(job_image: Value, with_ps: bool) -> tuple[Value, ...]:
    """The job step's Kubernetes flags (Argo only): the parameters above, the pods' image (the
    step's own) and namespace (the workflow's)."""
    names = [n for n in KUBERNETES_FLAGS if with_ps or not n.startswith("ps_")]
    return (
        flag("pod_image", job_image),
        flag("pod_namespace", Namespace()),
        *(flag(name, Param(name)) for name in names),
    )


def _kubernetes_problem(values: Mapping[str, str]) -> str | None:
    """What the master would refuse before it starts (say, a limit below its request), with
    its own message: the flags through `KubernetesOptions.cluster_spec`."""
    given: dict[str, Any] = {name: values[name] for name in KUBERNETES_FLAGS if name in values}
    if "termination_grace_period" in given:
        given["termination_grace_period"] = int(given["termination_grace_period"])
    try:
        KubernetesOptions(**given).cluster_spec(
            "check", "127.0.0.1:0", image="check", namespace="check", env={}
        )
    except ValueError as err:
        return str(err)
    return None


_NO_KUBERNETES_HERE = Check(
    Is("instance_manager", "kubernetes"),
    "--instance_manager kubernetes needs a cluster: its master runs in a pod and creates the "
    "workers' pods; run the pipeline on Argo (elasticdl ... --engine argo), or use "
    "--instance_manager local here (workers as processes on this machine)",
    engines=frozenset({Engine.LOCAL}),
)


def _min_workers_problem(values: Mapping[str, str]) -> str | None:
    try:
        num_workers, min_workers = int(values["num_workers"]), int(values["min_workers"])
    except (KeyError, ValueError):
        return None  # the parameters' own checks say what is wrong
    if min_workers > num_workers:
        return f"--min_workers {min_workers} is more than --num_workers {num_workers}"
    return None


def _kubernetes_rule(with_ps: bool) -> Rule:
    names = tuple(n for n in KUBERNETES_FLAGS if with_ps or not n.startswith("ps_"))
    return Rule(names, _kubernetes_problem, engines=ARGO_ONLY)


def _int(name: str, description: str, default: str, minimum: int) -> PipelineParam:
    return PipelineParam(name, description, default=default, kind="int", minimum=minimum)


def _runtime(name: str, description: str, args: tuple, **kwargs) -> Step:
    return Step(
        name=name,
        description=description,
        image=Param("elasticdl_image"),
        module=f"elasticdl.steps.{name.replace('-', '_')}",
        args=args,
        **kwargs,
    )


def train_pipeline() -> Pipeline:
    """The training pipeline; see the module documentation."""
    model_dir = Choice(
        Is("versioned", "true"), Join(Param("output"), Lit("/runs/"), RunName()), Param("output")
    )
    converted = Join(Param("work_dir"), Lit("/"), RunName(), Lit("/train-data"))
    job_image = Choice(IsSet("image"), Param("image"), TaskOutput("build-image", "image"))
    params = (
        PipelineParam(
            "model_def",
            "Model definition in the zoo, e.g. mnist.mnist_functional_api.custom_model",
            default=None,
        ),
        PipelineParam(
            "model_zoo",
            "Model zoo in the job image (a directory such as /model_zoo, or a git URL); "
            "empty: the built-in zoo",
        ),
        PipelineParam("params", 'Model parameters, e.g. "hidden_units=[10, 20], lr=0.01"'),
        PipelineParam("data", "Training data: RecordIO files (URL, glob or directory)"),
        *_sql_params(with_label=True),
        PipelineParam("validation_data", "RecordIO files to evaluate on (URL, glob or dir)"),
        PipelineParam(
            "output", "Where the trained model goes, e.g. gs://bucket/models/m1", default=None
        ),
        PipelineParam(
            "versioned",
            "true: write each run under OUTPUT/runs/<run> and point OUTPUT/LATEST at it after "
            "it is published (runs never overwrite each other)",
            default="false",
            enum=BOOL,
        ),
        PipelineParam(
            "warm_start",
            "true: start from the checkpoints of the model OUTPUT/LATEST names "
            "(needs --versioned true and --checkpoint_steps > 0)",
            default="false",
            enum=BOOL,
        ),
        _int("num_workers", "Number of workers", "2", 1),
        _int(
            "min_workers",
            "The job goes on while at least this many workers are alive (at most num_workers)",
            "1",
            1,
        ),
        _int("num_ps", "Number of parameter servers", "1", 1),
        _int("minibatch_size", "Records per minibatch", "64", 1),
        _int("num_epochs", "Passes over the training data", "1", 1),
        _int("records_per_task", "Records a worker takes per task", "1024", 1),
        _int("checkpoint_steps", "Checkpoint every N model versions (0: never)", "0", 0),
        _int("evaluation_steps", "Also evaluate every N model versions (0: at the end)", "0", 0),
        PipelineParam(
            "image",
            "Job image with the model zoo (a pullable reference); empty: build it with kaniko",
            argo_only=True,
        ),
        PipelineParam(
            "zoo_context",
            "Build context of the zoo image for kaniko: gs://bucket/zoo.tar.gz or "
            "git://host/repo.git#refs/heads/main (used when --image is empty)",
            argo_only=True,
        ),
        PipelineParam(
            "dockerfile", "Dockerfile path in the build context", "Dockerfile", argo_only=True
        ),
        PipelineParam(
            "image_repository",
            "Repository the built image is pushed to, e.g. gcr.io/project/zoo "
            "(tagged with the run name)",
            argo_only=True,
        ),
        PipelineParam(
            "cache_repo",
            "Repository for kaniko's layer cache (empty: kaniko's default)",
            argo_only=True,
        ),
        PipelineParam(
            "docker_config_secret",
            "Secret with the registry credentials (.dockerconfigjson) for kaniko",
            default="elasticdl-docker-config",
            argo_only=True,
        ),
        PipelineParam(
            "kaniko_image",
            "Image of the kaniko executor (upstream is archived; forks work the same)",
            default=DEFAULT_KANIKO_IMAGE,
            argo_only=True,
        ),
        *_common_params(),
        *_kubernetes_params(with_ps=True),
    )
    steps = (
        Step(
            name="build-image",
            description="Build and push the job image (the runtime plus the zoo) with kaniko",
            image=Param("kaniko_image"),
            command=("/kaniko/executor",),
            args=(
                flag("context", Param("zoo_context")),
                flag("dockerfile", Param("dockerfile")),
                flag("destination", Join(Param("image_repository"), Lit(":"), RunName())),
                flag("digest-file", Out("digest")),
                flag("image-name-with-digest-file", Out("image")),
                Lit("--cache=true"),
                flag("cache-repo", Param("cache_repo")),
            ),
            when=IsEmpty("image"),
            outputs=(
                StepOutput("digest", "sha256 digest of the pushed image"),
                StepOutput("image", "the pushed image as repository@sha256:digest"),
            ),
            engines=ARGO_ONLY,
            secrets=(
                SecretMount(
                    "docker-config",
                    Param("docker_config_secret"),
                    "/kaniko/.docker",
                    ((".dockerconfigjson", "config.json"),),
                ),
            ),
            env=(),
        ),
        _runtime(
            "sql-to-recordio",
            "Convert the rows of --sql into RecordIO under the run's work directory",
            (
                flag("db", Param("db")),
                flag("sql", Param("sql")),
                flag("output", converted),
                flag("label", Param("label")),
            ),
            when=IsSet("sql"),
        ),
        Step(
            name="train",
            description="Run the elastic training job (its master)",
            image=job_image,
            module="elasticdl.steps.train",
            args=(
                flag("model_zoo", Param("model_zoo")),
                flag("model_def", Param("model_def")),
                flag("params", Param("params")),
                flag("data", Choice(IsSet("sql"), converted, Param("data"))),
                flag("output", model_dir),
                flag("validation_data", Param("validation_data")),
                flag("num_workers", Param("num_workers")),
                flag("min_workers", Param("min_workers")),
                flag("num_ps", Param("num_ps")),
                flag("minibatch_size", Param("minibatch_size")),
                flag("num_epochs", Param("num_epochs")),
                flag("records_per_task", Param("records_per_task")),
                flag("checkpoint_steps", Param("checkpoint_steps")),
                flag("evaluation_steps", Param("evaluation_steps")),
                flag("job_name", RunName()),
                flag("instance_manager", Param("instance_manager")),
                Lit("--resume=true"),
                flag(
                    "init_from_latest",
                    Choice(
                        Is("warm_start", "true"), Join(Param("output"), Lit("/LATEST")), Lit("")
                    ),
                ),
            ),
            argo_args=_kubernetes_args(job_image, with_ps=True),
            after=("build-image", "sql-to-recordio"),
            long_running=True,
        ),
        _runtime(
            "publish",
            "Record the job image in the TrainedModel; a summary as an output artifact",
            (
                Lit("record"),
                flag("model", model_dir),
                flag("image", job_image),
                flag("summary_file", Out("trained_model")),
            ),
            after=("train",),
            outputs=(StepOutput("trained_model", "summary of the published model (JSON)", True),),
        ),
        Step(
            name="update-latest",
            description="Point OUTPUT/LATEST at this run's model, now that it is published",
            image=Param("elasticdl_image"),
            module="elasticdl.steps.publish",
            args=(Lit("latest"), flag("output", Param("output")), flag("model", model_dir)),
            when=Is("versioned", "true"),
            after=("publish",),
        ),
    )
    checks = (
        *_input_checks(
            Check(All(IsSet("sql"), IsEmpty("label")), "--sql needs --label (the label column)"),
            Check(All(IsEmpty("sql"), IsSet("label")), "--label applies to --sql input only"),
        ),
        Check(
            All(IsEmpty("image"), IsEmpty("zoo_context")),
            "give --image (a built job image) or --zoo_context (a build context for kaniko)",
            engines=ARGO_ONLY,
        ),
        Check(
            All(IsEmpty("image"), IsEmpty("image_repository")),
            "building the job image needs --image_repository (where kaniko pushes it)",
            engines=ARGO_ONLY,
        ),
        Check(
            All(Is("warm_start", "true"), Is("versioned", "false")),
            "--warm_start true needs --versioned true: it starts from the model OUTPUT/LATEST "
            "names",
        ),
        Check(
            All(Is("warm_start", "true"), Is("checkpoint_steps", "0")),
            "--warm_start true needs --checkpoint_steps > 0: the next run starts from the "
            "checkpoints of this one",
        ),
        _NO_KUBERNETES_HERE,
        _kubernetes_rule(with_ps=True),
        Rule(("num_workers", "min_workers"), _min_workers_problem),
    )
    return Pipeline(
        name="train",
        template_name="elasticdl-train",
        description="Train a model-zoo model as an elastic job and publish the TrainedModel",
        params=params,
        steps=steps,
        exit_step=_cleanup(),
        checks=checks,
    )


def predict_pipeline() -> Pipeline:
    """The prediction pipeline; see the module documentation."""
    converted = Join(Param("work_dir"), Lit("/"), RunName(), Lit("/predict-data"))
    staged = Join(Param("work_dir"), Lit("/"), RunName(), Lit("/predictions"))
    predictions = Choice(
        Is("versioned", "true"), Join(Param("output"), Lit("/runs/"), RunName()), Param("output")
    )
    params = (
        PipelineParam("data", "Data to predict on: RecordIO files (URL, glob or directory)"),
        *_sql_params(with_label=False),
        PipelineParam(
            "trained_model", "The --output of a training job (a model URL)", default=None
        ),
        PipelineParam("output", "New directory (URL) for the prediction parts"),
        PipelineParam(
            "versioned",
            "true: write each run's predictions under OUTPUT/runs/<run> (what a schedule needs: "
            "an output directory is never reused)",
            default="false",
            enum=BOOL,
        ),
        PipelineParam(
            "output_format", "Format of the prediction parts", "recordio", ("recordio", "csv")
        ),
        PipelineParam(
            "keep_columns", "Input columns copied into each output row (default: id columns)"
        ),
        PipelineParam(
            "output_table",
            "With --sql: write the selected rows plus the prediction into this table "
            "(created or replaced atomically; with --key, a column added to it)",
        ),
        PipelineParam("result_column", "Column of --output_table for the prediction", "prediction"),
        PipelineParam(
            "key", "With --output_table: fill the column in place, matching rows on this column"
        ),
        _int("num_workers", "Number of workers", "2", 1),
        _int("minibatch_size", "Records per minibatch", "256", 1),
        _int("records_per_task", "Records a worker takes per task", "1024", 1),
        PipelineParam(
            "image",
            "Job image; empty: the image recorded in the TrainedModel (docker_commit_id)",
            argo_only=True,
        ),
        *_common_params(),
        *_kubernetes_params(with_ps=False),
    )
    steps = (
        _runtime(
            "sql-to-recordio",
            "Convert the rows of --sql into RecordIO under the run's work directory",
            (flag("db", Param("db")), flag("sql", Param("sql")), flag("output", converted)),
            when=IsSet("sql"),
        ),
        Step(
            name="resolve-image",
            description="The image to predict in: --image, or the TrainedModel's",
            image=Param("elasticdl_image"),
            module="elasticdl.steps.publish",
            args=(
                Lit("image"),
                flag("trained_model", Param("trained_model")),
                flag("image", Param("image")),
                flag("image_file", Out("image")),
            ),
            outputs=(StepOutput("image", "the image to run the prediction job in"),),
            engines=ARGO_ONLY,
        ),
        Step(
            name="predict",
            description="Run the elastic prediction job (its master)",
            image=TaskOutput("resolve-image", "image"),
            module="elasticdl.steps.predict",
            args=(
                flag("data", Choice(IsSet("sql"), converted, Param("data"))),
                flag("trained_model", Param("trained_model")),
                flag("output", Choice(IsSet("output_table"), staged, predictions)),
                flag("output_format", Param("output_format")),
                flag(
                    "keep_columns", Choice(IsSet("output_table"), Lit("*"), Param("keep_columns"))
                ),
                flag("num_workers", Param("num_workers")),
                flag("minibatch_size", Param("minibatch_size")),
                flag("records_per_task", Param("records_per_task")),
                flag("job_name", RunName()),
                flag("instance_manager", Param("instance_manager")),
            ),
            argo_args=_kubernetes_args(TaskOutput("resolve-image", "image"), with_ps=False),
            after=("sql-to-recordio", "resolve-image"),
            long_running=True,
        ),
        _runtime(
            "write-back",
            "Write the selected rows and their predictions into --output_table",
            (
                flag("db", Param("db")),
                flag("table", Param("output_table")),
                flag("column", Param("result_column")),
                flag("predictions", staged),
                flag("data", converted),
                flag("key", Param("key")),
            ),
            when=IsSet("output_table"),
            after=("predict",),
        ),
    )
    checks = (
        *_input_checks(),
        Check(
            All(IsSet("output_table"), IsEmpty("sql")),
            "--output_table needs --sql: the rows written back are the selected ones",
        ),
        Check(
            All(IsEmpty("output"), IsEmpty("output_table")),
            "give --output (a directory for the predictions) or --output_table",
        ),
        Check(
            All(IsSet("output"), IsSet("output_table")),
            "give either --output or --output_table, not both",
        ),
        Check(
            All(IsSet("output_table"), Is("output_format", "csv")),
            "--output_table needs --output_format recordio",
        ),
        Check(All(IsSet("key"), IsEmpty("output_table")), "--key applies to --output_table only"),
        _NO_KUBERNETES_HERE,
        _kubernetes_rule(with_ps=False),
    )
    return Pipeline(
        name="predict",
        template_name="elasticdl-predict",
        description="Predict with a trained model as an elastic job, optionally into a table",
        params=params,
        steps=steps,
        exit_step=_cleanup(),
        checks=checks,
    )


PIPELINES = {"train": train_pipeline, "predict": predict_pipeline}


def pipeline(name: str) -> Pipeline:
    try:
        return PIPELINES[name]()
    except KeyError:
        raise ValueError(f"unknown pipeline {name!r}; known: {', '.join(PIPELINES)}") from None
