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

Both end (on Argo, whatever happened) with `cleanup`, which deletes the job's leftover pods and
services by their `elasticdl-job-name` label.

Where each run writes: with `--versioned true` (what a CronWorkflow uses) the model goes to
`OUTPUT/runs/<run name>` and `OUTPUT/LATEST` names it once it is published, so a run never
overwrites an earlier model and a failed run never becomes the latest; `--warm_start true`
starts from the checkpoints of the model LATEST names. Intermediate data (converted SQL rows,
predictions on their way to a table) goes under `WORK_DIR/<run name>/`. Data is passed as URLs
(`gs://...`), never as Argo artifacts: the job's worker pods read it directly.
"""

from __future__ import annotations

from elasticdl import __version__
from elasticdl.workflows.parameters import Check, PipelineParam
from elasticdl.workflows.pipeline import Pipeline
from elasticdl.workflows.steps import (
    ARGO_ONLY,
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
)

JOB_LABEL = "elasticdl-job-name"
"""Label on every pod and service an elastic job creates; its value is the job name (the
workflow's name on Argo). Never a `workflows.argoproj.io/*` label: Argo would adopt the pods."""

DEFAULT_ELASTICDL_IMAGE = f"elasticdl/elasticdl:{__version__}"
DEFAULT_KANIKO_IMAGE = "gcr.io/kaniko-project/executor:v1.23.2"
DEFAULT_KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.33.0"
BOOL = ("false", "true")


def _common_params() -> tuple[PipelineParam, ...]:
    return (
        PipelineParam(
            "instance_manager",
            "Where the master starts workers: local (processes in the master's pod) or "
            "kubernetes (one pod each; available with the Kubernetes instance manager)",
            default="local",
            enum=("local", "kubernetes"),
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
        PipelineParam(
            "kubectl_image",
            "Image with kubectl as entry point, for the cleanup of leftover job pods",
            default=DEFAULT_KUBECTL_IMAGE,
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


def _cleanup() -> Step:
    return Step(
        name="cleanup",
        description="Delete the job's leftover pods and services (by label), whatever happened",
        image=Param("kubectl_image"),
        command=("kubectl",),
        args=(
            Lit("delete"),
            Lit("pods,services"),
            Join(Lit(f"--selector={JOB_LABEL}="), RunName()),
            flag("namespace", Namespace()),
            Lit("--ignore-not-found=true"),
            Lit("--wait=false"),
        ),
        engines=ARGO_ONLY,
        env=(),
    )


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
        Check(All(IsEmpty("data"), IsEmpty("sql")), "give --data (RecordIO) or --sql and --db"),
        Check(All(IsSet("data"), IsSet("sql")), "give either --data or --sql, not both"),
        Check(All(IsSet("sql"), IsEmpty("db")), "--sql needs --db (a SQLAlchemy URL)"),
        Check(All(IsSet("sql"), IsEmpty("label")), "--sql needs --label (the label column)"),
        Check(All(IsEmpty("sql"), IsSet("label")), "--label applies to --sql input only"),
        Check(
            All(IsSet("sql"), IsEmpty("work_dir")),
            "--sql needs --work_dir: a directory URL (gs://...) for the converted rows",
            argo_only=True,
        ),
        Check(
            All(IsEmpty("image"), IsEmpty("zoo_context")),
            "give --image (a built job image) or --zoo_context (a build context for kaniko)",
            argo_only=True,
        ),
        Check(
            All(IsEmpty("image"), IsEmpty("image_repository")),
            "building the job image needs --image_repository (where kaniko pushes it)",
            argo_only=True,
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
        Check(All(IsEmpty("data"), IsEmpty("sql")), "give --data (RecordIO) or --sql and --db"),
        Check(All(IsSet("data"), IsSet("sql")), "give either --data or --sql, not both"),
        Check(All(IsSet("sql"), IsEmpty("db")), "--sql needs --db (a SQLAlchemy URL)"),
        Check(
            All(IsSet("sql"), IsEmpty("work_dir")),
            "--sql needs --work_dir: a directory URL (gs://...) for the converted rows",
            argo_only=True,
        ),
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
