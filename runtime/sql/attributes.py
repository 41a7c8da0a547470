"""WITH keys: where each goes, as SQLFlow spells them and as this project always has.

A table, not code: `route(key)` says which section a key belongs to and under which name.

| key                                    | section    | goes to                                   |
|----------------------------------------|------------|-------------------------------------------|
| `model.NAME`, `NAME`                   | model      | the model constructor's argument NAME     |
| `model.optimizer`, `model.X_optimizer` | model      | an optimizer by Keras name (`RMSprop`)    |
| `optimizer.ARG`, `X_optimizer.ARG`     | model      | its argument (`learning_rate`)            |
| `train.KEY`                            | train      | the job option `TRAIN_KEYS[KEY]`          |
| `validation.KEY`                       | validation | `VALIDATION_KEYS[KEY]` (SELECT, metrics)  |
| `engine.KEY`                           | engine     | the job option `ENGINE_KEYS[KEY]`         |
| `predict.KEY`                          | predict    | the job option `PREDICT_KEYS[KEY]`        |

Optimizer keys travel to the job as dotted params (`optimizer.learning_rate=0.1`,
`optimizer=RMSprop`), which the model-zoo loader binds (runtime/model_spec.py): to the model's
constructor when it takes an argument of that name, else to the job's optimizer. Values are
checked here, before anything runs: an option's type, a metric or optimizer name.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elasticdl.runtime.sql.lexer import StatementError

TRAIN_KEYS: dict[str, str] = {
    "epoch": "num_epochs",
    "epochs": "num_epochs",
    "num_epochs": "num_epochs",
    "batch_size": "minibatch_size",
    "minibatch_size": "minibatch_size",
    "verbose": "verbose",
    "records_per_task": "records_per_task",
    "validation.select": "validation_select",
    "evaluation_steps": "evaluation_steps",
    "checkpoint_steps": "checkpoint_steps",
    "shuffle": "shuffle",
    "seed": "seed",
    "use_async": "use_async",
    "grads_to_wait": "grads_to_wait",
    "on_null": "on_null",
}
"""`train.<key>` -> the job option (an `elasticdl train` flag) or statement setting it sets.
`verbose` is accepted as SQLFlow has it (0, 1, 2) and changes nothing: progress is always shown."""

VALIDATION_KEYS: dict[str, str] = {
    "select": "validation_select",
    "metrics": "eval_metrics",
    "steps": "validation_steps",
}
"""`validation.<key>`. `steps` is accepted as SQLFlow has it and, as SQLFlow on TensorFlow 2
does, changes nothing: the whole validation SELECT is evaluated."""

_ENGINE = "num_workers num_ps max_worker_relaunches task_timeout_floor intra_op_threads engine"
ENGINE_KEYS: dict[str, str] = {k: k for k in _ENGINE.split()}
PREDICT_KEYS: dict[str, str] = {"batch_size": "minibatch_size", "minibatch_size": "minibatch_size"}
ENGINES = ("local", "argo")

_TABLES = {
    "train": TRAIN_KEYS,
    "validation": VALIDATION_KEYS,
    "engine": ENGINE_KEYS,
    "predict": PREDICT_KEYS,
}
_BOOL_OPTIONS = {"shuffle", "use_async"}
_NUMBER_OPTIONS = {"task_timeout_floor"}
_NO_EFFECT = {"verbose", "validation_steps"}

KERAS_OPTIMIZERS = (
    "SGD",
    "Adam",
    "AdamW",
    "Adagrad",
    "Adadelta",
    "Adamax",
    "Nadam",
    "RMSprop",
    "Ftrl",
    "Lion",
)
_OPTIMIZER_SPELLINGS = {name.lower(): name for name in KERAS_OPTIMIZERS}
_OPTIMIZER_SPELLINGS["gradientdescent"] = "SGD"


def optimizer_name(value: Any) -> str | None:
    """The Keras class name a WITH value names (`RMSProp`, `rmsprop` -> `RMSprop`), or None."""
    if not isinstance(value, str):
        return None
    short = value.rsplit(".", 1)[-1].removesuffix("Optimizer")
    return _OPTIMIZER_SPELLINGS.get(short.lower())


def is_optimizer_param(name: str) -> bool:
    """`optimizer` and `X_optimizer`: a model argument that names an optimizer."""
    return name == "optimizer" or name.endswith("_optimizer")


@dataclass(frozen=True)
class Route:
    section: str  # model | train | validation | engine | predict
    name: str  # the model argument (dotted for an optimizer's argument) or the option


def route(key: str) -> Route:
    """Where a WITH key goes (module docstring); StatementError when it goes nowhere."""
    prefix, _, rest = key.partition(".")
    if prefix in _TABLES and rest:
        table = _TABLES[prefix]
        if rest not in table:
            close = difflib.get_close_matches(rest, table, n=1)
            hint = f"did you mean '{prefix}.{close[0]}'? " if close else ""
            valid = ", ".join(f"{prefix}.{k}" for k in table)
            raise StatementError(f"unknown WITH key '{key}': {hint}valid {prefix}.* keys: {valid}")
        return Route(prefix, table[rest])
    if not rest:
        return Route("model", key)
    if prefix == "model" and "." not in rest:
        return Route("model", rest)
    if is_optimizer_param(prefix) and "." not in rest:
        return Route("model", key)
    raise StatementError(
        f"unknown WITH key '{key}': a key is a model argument (name or model.name), an "
        "optimizer's argument (optimizer.name), or one of train.*, validation.*, engine.*"
    )


def value_problem(where: Route, value: Any) -> str | None:
    """Why `value` does not suit the key routed to `where`, or None."""
    if where.section == "model":
        argument = where.name.partition(".")
        if is_optimizer_param(where.name) and not argument[1] and optimizer_name(value) is None:
            return f"must name a Keras optimizer ({', '.join(KERAS_OPTIMIZERS)}), got {value!r}"
        return None
    option = where.name
    if option == "engine":
        return None if value in ENGINES else f"must be one of {', '.join(ENGINES)}, got {value!r}"
    if option == "validation_select":
        return select_problem(value)
    if option == "eval_metrics":
        from elasticdl.runtime.metrics_by_name import metric_names_problem

        return metric_names_problem(value)
    if option == "on_null":
        return null_policy_problem(value)
    if option == "verbose":
        return None if value in (0, 1, 2) else f"must be 0, 1 or 2, got {value!r}"
    if option in _BOOL_OPTIONS:
        return None if isinstance(value, bool) else f"must be True or False, got {value!r}"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if option in _NUMBER_OPTIONS:
        return None if number else f"must be a number, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer, got {value!r}"
    return None if value >= 1 or option == "seed" else f"must be at least 1, got {value}"


def select_problem(value: Any) -> str | None:
    """Why `value` is not one quoted SELECT, or None."""
    from elasticdl.runtime.sql.lexer import tokenize

    try:
        toks = tokenize(value) if isinstance(value, str) else []
    except StatementError:
        toks = []
    if not toks or not toks[0].word("SELECT", "WITH") or any(t.op(";") for t in toks):
        return "must be a quoted SELECT statement, e.g. 'SELECT a, b FROM t WHERE ...'"
    return None


def null_policy_problem(value: Any) -> str | None:
    """Why `value` is not a NULL policy (error, skip or fill:VALUE), or None."""
    if value in ("error", "skip") or (isinstance(value, str) and value.startswith("fill:")):
        return None
    return f"expected error, skip or fill:VALUE (e.g. fill:0), got {value!r}"


@dataclass
class WithClause:
    """A statement's WITH keys, sorted by where they go (keyed by the name they set there)."""

    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    validation: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    predict: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    """Keys accepted as SQLFlow has them that change nothing here (train.verbose, ...)."""

    @property
    def job_options(self) -> dict[str, Any]:
        """The job options the keys set (train.*, engine.*, predict.*)."""
        return {**self.train, **self.engine, **self.predict}


def split_with(attributes: Mapping[str, Any]) -> WithClause:
    """WITH attributes (as written) sorted into a WithClause; StatementError on the first key
    that goes nowhere, a bad value, or two keys that set one thing."""
    out = WithClause()
    seen: dict[tuple[str, str], str] = {}
    for key, value in attributes.items():
        where = route(key)
        problem = value_problem(where, value)
        if problem:
            raise StatementError(f"WITH {key}: {problem}")
        if (where.section, where.name) in seen:
            raise StatementError(
                f"WITH {seen[where.section, where.name]} and {key} both set {where.name}"
            )
        seen[where.section, where.name] = key
        if where.name in _NO_EFFECT:
            out.ignored.append(key)
            continue
        if where.section == "model" and is_optimizer_param(where.name):
            value = optimizer_name(value)
        if where.name == "validation_select":
            out.validation[where.name] = value
        else:
            getattr(out, where.section)[where.name] = value
    return out
