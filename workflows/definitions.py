"""The two pipelines, train and predict: their parameters, steps, order and conditions.

Train::

    resolve-image (the job image: --image, or IMAGE_REPOSITORY:<run name>; Argo only)
        -> build-image (kaniko pushes that image; only when --image is empty; Argo only)
    sql-to-recordio (only with --sql)
    sql-to-recordio-validation (only with --validation_sql)
        -> train (the elastic master, in the job image)
            -> publish (records the image in the TrainedModel, writes a summary artifact)
                -> update-latest (only with --versioned true: OUTPUT/LATEST -> this run)

Predict::

    sql-to-recordio (only with --sql; with --output_table it plans the write first)
    resolve-image (the TrainedModel's image; Argo only)
        -> predict (in that image)
            -> write-back (only with --output_table: the predictions into a SQL table)

Evaluate (SQLFlow's `TO EVALUATE ... INTO table`)::

    sql-to-recordio (only with --sql)    resolve-image (Argo only)
        -> evaluate (in that image; writes the metrics as an output)
            -> write-metrics (only with --output_table: one row of metrics into a table)

A SQL statement is one of these pipelines with its values (workflows/statements.py).

No step reads an output of a step that may be skipped (Argo 4 has hung on that): the job image
comes from `resolve-image`, which always runs, in every pipeline.

Both end (on Argo, whatever happened) with `cleanup` (`steps/cleanup.py`), which deletes
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

Parameters that are job options (model, data, sizes, checkpoints...) come from the option spec
(`runtime/job_options.py`, `PipelineParam.of`): one declaration gives the flag, the dataclass
field and the parameter's description, default and enum. Job options the Argo templates do not
show (--chaos, --seed, --loss, ...) are parameters of the local engine only, passed to the job
step as `local_args`, so `elasticdl train|predict` run these definitions locally too.

Where each run writes: with `--versioned true` (what a CronWorkflow uses) the model goes to
`OUTPUT/runs/<run name>` and `OUTPUT/LATEST` names it once it is published, so a run never
overwrites an earlier model and a failed run never becomes the latest; `--warm_start true`
starts from the checkpoints of the model LATEST names. Intermediate data (converted SQL rows,
predictions on their way to a table) goes under `WORK_DIR/<run name>/`. Data is passed as URLs
(`gs://...`), never as Argo artifacts: the job's worker pods read it directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elasticdl.runtime import job_options
from elasticdl.runtime.distribution import default_image
from elasticdl.runtime.k8s import manifests
from elasticdl.runtime.k8s.manifests import TLS_MOUNT
from elasticdl.runtime.k8s.options import KUBERNETES, KubernetesOptions
from elasticdl.runtime.sql.credentials import PASSWORD_ENV
from elasticdl.workflows.parameters import Check, PipelineParam, Rule
from elasticdl.workflows.pipeline import Pipeline
from elasticdl.workflows.steps import (
    ARGO_ONLY,
    Engine,
    SecretEnv,
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

DEFAULT_ELASTICDL_IMAGE = default_image()
DEFAULT_KANIKO_IMAGE = "gcr.io/kaniko-project/executor:v1.23.2"
BOOL = ("false", "true")


def _common_params() -> tuple[PipelineParam, ...]:
    return (
        PipelineParam.of(job_options.INSTANCE_MANAGER),
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


def _job_params(table: tuple[job_options.Option, ...], *names: str) -> tuple[PipelineParam, ...]:
    """The job options called `names`, as pipeline parameters (runtime/job_options.py)."""
    return tuple(PipelineParam.of(o) for o in job_options.pick(table, *names))


def _other_params(
    table: tuple[job_options.Option, ...], placed: tuple[PipelineParam, ...]
) -> tuple[PipelineParam, ...]:
    """Every other job option that is a parameter on some engine, after those `placed` by
    name: the local-only ones (Argo's templates do not show them) and any option added to
    the spec for both engines without a place of its own here yet."""
    names = {p.name for p in placed}
    return tuple(PipelineParam.of(o) for o in table if o.engines and o.name not in names)


def _passed(*names: str) -> tuple[Value, ...]:
    """`--name=<parameter name>` for each name: a parameter the step takes as it is."""
    return tuple(flag(name, Param(name)) for name in names)


def _job_step(
    name: str,
    description: str,
    image: Value,
    args: tuple[Value, ...],
    table: tuple[job_options.Option, ...],
    argo_args: tuple[Value, ...],
    after: tuple[str, ...],
    outputs: tuple[StepOutput, ...] = (),
) -> Step:
    """The elastic job's master (`python -m elasticdl.steps.<name>`): `args` on both engines
    (then any other option of `table` the step takes on both: `--x=<parameter x>`), plus the
    Kubernetes flags on Argo and the local-only job options of `table` here."""
    flagged = {
        value.parts[0].text[2:].rstrip("=")
        for value in args
        if isinstance(value, Join) and isinstance(value.parts[0], Lit)
    }
    step_options = [o for o in table if job_options.STEP in o.takes and o.name not in flagged]
    both = [o.name for o in step_options if o.engines == job_options.BOTH]
    local = [o.name for o in step_options if o.engines == job_options.LOCAL_ONLY]
    return Step(
        name=name,
        description=description,
        image=image,
        module=f"elasticdl.steps.{name}",
        args=(*args, *_passed(*both)),
        argo_args=argo_args,
        local_args=_passed(*local),
        after=after,
        outputs=outputs,
        long_running=True,
        # With --tls the master reads the TLS Secret here (optional: absent, --tls says so).
        secrets=(SecretMount("tls", Param("tls_secret"), TLS_MOUNT),),
    )


def _check_null_policy(text: str) -> None:
    from elasticdl.runtime.sql.attributes import null_policy_problem

    problem = null_policy_problem(text)
    if problem:
        raise ValueError(f"--on_null: {problem}")


def _on_null() -> PipelineParam:
    return PipelineParam(
        "on_null",
        "NULL values in the selected rows: error (stop and say where), skip (leave the row out) "
        "or fill:VALUE (e.g. fill:0)",
        default="error",
        validate=_check_null_policy,
    )


def _input_checks(*sql_checks: Check) -> tuple[Check, ...]:
    """What both pipelines ask of their input: RecordIO --data, or --sql with --db (then the
    pipeline's own `sql_checks`), and on Argo a --work_dir for the converted rows."""
    return (
        Check(All(IsEmpty("data"), IsEmpty("sql")), "give --data (RecordIO) or --sql and --db"),
        Check(All(IsSet("data"), IsSet("sql")), "give either --data or --sql, not both"),
        Check(All(IsSet("sql"), IsEmpty("db")), "--sql needs --db (a SQLAlchemy URL)"),
        Check(
            All(IsSet("db_secret"), IsEmpty("sql")),
            "--db_secret applies to --sql input (it holds the password of --db)",
            engines=ARGO_ONLY,
        ),
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
        module="elasticdl.steps.cleanup",
        args=(flag("job_name", RunName()), flag("namespace", Namespace())),
        engines=ARGO_ONLY,
    )


# -- the Kubernetes flags of the job step (runtime/k8s/options.py) -----------------------------


def _kubernetes_options(with_ps: bool) -> tuple[job_options.Option, ...]:
    """The Kubernetes flags that are (Argo-only) parameters; a predict job has no PS."""
    return tuple(
        o
        for o in KUBERNETES
        if o.engines == job_options.ARGO_ONLY and (with_ps or not o.name.startswith("ps_"))
    )


KUBERNETES_FLAGS = tuple(o.name for o in _kubernetes_options(with_ps=True))
"""The master's Kubernetes flags that are pipeline parameters (runtime/k8s/options.py)."""


def _kubernetes_params(with_ps: bool) -> tuple[PipelineParam, ...]:
    """The pods' settings: the Kubernetes flags the job step takes (Argo only)."""
    return tuple(PipelineParam.of(o) for o in _kubernetes_options(with_ps))


def _kubernetes_args(job_image: Value, with_ps: bool) -> tuple[Value, ...]:
    """The job step's Kubernetes flags (Argo only): the parameters above, the pods' image (the
    step's own) and namespace (the workflow's)."""
    return (
        flag("pod_image", job_image),
        flag("pod_namespace", Namespace()),
        *(flag(o.name, Param(o.name)) for o in _kubernetes_options(with_ps)),
    )


def _kubernetes_problem(values: Mapping[str, str]) -> str | None:
    """What the master would refuse before it starts (say, a limit below its request), with
    its own message: the flags through `KubernetesOptions.cluster_spec`."""
    given: dict[str, Any] = {
        o.name: o.convert(values[o.name]) for o in _kubernetes_options(True) if o.name in values
    }
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
    names = tuple(o.name for o in _kubernetes_options(with_ps))
    return Rule(names, _kubernetes_problem, engines=ARGO_ONLY)


_DB_PASSWORD = {
    "secret_env": (SecretEnv(PASSWORD_ENV, "db_secret"),),
    "argo_args": (flag("db_secret", Param("db_secret")),),
}
"""What a step that connects to --db gets on Argo: the --db_secret key as $ELASTICDL_DB_PASSWORD
and the flag that tells it to use it (runtime/sql/credentials.py)."""


def _runtime(name: str, description: str, args: tuple, *, module: str = "", **kwargs) -> Step:
    """A step of the ElasticDL image; its program is elasticdl.steps.<module or name>."""
    return Step(
        name=name,
        description=description,
        image=Param("elasticdl_image"),
        module=f"elasticdl.steps.{(module or name).replace('-', '_')}",
        args=args,
        **kwargs,
    )


def _conversion(
    name: str,
    sql: str,
    output: Value,
    *,
    labelled: bool,
    label_last: bool | None = None,
    extra: tuple[Value, ...] = (),
    also: str = "",
) -> Step:
    """A `sql-to-recordio` step: the rows of parameter `sql` into RecordIO at `output`, run
    when `sql` is set. `labelled`: with --label; `label_last` (default: `labelled`): locally an
    empty --label means the last selected column, as in `elasticdl sql`."""
    label = (flag("label", Param("label")),) if labelled else ()
    last = labelled if label_last is None else label_last
    return _runtime(
        name,
        f"Convert the rows of --{sql} into RecordIO under the run's work directory{also}",
        (
            flag("db", Param("db")),
            flag("sql", Param(sql)),
            flag("output", output),
            *label,
            flag("on_null", Param("on_null")),
            *extra,
        ),
        module="sql-to-recordio",
        when=IsSet(sql),
        local_args=(Lit("--label_last=true"),) if last else (),
        **_DB_PASSWORD,
    )


def _trained_model_image(job: str) -> Step:
    """Argo's `resolve-image` of a job over a trained model: --image, or the TrainedModel's."""
    return Step(
        name="resolve-image",
        description=f"The image to run the {job} in: --image, or the TrainedModel's",
        image=Param("elasticdl_image"),
        module="elasticdl.steps.publish",
        args=(
            Lit("image"),
            flag("trained_model", Param("trained_model")),
            flag("image", Param("image")),
            flag("image_file", Out("image")),
        ),
        outputs=(StepOutput("image", f"the image to run the {job} job in"),),
        engines=ARGO_ONLY,
    )


def train_pipeline() -> Pipeline:
    """The training pipeline; see the module documentation."""
    model_dir = Choice(
        Is("versioned", "true"), Join(Param("output"), Lit("/runs/"), RunName()), Param("output")
    )
    converted = Join(Param("work_dir"), Lit("/"), RunName(), Lit("/train-data"))
    validation = Join(Param("work_dir"), Lit("/"), RunName(), Lit("/validation-data"))
    job_image = TaskOutput("resolve-image", "image")
    train = job_options.TRAIN
    params = (
        *_job_params(train, "model_def", "model_zoo", "params", "data", "sql", "db", "db_secret"),
        *_job_params(train, "label"),
        _on_null(),
        *_job_params(train, "validation_data"),
        PipelineParam(
            "validation_sql",
            "With --sql: a SELECT whose rows are the validation data, converted as --sql is and "
            "evaluated during and after training",
        ),
        *_job_params(train, "output"),
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
        *_job_params(train, "num_workers", "min_workers", "num_ps", "minibatch_size"),
        *_job_params(train, "num_epochs", "records_per_task", "checkpoint_steps"),
        *_job_params(train, "evaluation_steps"),
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
    params += _other_params(train, params)
    steps = (
        Step(
            name="resolve-image",
            description="The job image: --image, or the one build-image pushes "
            "(IMAGE_REPOSITORY:<run name>)",
            image=Param("elasticdl_image"),
            module="elasticdl.steps.publish",
            args=(
                Lit("image"),
                flag("image", Param("image")),
                flag("repository", Param("image_repository")),
                flag("tag", RunName()),
                flag("image_file", Out("image")),
            ),
            outputs=(StepOutput("image", "the image the training job runs in"),),
            engines=ARGO_ONLY,
        ),
        Step(
            name="build-image",
            description="Build and push the job image (the runtime plus the zoo) with kaniko",
            image=Param("kaniko_image"),
            command=("/kaniko/executor",),
            args=(
                flag("context", Param("zoo_context")),
                flag("dockerfile", Param("dockerfile")),
                flag("destination", job_image),
                flag("digest-file", Out("digest")),
                flag("image-name-with-digest-file", Out("image")),
                Lit("--cache=true"),
                flag("cache-repo", Param("cache_repo")),
            ),
            when=IsEmpty("image"),
            after=("resolve-image",),
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
        _conversion("sql-to-recordio", "sql", converted, labelled=True),
        _conversion("sql-to-recordio-validation", "validation_sql", validation, labelled=True),
        _job_step(
            "train",
            "Run the elastic training job (its master)",
            job_image,
            (
                *_passed("model_zoo", "model_def", "params"),
                flag("data", Choice(IsSet("sql"), converted, Param("data"))),
                flag("output", model_dir),
                flag(
                    "validation_data",
                    Choice(IsSet("validation_sql"), validation, Param("validation_data")),
                ),
                *_passed("num_workers", "min_workers", "num_ps"),
                *_passed("minibatch_size", "num_epochs", "records_per_task", "checkpoint_steps"),
                *_passed("evaluation_steps"),
                flag("job_name", RunName()),
                flag("instance_manager", Param("instance_manager")),
                flag(
                    "init_from_latest",
                    Choice(
                        Is("warm_start", "true"), Join(Param("output"), Lit("/LATEST")), Lit("")
                    ),
                ),
            ),
            train,
            argo_args=(*_kubernetes_args(job_image, with_ps=True), Lit("--resume=true")),
            after=("resolve-image", "build-image", "sql-to-recordio", "sql-to-recordio-validation"),
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
            Check(
                All(IsSet("sql"), IsEmpty("label")),
                "--sql needs --label (the label column)",
                engines=ARGO_ONLY,
            ),
            Check(All(IsEmpty("sql"), IsSet("label")), "--label applies to --sql input only"),
            Check(
                All(IsEmpty("sql"), IsSet("validation_sql")),
                "--validation_sql goes with --sql (its rows are converted alike)",
            ),
            Check(
                All(IsSet("validation_sql"), IsSet("validation_data")),
                "give either --validation_data or --validation_sql, not both",
            ),
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
    predict = job_options.PREDICT
    params = (
        *_job_params(predict, "data", "sql", "db", "db_secret", "trained_model", "output"),
        PipelineParam(
            "versioned",
            "true: write each run's predictions under OUTPUT/runs/<run> (what a schedule needs: "
            "an output directory is never reused)",
            default="false",
            enum=BOOL,
        ),
        *_job_params(predict, "output_format", "keep_columns"),
        _on_null(),
        PipelineParam(
            "output_table",
            "With --sql: write the selected rows plus the prediction into this table "
            "(created or replaced atomically; with --key, a column added to it)",
        ),
        PipelineParam("result_column", "Column of --output_table for the prediction", "prediction"),
        PipelineParam(
            "key", "With --output_table: fill the column in place, matching rows on this column"
        ),
        *_job_params(predict, "num_workers", "minibatch_size", "records_per_task"),
        PipelineParam(
            "image",
            "Job image; empty: the image recorded in the TrainedModel (docker_commit_id)",
            argo_only=True,
        ),
        *_common_params(),
        *_kubernetes_params(with_ps=False),
    )
    params += _other_params(predict, params)
    steps = (
        _conversion(
            "sql-to-recordio",
            "sql",
            converted,
            labelled=False,
            extra=(
                flag("write_table", Param("output_table")),
                flag("write_column", Param("result_column")),
                flag("write_key", Param("key")),
                flag("trained_model", Param("trained_model")),
            ),
            also=" (with --output_table: plan the write first, refusing one that would replace "
            "what PREDICT did not create)",
        ),
        _trained_model_image("prediction"),
        _job_step(
            "predict",
            "Run the elastic prediction job (its master)",
            TaskOutput("resolve-image", "image"),
            (
                flag("data", Choice(IsSet("sql"), converted, Param("data"))),
                flag("trained_model", Param("trained_model")),
                flag("output", Choice(IsSet("output_table"), staged, predictions)),
                flag("output_format", Param("output_format")),
                flag(
                    "keep_columns", Choice(IsSet("output_table"), Lit("*"), Param("keep_columns"))
                ),
                *_passed("num_workers", "minibatch_size", "records_per_task"),
                flag("job_name", RunName()),
                flag("instance_manager", Param("instance_manager")),
            ),
            predict,
            argo_args=_kubernetes_args(TaskOutput("resolve-image", "image"), with_ps=False),
            after=("sql-to-recordio", "resolve-image"),
        ),
        _runtime(
            "write-back",
            "Write the selected rows and their predictions into --output_table",
            (
                flag("db", Param("db")),
                flag("predictions", staged),
                flag("data", converted),
            ),
            when=IsSet("output_table"),
            after=("predict",),
            **_DB_PASSWORD,
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


def evaluate_pipeline() -> Pipeline:
    """The evaluation pipeline (SQLFlow's TO EVALUATE); see the module documentation."""
    converted = Join(Param("work_dir"), Lit("/"), RunName(), Lit("/evaluate-data"))
    evaluate = job_options.EVALUATE
    params = (
        *_job_params(evaluate, "data", "sql", "db"),
        *_job_params(job_options.PREDICT, "db_secret"),
        *_job_params(evaluate, "trained_model"),
        PipelineParam("label", "With --sql: the label column of the selected rows"),
        _on_null(),
        *_job_params(evaluate, "eval_metrics"),
        PipelineParam(
            "output_table",
            "With --sql: write the metrics into this table, one row (created, or replaced when "
            "an earlier EVALUATE created it)",
        ),
        *_job_params(evaluate, "num_workers", "minibatch_size", "records_per_task"),
        PipelineParam(
            "image",
            "Job image; empty: the image recorded in the TrainedModel (docker_commit_id)",
            argo_only=True,
        ),
        *_common_params(),
        *_kubernetes_params(with_ps=False),
    )
    params += _other_params(evaluate, params)
    steps = (
        _conversion("sql-to-recordio", "sql", converted, labelled=True, label_last=False),
        _trained_model_image("evaluation"),
        _job_step(
            "evaluate",
            "Run the elastic evaluation job (its master); the metrics as an output",
            TaskOutput("resolve-image", "image"),
            (
                flag("data", Choice(IsSet("sql"), converted, Param("data"))),
                flag("trained_model", Param("trained_model")),
                flag("metrics_file", Out("metrics")),
                *_passed("num_workers", "minibatch_size", "records_per_task"),
                flag("job_name", RunName()),
                flag("instance_manager", Param("instance_manager")),
            ),
            evaluate,
            argo_args=_kubernetes_args(TaskOutput("resolve-image", "image"), with_ps=False),
            after=("sql-to-recordio", "resolve-image"),
            outputs=(StepOutput("metrics", "the metrics over all the data (JSON)"),),
        ),
        _runtime(
            "write-metrics",
            "Write the metrics into --output_table, one row",
            (
                flag("db", Param("db")),
                flag("table", Param("output_table")),
                flag("metrics", TaskOutput("evaluate", "metrics")),
            ),
            when=IsSet("output_table"),
            after=("evaluate",),
            **_DB_PASSWORD,
        ),
    )
    checks = (
        *_input_checks(),
        Check(
            All(IsSet("output_table"), IsEmpty("sql")),
            "--output_table needs --sql (a SQL source: the metrics go into its database)",
        ),
        _NO_KUBERNETES_HERE,
        _kubernetes_rule(with_ps=False),
    )
    return Pipeline(
        name="evaluate",
        template_name="elasticdl-evaluate",
        description="Evaluate a trained model as an elastic job, optionally into a table",
        params=params,
        steps=steps,
        exit_step=_cleanup(),
        checks=checks,
    )


PIPELINES = {"train": train_pipeline, "predict": predict_pipeline, "evaluate": evaluate_pipeline}


def pipeline(name: str) -> Pipeline:
    try:
        return PIPELINES[name]()
    except KeyError:
        raise ValueError(f"unknown pipeline {name!r}; known: {', '.join(PIPELINES)}") from None
