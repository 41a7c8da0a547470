"""The options of each job kind, declared once: name, type, default, help, choices, and where
each is taken. Everything else is derived from these tables:

* the `elasticdl train|predict|evaluate` flags and the Python API's keyword arguments
  (`add_arguments(parser, TRAIN, CLI)`; the API parses its keywords with the same parser);
* the job step's flags (`python -m elasticdl.steps.train`: `add_arguments(parser, TRAIN, STEP)`);
* the fields of `TrainOptions` / `InferenceOptions` (`options_class`) and of `JobConfig`
  (the options marked CONFIG, which the master hands to its PS and workers);
* the pipeline parameters (`workflows/parameters.py: PipelineParam.of(option)`): description,
  default, enum, bounds, and on which engines the job step gets it (`engines`).

Adding an option is one `Option(...)` line in the table of its job kind (or in `_shared` when
train and predict both take it): the flag, the keyword, the dataclass field (`options.<dest>`
in the master), the step's flag and the pipeline parameter follow. By default it is a
parameter of the local engine only (the Argo templates stay as they are); `engines=BOTH` makes
it an Argo parameter too, appended to the template's parameters and the job step's argv (place
it in `workflows/definitions.py` for another order). Mark it CONFIG (`takes=_JOB_CONFIG`) to
have it in `JobConfig`, which the parameter servers and workers read.

This module is pure data plus those derivations; it imports nothing of the project when it loads
(two validators import the parsers they check with), so every layer may use it (see
tests/test_layering.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CLI = "cli"
"""A flag of `elasticdl <job>` and a keyword of `elasticdl.<job>(...)`."""
STEP = "step"
"""A flag of the job's pipeline step (`python -m elasticdl.steps.<job>`)."""
FIELD = "field"
"""A field of the job's options dataclass (TrainOptions / InferenceOptions)."""
CONFIG = "config"
"""A field of JobConfig too: the parameter servers and workers read it."""
JOB = frozenset({CLI, STEP, FIELD})

LOCAL, ARGO = "local", "argo"
BOTH = frozenset({LOCAL, ARGO})
LOCAL_ONLY = frozenset({LOCAL})
ARGO_ONLY = frozenset({ARGO})
NOWHERE: frozenset[str] = frozenset()


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""The default of an option that must be given."""


def parse_bool(text: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (true/false)")


@dataclass(frozen=True)
class Option:
    """One option. `engines`: where it is a pipeline parameter that the job step receives
    (both, the local engine only, Argo only, or NOWHERE: the pipeline sets it itself, or it
    is no parameter). `takes`: the surfaces that declare it (CLI, STEP, FIELD, CONFIG)."""

    name: str
    help: str
    type: type = str
    default: Any = ""
    choices: tuple[str, ...] | None = None
    field: str = ""
    """The dataclass field (and argparse dest), when not `name`."""
    aliases: tuple[str, ...] = ()
    """Older spellings of the flag, still accepted."""
    group: str = "job"
    minimum: int | None = None
    maximum: int | None = None
    engines: frozenset[str] = LOCAL_ONLY
    takes: frozenset[str] = JOB
    argo_default: Any = None
    """The default on Argo when it differs from `default` (the step's and the local one)."""
    validate: Callable[[str], object] | None = None
    """A further check of the text (raises ValueError naming the flag)."""

    @property
    def dest(self) -> str:
        return self.field or self.name

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def text(self, value: Any) -> str:
        """`value` as a flag's text (what a pipeline parameter holds)."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)

    def convert(self, text: str) -> Any:
        """The text of a flag as the option's type; "" is None for an option defaulting to
        None (a pipeline passes "" for "not given")."""
        if text == "" and self.default is None:
            return None
        if self.type is bool:
            return parse_bool(text)
        return self.type(text)

    def check_range(self, value: Any) -> None:
        """ValueError naming the flag when `value` is out of bounds."""
        if value is None or isinstance(value, bool):
            return
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"--{self.name} must be >= {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"--{self.name} must be <= {self.maximum}, got {value}")


def _typed(option: Option) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        return option.convert(text)

    convert.__name__ = option.type.__name__  # argparse names it in "invalid int value"
    return convert


def add_arguments(
    parser: argparse.ArgumentParser, options: Iterable[Option], surface: str = CLI
) -> None:
    """The options that `surface` takes as argparse flags, in their help groups."""
    groups: dict[str, Any] = {}
    for option in options:
        if surface not in option.takes:
            continue
        if option.group not in groups:
            groups[option.group] = parser.add_argument_group(option.group)
        kwargs: dict[str, Any] = {
            "dest": option.dest,
            "help": option.help or None,
            "metavar": "BOOL" if option.type is bool else option.name.upper(),
        }
        if option.required:
            kwargs["required"] = True
        else:
            kwargs["default"] = option.default
        if option.choices:
            kwargs["choices"] = list(option.choices)
            del kwargs["metavar"]  # argparse shows {a,b}
        if option.type is not str or option.default is None:
            kwargs["type"] = _typed(option)
        flags = [f"--{option.name}", *(f"--{alias}" for alias in option.aliases)]
        groups[option.group].add_argument(*flags, **kwargs)


def check_ranges(options: Iterable[Option], values: Any) -> None:
    """ValueError naming the first option of `values` (a dataclass) out of its bounds."""
    for option in options:
        if hasattr(values, option.dest):
            option.check_range(getattr(values, option.dest))


def options_class(
    options: Iterable[Option],
    *,
    surface: str = FIELD,
    positional: tuple[str, ...] = (),
    extra: tuple[tuple[str, type, Any], ...] = (),
    frozen: bool = False,
) -> Callable[[type], type]:
    """A class decorator: the class becomes a dataclass whose fields are the options that
    `surface` takes (named by their dest; `positional` ones first, without default), then
    `extra` (name, type, default) fields. The class body holds only methods."""
    chosen = [o for o in options if surface in o.takes]

    def decorate(cls: type) -> type:
        fields = {o.dest: (o.type, None if o.required else o.default) for o in chosen}
        fields.update({name: (kind, default) for name, kind, default in extra})
        annotations: dict[str, Any] = {name: fields[name][0] for name in positional}
        for name, (kind, default) in fields.items():
            if name not in annotations:
                annotations[name] = kind
                setattr(cls, name, default)
        cls.__annotations__ = annotations
        return dataclass(frozen=frozen)(cls)

    return decorate


def copy_fields(target: type, source: Any, **overrides: Any) -> dict[str, Any]:
    """Keyword arguments for dataclass `target`: the fields `source` has by the same name,
    then `overrides`."""
    names = {f.name for f in dataclasses.fields(target)}
    found = {name: getattr(source, name) for name in names if hasattr(source, name)}
    return {**found, **overrides}


def by_name(options: Iterable[Option]) -> dict[str, Option]:
    return {o.name: o for o in options}


def pick(options: Iterable[Option], *names: str) -> tuple[Option, ...]:
    """The options called `names`, in that order (KeyError for an unknown one)."""
    table = by_name(options)
    return tuple(table[name] for name in names)


def values_from_namespace(
    options: Iterable[Option], args: argparse.Namespace, engine: str = LOCAL
) -> dict[str, str]:
    """The pipeline parameter values (text) that parsed flags give, for the options that are
    parameters on `engine` and were given (not None)."""
    values = {}
    for option in options:
        if engine in option.engines and CLI in option.takes:
            value = getattr(args, option.dest, None)
            if value is not None:
                values[option.name] = option.text(value)
    return values


class RaisingParser(argparse.ArgumentParser):
    """An argparse parser that raises ValueError (`<prog>: <what is wrong>`) instead of
    printing usage and exiting: for flags parsed inside a process (the Python API, the local
    engine's steps)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(f"{self.prog}: {message}")


def namespace_from_kwargs(
    parser: argparse.ArgumentParser, kwargs: Mapping[str, Any]
) -> argparse.Namespace:
    """Keyword arguments named like the flags (or their aliases), strings or values, parsed
    with the flags' own parser; None means not given."""
    argv = [f"--{name}={_text(value)}" for name, value in kwargs.items() if value is not None]
    return parser.parse_args(argv)


def parse_kwargs(
    prog: str, options: Iterable[Option], surface: str, kwargs: Mapping[str, Any]
) -> argparse.Namespace:
    """`namespace_from_kwargs` with a parser of the options `surface` takes, named `prog`."""
    parser = RaisingParser(prog=prog)
    add_arguments(parser, options, surface)
    return namespace_from_kwargs(parser, kwargs)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- the tables ---------------------------------------------------------------------------------

_JOB_CONFIG = JOB | {CONFIG}
TASK_TIMEOUT_FLOOR_S = 15.0
"""The least no-progress time before a worker is taken for hung; above it the limit is derived
from the minibatch times the job has seen (runtime/master/task_timeout.py)."""
ELASTICDL_COMPAT_GROUP = "ElasticDL's flags (accepted for its command lines)"
"""The help group of flags that only ElasticDL's own command lines use (behind --help-all)."""
_SQL_GROUP = "SQL input (instead of --data)"


def _workers(default: int) -> tuple[Option, ...]:
    return (
        Option(
            "num_workers",
            "Number of workers",
            int,
            default,
            minimum=1,
            engines=BOTH,
            takes=_JOB_CONFIG,
        ),
    )


DEFAULT_MINIBATCH = 64
MIN_MINIBATCHES_PER_EPOCH = 16


def auto_minibatch(records_per_epoch: int) -> int:
    """Training's minibatch when --minibatch_size is not given: 64, or fewer on a small data
    set, so that an epoch has at least 16 minibatches (a table of 110 rows trains 6 at a time:
    at 64, ten epochs would be 20 steps, too few to learn from)."""
    return max(1, min(DEFAULT_MINIBATCH, records_per_epoch // MIN_MINIBATCHES_PER_EPOCH))


def _shared(
    minibatch_size: int | None, timeout_help: str, chaos_example: str
) -> tuple[Option, ...]:
    """The job options training and prediction both take."""
    size_help = "Records per minibatch" + (
        " (default: 64, fewer on a small data set: an epoch makes 16 at least)"
        if minibatch_size is None
        else ""
    )
    return (
        Option(
            "minibatch_size",
            size_help,
            int,
            minibatch_size,
            minimum=1,
            engines=BOTH,
            takes=_JOB_CONFIG,
        ),
        Option(
            "records_per_task",
            "Records a worker takes per task (training: at most; fewer when an epoch would "
            "have fewer than 2 tasks per worker)",
            int,
            1024,
            minimum=1,
            engines=BOTH,
            takes=_JOB_CONFIG,
        ),
        Option(
            "max_worker_relaunches",
            "Relaunches of failed workers the job allows",
            int,
            3,
            minimum=0,
        ),
        Option(
            "max_task_retries", "Times a task is retried before the job fails", int, 3, minimum=0
        ),
        Option(
            "task_timeout_floor",
            timeout_help,
            float,
            TASK_TIMEOUT_FLOOR_S,
            minimum=0.0,
            field="task_timeout_floor_s",
        ),
        Option(
            "master_port",
            "Port of the master's gRPC server (0: any free port)",
            int,
            0,
            minimum=0,
            maximum=65535,
        ),
        Option("chaos", f"Scripted failures to test elasticity, e.g. {chaos_example}"),
        Option(
            "intra_op_threads",
            "TensorFlow threads per worker/PS process (0: TensorFlow decides)",
            int,
            0,
            minimum=0,
            takes=_JOB_CONFIG,
        ),
        Option(
            "job_name", "The job's name (default: a new one)", engines=NOWHERE, takes=_JOB_CONFIG
        ),
        Option("log_dir", "Where the job's logs go (default: a new temporary directory)"),
    )


_ENGINE = Option(
    "engine",
    "local: this machine; argo: submit the pipeline to --argo_server (its flags: --help-all)",
    default="local",
    choices=(LOCAL, ARGO),
    engines=NOWHERE,
    takes=frozenset({CLI}),
)
INSTANCE_MANAGER = Option(
    "instance_manager",
    "Where the master starts parameter servers and workers: kubernetes (a pod each, created "
    "through the Kubernetes API and relaunched when preempted; the default on Argo) or local "
    "(processes in the master's pod; the only choice on the local engine, which runs them on "
    "this machine)",
    default="local",
    argo_default="kubernetes",
    choices=("local", "kubernetes"),
    group="pipeline step",
    engines=BOTH,
    takes=frozenset({STEP}),
)


def _sql_input(name: str, help: str) -> Option:
    """--sql and --db: the front end's (and the pipeline's) input; the job step gets --data."""
    return Option(name, help, group=_SQL_GROUP, engines=BOTH, takes=frozenset({CLI}))


_SQL = _sql_input(
    "sql", "A SELECT whose rows are the input (instead of --data); needs --db and --work_dir"
)
_DB = _sql_input(
    "db",
    "SQLAlchemy URL of the database --sql reads, e.g. postgresql+psycopg://u@host/db (on Argo "
    "without its password: give that with --db_secret)",
)

_SECRET_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SECRET_KEY = r"[-._a-zA-Z0-9]+"


def split_db_secret(text: str) -> tuple[str, str]:
    """`NAME:KEY` of --db_secret as (Secret name, key); ValueError (one line) unless NAME is a
    Kubernetes Secret name (a DNS-1123 subdomain) and KEY a Secret key ([-._a-zA-Z0-9]+)."""
    name, sep, key = text.partition(":")
    usage = "give NAME:KEY, a Kubernetes Secret and the key holding the database password"
    if not sep:
        raise ValueError(f"--db_secret {text!r}: {usage}")
    if len(name) > 253 or not re.fullmatch(_SECRET_NAME, name):
        raise ValueError(
            f"--db_secret {text!r}: {name!r} is not a Secret name (lowercase letters, digits, "
            "'-' and '.', at most 253 characters); " + usage
        )
    if len(key) > 253 or key in (".", "..") or not re.fullmatch(_SECRET_KEY, key):
        raise ValueError(
            f"--db_secret {text!r}: {key!r} is not a Secret key (letters, digits, '-', '_' "
            "and '.'); " + usage
        )
    return name, key


def _check_db_secret(text: str) -> None:
    if text:
        split_db_secret(text)


_DB_SECRET = Option(
    "db_secret",
    "NAME:KEY of a Kubernetes Secret holding the --db password (Argo): the steps that connect "
    "read it through secretKeyRef, so it is never written into the workflow",
    group=_SQL_GROUP,
    engines=ARGO_ONLY,
    takes=frozenset({CLI}),
    validate=_check_db_secret,
)


def _check_feature_columns(text: str) -> None:
    if text:
        from elasticdl.runtime.column_spec import parse_groups
        from elasticdl.runtime.sql.lexer import StatementError

        try:
            parse_groups(text)
        except StatementError as err:
            raise ValueError(f"--feature_columns: {err.message}") from None


def _check_eval_metrics(text: str) -> None:
    if text:
        from elasticdl.runtime.metrics_by_name import metric_names_problem

        problem = metric_names_problem(text)
        if problem:
            raise ValueError(f"--eval_metrics {text!r}: {problem}")


def _eval_metrics(takes: frozenset[str], engines: frozenset[str]) -> Option:
    return Option(
        "eval_metrics",
        "Keras metrics to evaluate instead of the model's own, e.g. Accuracy,AUC",
        group="model",
        engines=engines,
        takes=takes,
        validate=_check_eval_metrics,
    )


_TLS_DIR = Option(
    "tls_dir",
    "TLS on the job's channels: a directory with tls.crt, tls.key [, ca.crt, server_name] "
    "(local engine; on Kubernetes --tls with --tls_secret; default: no TLS, the job's secret "
    "only)",
    takes=_JOB_CONFIG,
)

TRAIN: tuple[Option, ...] = (
    Option(
        "model_zoo",
        "Model zoo in the job image (a directory such as /model_zoo, or a git "
        "URL); empty: the built-in zoo",
        default=None,
        group="model",
        engines=BOTH,
    ),
    Option(
        "model_def",
        "Model definition in the zoo, e.g. mnist.mnist_functional_api.custom_model",
        default=REQUIRED,
        group="model",
        engines=BOTH,
        takes=_JOB_CONFIG,
    ),
    Option(
        "params",
        'Model parameters, e.g. "hidden_units=[10, 20], lr=0.01"',
        aliases=("model_params",),
        group="model",
        engines=BOTH,
        takes=_JOB_CONFIG,
    ),
    Option(
        "dataset_fn",
        "The zoo's dataset function (module.function), when not the model's own",
        default=None,
        aliases=("input_fn",),
        group="model",
        takes=_JOB_CONFIG,
    ),
    Option(
        "loss",
        "The zoo's loss function (module.function), when not the model's own",
        default=None,
        group="model",
        takes=_JOB_CONFIG,
    ),
    Option(
        "optimizer",
        "The zoo's optimizer function (module.function), when not the model's own",
        default=None,
        group="model",
        takes=_JOB_CONFIG,
    ),
    Option(
        "eval_metrics_fn",
        "The zoo's metrics function (module.function), when not the model's own",
        default=None,
        group="model",
        takes=_JOB_CONFIG,
    ),
    _eval_metrics(_JOB_CONFIG, BOTH),
    Option(
        "feature_columns",
        'Feature columns in SQLFlow\'s COLUMN syntax, e.g. "a, BUCKET(b, [1, 5])" (default: '
        "every column but the label, for a model that takes feature_columns)",
        group="model",
        engines=BOTH,
        validate=_check_feature_columns,
    ),
    Option(
        "data",
        "Training data: RecordIO files (URL, glob or directory)",
        default=None,
        field="training_data",
        aliases=("training_data",),
        group="data and output",
        engines=BOTH,
    ),
    Option(
        "output",
        "Where the trained model goes, e.g. gs://bucket/models/m1",
        default=REQUIRED,
        group="data and output",
        engines=BOTH,
    ),
    Option(
        "validation_data",
        "RecordIO files to evaluate on (URL, glob or dir)",
        group="data and output",
        engines=BOTH,
    ),
    Option(
        "evaluation_steps",
        "Also evaluate every N model versions (0: at the end)",
        int,
        0,
        minimum=0,
        group="data and output",
        engines=BOTH,
    ),
    Option("tensorboard_dir", "TensorBoard logs, live (default: OUTPUT/tensorboard)"),
    _SQL,
    _DB,
    _DB_SECRET,
    _sql_input("label", "The label column of the --sql rows"),
    Option(
        "checkpoint_steps",
        "Checkpoint every N model versions (0: never)",
        int,
        0,
        minimum=0,
        group="checkpoints",
        engines=BOTH,
        takes=_JOB_CONFIG,
    ),
    Option(
        "keep_checkpoint_max",
        "Checkpoints to keep (the oldest go first)",
        int,
        3,
        minimum=0,
        group="checkpoints",
        takes=_JOB_CONFIG,
    ),
    Option(
        "checkpoint_dir",
        "Where checkpoints go (empty with --checkpoint_steps: OUTPUT/checkpoints)",
        group="checkpoints",
        takes=_JOB_CONFIG,
    ),
    Option(
        "checkpoint_dir_for_init",
        "Start from the latest checkpoint in this directory",
        group="checkpoints",
        takes=_JOB_CONFIG,
    ),
    Option(
        "max_ps_relaunches",
        "Relaunches of failed parameter servers the job allows",
        int,
        3,
        minimum=0,
        group="checkpoints",
    ),
    *_workers(2),
    Option(
        "min_workers",
        "The job goes on while at least this many workers are alive (at most num_workers)",
        int,
        1,
        minimum=1,
        engines=BOTH,
    ),
    Option(
        "spare_workers",
        "Idle workers kept started (TensorFlow imported, model built) to take a lost worker's "
        "place at once; each costs a worker's memory (a pod on Kubernetes)",
        int,
        0,
        minimum=0,
        maximum=8,
        engines=BOTH,
    ),
    Option(
        "num_ps",
        "Number of parameter servers",
        int,
        1,
        aliases=("num_ps_pods",),  # ElasticDL's spelling
        minimum=1,
        engines=BOTH,
        takes=_JOB_CONFIG,
    ),
    Option(
        "distribution_strategy",
        "ElasticDL's flag, accepted for its command lines: parameter servers are the only "
        "strategy here",
        default="ParameterServerStrategy",
        choices=("ParameterServerStrategy",),
        group=ELASTICDL_COMPAT_GROUP,
        engines=NOWHERE,
        takes=frozenset({CLI}),
    ),
    Option(
        "num_epochs",
        "Passes over the training data",
        int,
        1,
        minimum=1,
        engines=BOTH,
        takes=_JOB_CONFIG,
    ),
    Option(
        "use_async",
        "Asynchronous SGD (the default, unless --grads_to_wait is given)",
        bool,
        None,
        takes=_JOB_CONFIG,
    ),
    Option(
        "grads_to_wait",
        "Synchronous SGD: average this many pushes per model version",
        int,
        None,
        minimum=1,
        takes=_JOB_CONFIG,
    ),
    Option(
        "lr_staleness_modulation",
        "Scale the learning rate by 1/staleness (asynchronous SGD)",
        bool,
        False,
        takes=_JOB_CONFIG,
    ),
    Option(
        "keras_version",
        "Keras of every process of the job: 2 (tf_keras, for Keras 2 model files), 3, or "
        "auto (2 when the model file needs it: feature columns, tf_keras imports, ...)",
        default="auto",
        choices=("auto", "2", "3"),
        group="model",
        engines=BOTH,
        takes=_JOB_CONFIG,
    ),
    Option(
        "jit_compile",
        "Compile the workers' training step with XLA, as Keras's jit_compile: auto (XLA on a "
        "worker with a GPU or another accelerator, as Keras decides; not on CPUs only), true, "
        "or false; a step that XLA cannot compile runs without it",
        default="auto",
        choices=("auto", "true", "false"),
        engines=BOTH,
        takes=_JOB_CONFIG,
    ),
    Option(
        "staleness_tolerance",
        "Async: a push up to this many model versions behind is applied at the full learning "
        "rate, an older one at rate x tolerance / staleness (0: always the full rate)",
        int,
        4,
        minimum=0,
        takes=_JOB_CONFIG,
    ),
    Option("seed", "Random seed of the data order and the model", int, 0, takes=_JOB_CONFIG),
    Option("shuffle", "Shuffle the tasks of each epoch", bool, True, takes=_JOB_CONFIG),
    _TLS_DIR,
    *_shared(
        None,
        "The least seconds without progress before a worker is taken for hung (the limit is "
        "derived from observed minibatch times above it; a worker's first task gets longer)",
        "worker1:kill@tasks=3",
    ),
    _ENGINE,
    INSTANCE_MANAGER,
    Option(
        "init_from_latest",
        "a LATEST pointer URL: start from the checkpoints of the model it names",
        group="pipeline step",
        engines=NOWHERE,
        takes=frozenset({STEP}),
    ),
    Option(
        "resume",
        "true: if --output holds only the checkpoints of an interrupted attempt "
        "(a pod killed mid-job and retried), continue from them",
        default="false",
        choices=("false", "true"),
        group="pipeline step",
        engines=NOWHERE,
        takes=frozenset({STEP}),
    ),
)
"""`elasticdl train`, `elasticdl.train(...)`, the train step and the train pipeline."""

_PREDICT_ONLY = ("output", "output_format", "keep_columns", "engine", "db_secret", "tls_dir")

PREDICT: tuple[Option, ...] = (
    Option(
        "data",
        "Data to predict on: RecordIO files (URL, glob or directory)",
        default=None,
        group="data and output",
        engines=BOTH,
    ),
    _SQL,
    _DB,
    _DB_SECRET,
    Option(
        "trained_model",
        "The --output of a training job (a model URL)",
        default=REQUIRED,
        group="data and output",
        engines=BOTH,
        takes=_JOB_CONFIG,
    ),
    Option(
        "output",
        "New directory (URL) for the prediction parts",
        group="data and output",
        engines=BOTH,
    ),
    Option(
        "output_format",
        "Format of the prediction parts",
        default="recordio",
        choices=("recordio", "csv"),
        group="data and output",
        engines=BOTH,
        takes=_JOB_CONFIG,
    ),
    Option(
        "keep_columns",
        "Input columns copied into each output row (default: id columns)",
        group="data and output",
        engines=BOTH,
    ),
    Option(
        "model_zoo",
        "Zoo to rebuild the model from (default: the model's)",
        default=None,
        group="model",
    ),
    _eval_metrics(frozenset({FIELD, CONFIG}), NOWHERE),
    *_workers(2),
    *_shared(
        256,
        "The least seconds a task may take before its worker counts as hung (the limit is "
        "derived from the slowest finished task above it)",
        "worker1:kill@tasks=2",
    ),
    _TLS_DIR,
    _ENGINE,
    INSTANCE_MANAGER,
)
"""`elasticdl predict`, `elasticdl.predict(...)`, the predict step and the predict pipeline."""

EVALUATE: tuple[Option, ...] = (
    *(o for o in PREDICT if o.name not in _PREDICT_ONLY and o.name != "eval_metrics"),
    _eval_metrics(_JOB_CONFIG, BOTH),
)
"""`elasticdl evaluate`, `elasticdl.evaluate(...)`, the evaluate step and the evaluate pipeline."""

JOBS: dict[str, tuple[Option, ...]] = {"train": TRAIN, "predict": PREDICT, "evaluate": EVALUATE}


def config_options() -> tuple[Option, ...]:
    """The options JobConfig holds: those marked CONFIG in any job kind (train's first)."""
    seen: dict[str, Option] = {}
    for table in (TRAIN, PREDICT):
        for option in table:
            if CONFIG in option.takes:
                seen.setdefault(option.dest, option)
    return tuple(seen.values())
