"""The model-zoo loader: one normalized `ModelSpec` whatever style the user wrote.

`--model_def=a.b.Symbol` names `<zoo>/a/b.py` (or `<zoo>/a/b/__init__.py`) and `Symbol` in it.
The module is imported as a real package with the zoo root on `sys.path`, so imports inside the
zoo work, and under the zoo directory's own name too (`from model_zoo.x import y`:
runtime/zoo_package.py). The symbol decides the style:

1. *functions*: a function returning a Keras model, a Keras `Model` subclass without `default_*`
   methods, or a model instance; the module supplies `dataset_fn`, `loss`, `optimizer`,
   `eval_metrics_fn` (and optionally `callbacks`, `PredictionOutputsProcessor`,
   `custom_data_reader`). The first design document's files are of this style too: a
   module-level `model`, `input_fn(records)` with `feature_columns()` / `label_columns()`
   (runtime/records_input.py), `loss(output, labels)`, `optimizer(lr=...)`.
2. *spec*: an `ElasticDLSpec` subclass; `create_*` methods supply every piece.
3. *keras_defaults*: a Keras `Model` subclass with `default_input`, `default_loss`,
   `default_optimizer`, `default_metrics` methods, called on the constructed model.

Precedence for each piece: an explicit flag (`--dataset_fn/--input_fn`, `--loss`,
`--optimizer`, `--eval_metrics_fn`, dotted paths into the zoo) > the style's own definition >
the module-level function. `ModelSpec.instantiate()` builds the model and binds the pieces into
a `ModelInstance` with uniform call signatures:

    dataset_fn(dataset, mode, metadata) -> dataset
    loss(labels, predictions) -> scalar (a loss per example is averaged, as Keras `compile` does)
    optimizer: a Keras optimizer
    eval_metrics() -> EvalMetrics (callables of (labels, predictions) and Keras metrics)

SQLFlow's model zoo (`sql-machine-learning/models`, package `sqlflow_models`) works unchanged:

* a model definition without a dot is a premade name (`DNNClassifier`: runtime/premade.py);
* a constructor taking `feature_columns`, `X_feature_columns` or `field_metas` receives them
  from the job's resolved COLUMN clause (runtime/feature_args.py);
* a zoo with no input function gets the built-in one (runtime/schema_input.py), whose name
  `--dataset_fn elasticdl.runtime.schema_input.from_schema` any zoo may use
  (`elasticdl.`-names resolve in this installation, not in the zoo);
* optimizers named in params (`optimizer=RMSprop`, `optimizer.learning_rate=0.1`) go where
  runtime/optimizer_params.py says; Keras 2's `lr=` is honoured (runtime/keras_compat.py);
* `--eval_metrics "Accuracy,AUC"` (SQLFlow's `validation.metrics`) replaces the model's metrics
  (runtime/metrics_by_name.py); a module-level `prepare_prediction_column(prediction)` turns
  each row's prediction into the value stored;
* `sqlflow_models.X` resolves although the package's `__init__` imports models whose
  dependencies are missing: the module defining X is loaded without running `__init__`.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from elasticdl.mode import Mode
from elasticdl.runtime import zoo_package
from elasticdl.runtime.column_spec import ResolvedFeatures
from elasticdl.runtime.optimizer_params import OptimizerPlan, keras_optimizer
from elasticdl.runtime.optimizer_params import plan as plan_optimizers
from elasticdl.runtime.params import (
    accepted_names,
    bind_params,
    check_all_accepted,
    parse_params,
    split_groups,
)
from elasticdl.runtime.zoo_source import ZooSource, resolve_zoo
from elasticdl.spec import ElasticDLSpec

_IMPORT_LOCK = threading.Lock()
log = logging.getLogger("elasticdl.zoo")
_DATASET_ARGS = ("dataset", "mode", "metadata", "_", "metadata_")
_LOSS_ARGS = ("labels", "predictions", "outputs", "output")
_METRICS_ARGS = ("mode", "outputs", "labels", "predictions")


class ModelZooError(ValueError):
    """The model definition cannot be resolved; the message names what was searched."""


class ModelBuildError(ValueError):
    """The model file's own code failed while building the model (one line; the original
    error is the `__cause__`). Not a ModelZooError: another Keras may cure it
    (runtime/master/keras_switch.py probes exactly such failures)."""

    @classmethod
    def of(cls, model_def: str, err: Exception) -> ModelBuildError:
        lines = str(err).strip().splitlines()
        detail = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
        return cls(f"building {model_def} raised {detail}")


@dataclass
class EvalMetrics:
    """The metrics of one evaluation, fresh for each (Keras metrics carry state).

    `functions` map a name to `fn(labels, predictions)` giving per-example values (or a batch
    mean); `keras_metrics` are stateful Keras metric objects, each given (labels, predictions)
    through its `transforms` entry when it has one (metrics named in text read class ids or
    probabilities: runtime/metrics_by_name.py); `batch_fn` (ElasticDLSpec style) returns a dict
    of values for a batch. `outputs` names, per metric of a model returning a dict, the output
    it reads (runtime/output_metrics.py; `prediction_for`). `values()` evaluates the stateless
    ones.
    """

    functions: dict[str, Callable[[Any, Any], Any]] = field(default_factory=dict)
    keras_metrics: dict[str, Any] = field(default_factory=dict)
    batch_fn: Callable[[Any, Any], dict[str, Any]] | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    transforms: dict[str, Callable[[Any, Any], tuple[Any, Any]]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, metrics: Mapping[str, Any] | None = None) -> EvalMetrics:
        """Split an `eval_metrics_fn()` result (flat, or keyed by output) into Keras metrics
        and plain callables."""
        from elasticdl.runtime import output_metrics
        from elasticdl.runtime.keras_mode import is_metric

        functions: dict[str, Callable[[Any, Any], Any]] = {}
        stateful: dict[str, Any] = {}
        try:
            flat, outputs = output_metrics.flatten(metrics)
        except ValueError as err:
            raise ModelZooError(str(err)) from None
        for name, metric in flat.items():
            if is_metric(metric):
                stateful[name] = metric
            elif callable(metric):
                functions[name] = metric
            else:
                raise ModelZooError(
                    f"eval metric {name!r} is a {type(metric).__name__}; give a callable "
                    "(labels, predictions) -> values, or a keras.metrics.Metric"
                )
        return cls(functions=functions, keras_metrics=stateful, outputs=outputs)

    @property
    def names(self) -> list[str]:
        return [*self.functions, *self.keras_metrics]

    def prediction_for(self, name: str, predictions: Any) -> Any:
        """What metric `name` reads of a batch's predictions (its output, or all)."""
        from elasticdl.runtime.output_metrics import select

        return select(predictions, self.outputs.get(name))

    def values(self, labels: Any, predictions: Any) -> dict[str, Any]:
        """Stateless metric values for one batch (per example, or a batch mean)."""
        found = {
            name: fn(labels, self.prediction_for(name, predictions))
            for name, fn in self.functions.items()
        }
        if self.batch_fn is not None:
            found.update(self.batch_fn(labels, predictions))
        return found


@dataclass
class ModelInstance:
    """A built model and the pieces bound to it, ready for a worker or a parameter server."""

    model: Any
    dataset_fn: Callable[[Any, Mode, Any], Any]
    loss: Callable[[Any, Any], Any]
    optimizer: Any
    eval_metrics: Callable[[], EvalMetrics]
    callbacks: Callable[[], list[Any]] | None = None
    prediction_outputs_processor: Any = None
    spec_object: ElasticDLSpec | None = None
    prediction_column: Callable[[Any], Any] | None = None
    """SQLFlow's `prepare_prediction_column(prediction)`: one row's prediction -> the value
    stored (applied row by row)."""


@dataclass
class ModelSpec:
    """A resolved model definition: where it came from, its style, and how to build it.

    `sources` records, per piece, the dotted name that supplies it (written into the
    TrainedModel so prediction rebuilds the same spec).
    """

    model_def: str
    zoo: ZooSource
    style: str
    params: dict[str, Any]
    module: ModuleType
    symbol: Any
    sources: dict[str, str] = field(default_factory=dict)
    _pieces: dict[str, Callable[..., Any] | None] = field(default_factory=dict, repr=False)
    features: ResolvedFeatures | None = None
    """The job's resolved feature columns (runtime/column_spec.py), when it has them."""
    eval_metrics_names: str = ""
    """Metrics named in text (`--eval_metrics`), replacing the model's own."""
    optimizer_plan: OptimizerPlan = field(default_factory=OptimizerPlan)
    param_groups: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def feature_arguments(self) -> list[str]:
        """The constructor's arguments that receive feature columns (runtime/feature_args.py)."""
        from elasticdl.runtime.feature_args import feature_arguments

        if _is_keras_model(self.symbol) or self.style == "spec":
            return []
        try:
            names = list(inspect.signature(_constructor(self.symbol)).parameters)
        except (TypeError, ValueError):
            return []
        return feature_arguments(names)

    @property
    def module_file(self) -> str:
        return str(getattr(self.module, "__file__", self.model_def))

    def job_callbacks(self) -> Any:
        """What the model file's `callbacks()` asks of the job (`runtime/callbacks.py`);
        a CallbackError names a callback the job cannot honour."""
        from elasticdl.runtime.callbacks import JobCallbacks, job_callbacks

        found = self._pieces.get("callbacks")
        if found is None:
            return JobCallbacks()
        return job_callbacks(found() if callable(found) else found)

    @property
    def custom_data_reader(self) -> Callable[..., Any] | None:
        """The model file's `custom_data_reader(data_origin, records_per_task=None, **kwargs)`."""
        return self._pieces.get("custom_data_reader")

    def instantiate(self, context: Mapping[str, Any] | None = None) -> ModelInstance:
        """Build the model and bind the dataset function, loss, optimizer and metrics to it."""
        if self.style == "spec":
            return self._instantiate_spec(context)
        model = self._build_model()
        pieces = dict(self._pieces)
        if self.style == "keras_defaults":
            for role, method in (
                ("dataset_fn", "default_input"),
                ("loss", "default_loss"),
                ("optimizer", "default_optimizer"),
                ("eval_metrics_fn", "default_metrics"),
            ):
                if pieces.get(role) is None and callable(getattr(model, method, None)):
                    pieces[role] = getattr(model, method)
        if pieces.get("dataset_fn") is None and self.sources.get("dataset_fn") == BUILTIN_INPUT:
            pieces["dataset_fn"] = _builtin_input(self.features)
        plan = self.optimizer_plan
        if plan.keras_class:
            pieces["optimizer"] = lambda **_: keras_optimizer(plan.keras_class, plan.keras_args)
        for role in ("dataset_fn", "loss", "optimizer"):
            if pieces.get(role) is None:
                raise self._missing(role)
        from elasticdl.runtime import single_input

        return ModelInstance(
            model=model,
            dataset_fn=single_input.adapt(self._dataset_fn(pieces["dataset_fn"]), model),
            loss=_loss_adapter(pieces["loss"]),
            optimizer=self._bind_optimizer(pieces["optimizer"]),
            eval_metrics=self._eval_metrics(pieces.get("eval_metrics_fn")),
            callbacks=pieces.get("callbacks"),
            prediction_outputs_processor=pieces.get("prediction_outputs_processor"),
            prediction_column=_prediction_column(pieces.get("prepare_prediction_column")),
        )

    def build_optimizer(self) -> Any:
        """The optimizer alone, the model left unbuilt where the style allows: a module's or
        a flag's `optimizer(...)`. The parameter servers need only it, and building a model
        there (a Keras 2 functional model of TF ops takes seconds on a loaded machine) held
        the PS's lock past its liveness probe. A model's `default_optimizer`, an
        ElasticDLSpec's `create_optimizer` and an optimizer given to the model's constructor
        need their object, so those still build it."""
        plan = self.optimizer_plan
        if plan.keras_class:
            return keras_optimizer(plan.keras_class, plan.keras_args)
        piece = self._pieces.get("optimizer")
        if piece is None or plan.to_constructor:
            return self.instantiate().optimizer
        return self._bind_optimizer(piece)

    def _bind_optimizer(self, fn: Callable[..., Any]) -> Any:
        return fn(**{**bind_params(fn, self.plain_params), **self.optimizer_plan.piece_args})

    @property
    def plain_params(self) -> dict[str, Any]:
        """The params that are no optimizer's arguments, less those the optimizer plan uses."""
        return {k: v for k, v in self.params.items() if k not in self.optimizer_plan.consumed}

    def _eval_metrics(self, fn: Callable[..., Any] | None) -> Callable[[], EvalMetrics]:
        if self.eval_metrics_names:
            from elasticdl.runtime.metrics_by_name import named_metrics

            names = self.eval_metrics_names
            return lambda: named_metrics(names)
        return _metrics_adapter(fn, self.plain_params)

    def _dataset_fn(self, fn: Callable[..., Any]) -> Callable[[Any, Mode, Any], Any]:
        """`dataset_fn` as (dataset, mode, metadata); an `input_fn(records)` with
        `feature_columns()` in its module (the first design document) via RecordsInput."""
        from elasticdl.runtime.records_input import RecordsInput, takes_records

        columns = getattr(self.module, "feature_columns", None)
        if callable(columns) and takes_records(fn):
            return RecordsInput(fn, columns, getattr(self.module, "label_columns", None))
        return _dataset_adapter(fn)

    def _build_model(self) -> Any:
        symbol = self.symbol
        if _is_keras_model(symbol):
            return symbol
        constructor = _constructor(symbol)
        kwargs = bind_params(constructor, self.plain_params)
        if self.features is not None:
            from elasticdl.runtime.feature_args import constructor_arguments

            kwargs.update(constructor_arguments(symbol, accepted_names(constructor), self.features))
        plan = self.optimizer_plan
        for param, (name, args) in plan.to_constructor.items():
            kwargs[param] = keras_optimizer(name, args)
        kwargs.update(plan.constructor_args)
        try:
            return symbol(**kwargs)
        except Exception as err:  # noqa: BLE001 - the model file's own code: one line
            raise ModelBuildError.of(self.model_def, err) from err

    def _instantiate_spec(self, context: Mapping[str, Any] | None) -> ModelInstance:
        kwargs = bind_params(_constructor(self.symbol), self.params, reserved=("context",))
        spec = self.symbol(context=dict(context) if context else None, **kwargs)
        pieces = dict(self._pieces)
        dataset_fn = pieces.get("dataset_fn") or spec.create_dataset
        loss = pieces.get("loss")
        optimizer = pieces.get("optimizer") or spec.create_optimizer
        metrics = pieces.get("eval_metrics_fn")
        return ModelInstance(
            model=spec.create_model(),
            dataset_fn=_dataset_adapter(dataset_fn),
            loss=_loss_adapter(loss) if loss else _spec_loss(spec),
            optimizer=self._bind_optimizer(optimizer),
            eval_metrics=_metrics_adapter(metrics, self.params) if metrics else _spec_metrics(spec),
            callbacks=pieces.get("callbacks"),
            prediction_outputs_processor=pieces.get("prediction_outputs_processor"),
            spec_object=spec,
        )

    def _missing(self, role: str) -> ModelZooError:
        tried = {
            "functions": f"module-level `{_MODULE_NAMES[role][0]}` in {self.module_file}",
            "keras_defaults": (
                f"{self.model_def}.{_DEFAULT_METHODS[role]}() and module-level "
                f"`{_MODULE_NAMES[role][0]}` in {self.module_file}"
            ),
        }[self.style]
        return ModelZooError(
            f"model_def {self.model_def!r} has no {role}: searched the --{_FLAGS[role]} flag, "
            f"{tried}. Define one of these (styles tried: {self.style})."
        )


_MODULE_NAMES = {
    "dataset_fn": ("dataset_fn", "input_fn", "feed"),  # feed: ElasticDL's later name
    "loss": ("loss",),
    "optimizer": ("optimizer",),
    "eval_metrics_fn": ("eval_metrics_fn",),
    "callbacks": ("callbacks",),
    "prediction_outputs_processor": ("PredictionOutputsProcessor",),
    "custom_data_reader": ("custom_data_reader",),
    "prepare_prediction_column": ("prepare_prediction_column",),
}
BUILTIN_INPUT = "elasticdl.runtime.schema_input.from_schema"
"""The source recorded for the built-in input function (runtime/schema_input.py)."""
_DEFAULT_METHODS = {
    "dataset_fn": "default_input",
    "loss": "default_loss",
    "optimizer": "default_optimizer",
    "eval_metrics_fn": "default_metrics",
}
_FLAGS = {
    "dataset_fn": "dataset_fn",
    "loss": "loss",
    "optimizer": "optimizer",
    "eval_metrics_fn": "eval_metrics_fn",
}


def _is_keras_model(obj: Any) -> bool:
    from elasticdl.runtime.keras_mode import is_keras_model

    return is_keras_model(obj)


def _is_keras_model_class(obj: Any) -> bool:
    from elasticdl.runtime.keras_mode import is_keras_model_class

    return is_keras_model_class(obj)


def _constructor(symbol: Any) -> Callable[..., Any]:
    return symbol.__init__ if inspect.isclass(symbol) else symbol


def _positional_count(fn: Callable[..., Any]) -> int | None:
    """Number of positional parameters `fn` takes (None when it takes *args)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    count = 0
    for p in parameters:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            return None
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            count += 1
    return count


def _dataset_adapter(fn: Callable[..., Any]) -> Callable[[Any, Mode, Any], Any]:
    """Accept `dataset_fn(dataset, mode)` and `dataset_fn(dataset, mode, metadata)` alike."""
    count = _positional_count(fn)
    if count is not None and count < 3:

        def two_args(dataset: Any, mode: Mode, metadata: Any = None) -> Any:
            return fn(dataset, mode)

        return two_args

    def three_args(dataset: Any, mode: Mode, metadata: Any = None) -> Any:
        return fn(dataset, mode, metadata)

    return three_args


def _loss_adapter(fn: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """Normalize to `loss(labels, predictions)` returning one value; `loss(output, labels)`
    (doc 000) by name. A loss per example (SQLFlow's `tf.keras.losses.MSE(labels, output)`)
    is averaged over the batch, as Keras `compile` does with it."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    swapped = names[:2] in (["output", "labels"], ["outputs", "labels"], ["predictions", "labels"])

    def loss(labels: Any, predictions: Any) -> Any:
        value = fn(predictions, labels) if swapped else fn(labels, predictions)
        rank = getattr(getattr(value, "shape", None), "rank", None)
        if rank is None and getattr(value, "ndim", 0):
            rank = value.ndim
        if rank:
            import tensorflow as tf

            return tf.reduce_mean(value)
        return value

    return loss


def _prediction_column(fn: Callable[..., Any] | None) -> Callable[[Any], Any] | None:
    """SQLFlow's `prepare_prediction_column(prediction)` as a one-argument callable (SQLFlow's
    functional example writes it with a stray `self` first: it is given None there)."""
    if fn is None:
        return None
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return fn
    if names[:1] == ["self"] and len(names) >= 2:
        return lambda prediction: fn(None, prediction)
    return fn


def _builtin_input(features: ResolvedFeatures | None) -> Callable[..., Any]:
    from elasticdl.runtime.schema_input import for_features

    return for_features(features)


def _spec_loss(spec: ElasticDLSpec) -> Callable[[Any, Any], Any]:
    return lambda labels, predictions: spec.create_loss(outputs=predictions, labels=labels)


def _metrics_adapter(
    fn: Callable[..., Any] | None, params: Mapping[str, Any]
) -> Callable[[], EvalMetrics]:
    if fn is None:
        return EvalMetrics.from_dict
    return lambda: EvalMetrics.from_dict(fn(**bind_params(fn, params)))


def _spec_metrics(spec: ElasticDLSpec) -> Callable[[], EvalMetrics]:
    """An ElasticDLSpec computes metric values from tensors in `create_metrics`.

    A spec whose `create_metrics(Mode.EVALUATION)` already returns callables or Keras metrics
    without tensors is used like `eval_metrics_fn`; otherwise it is called per batch.
    """

    def per_batch(labels: Any, predictions: Any) -> dict[str, Any]:
        return dict(
            spec.create_metrics(mode=Mode.EVALUATION, outputs=predictions, labels=labels) or {}
        )

    def build() -> EvalMetrics:
        try:
            found = spec.create_metrics(mode=Mode.EVALUATION)
        except Exception:  # noqa: BLE001 - a spec that needs tensors to build its metrics
            found = None
        if found and all(callable(v) for v in found.values()):
            return EvalMetrics.from_dict(found)
        return EvalMetrics(batch_fn=per_batch)

    return build


def _module_candidates(zoo_root: Path, module_path: str) -> list[Path]:
    parts = module_path.split(".")
    base = zoo_root.joinpath(*parts)
    return [base.with_suffix(".py"), base / "__init__.py"]


def _forget_conflicting(top: str, zoo_root: Path) -> None:
    """Drop cached modules named `top` that come from another zoo, so this zoo's one loads."""
    existing = sys.modules.get(top)
    if existing is None:
        return
    location = getattr(existing, "__file__", None) or ""
    try:
        same = Path(location).resolve().is_relative_to(zoo_root)
    except (OSError, ValueError):
        same = False
    if not same:
        for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
            del sys.modules[name]


def import_zoo_module(
    zoo_root: Path, module_path: str, what: str, symbol: str | None = None
) -> ModuleType:
    """Import `module_path` from the zoo with the zoo root on sys.path.

    With `symbol`: when `module_path` is a package whose `__init__` fails (SQLFlow's imports
    models whose dependencies do not install), the package's module that defines `symbol` is
    loaded instead, the package standing in without running its `__init__`."""
    if not module_path or any(not part.isidentifier() for part in module_path.split(".")):
        raise ModelZooError(f"{what}: {module_path!r} is not a dotted Python module path")
    candidates = _module_candidates(zoo_root, module_path)
    if not any(c.is_file() for c in candidates):
        raise ModelZooError(
            f"{what}: no module {module_path!r} in model zoo {zoo_root} "
            f"(looked for {candidates[0]} and {candidates[1]})"
        )
    with _IMPORT_LOCK:
        root = str(zoo_root)
        if root in sys.path:
            sys.path.remove(root)
        sys.path.insert(0, root)
        _forget_conflicting(module_path.split(".")[0], zoo_root)
        zoo_package.register(zoo_root)  # `from <zoo dir name>.x import y` in model files
        importlib.invalidate_caches()
        try:
            return importlib.import_module(module_path)
        except ModelZooError:
            raise
        except Exception as err:
            found = _defining_module(zoo_root, module_path, symbol) if symbol else None
            if found is not None:
                log.warning(
                    "%s: importing package %s failed (%s: %s); loaded %s, which defines %s",
                    what,
                    module_path,
                    type(err).__name__,
                    err,
                    found.__name__,
                    symbol,
                )
                return found
            raise ModelZooError(
                f"{what}: importing {module_path!r} from {zoo_root} failed: "
                f"{type(err).__name__}: {err}"
            ) from err


def _defines(path: Path, name: str) -> bool:
    """Whether the Python file at `path` defines `name` at its top level."""
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return True
    return False


def defining_files(zoo_root: Path, package: str, symbol: str) -> list[Path]:
    """The modules of the zoo's package `package` whose top level defines `symbol` (where a
    package's `sqlflow_models.DNNClassifier` is written when its `__init__` cannot run)."""
    directory = zoo_root.joinpath(*package.split("."))
    if not (directory / "__init__.py").is_file():
        return []
    return sorted(p for p in directory.glob("*.py") if p.stem != "__init__" and _defines(p, symbol))


def _defining_module(zoo_root: Path, package: str, symbol: str) -> ModuleType | None:
    """The module of package `package` that defines `symbol`, imported with the package (and
    its parents) standing in as plain namespaces: their `__init__` is not run."""
    import types

    files = defining_files(zoo_root, package, symbol)
    if len(files) != 1:
        return None
    defining = [files[0].stem]
    parts = package.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        existing = sys.modules.get(name)
        if existing is not None and hasattr(existing, "__path__"):
            continue
        stand_in = types.ModuleType(name)
        stand_in.__path__ = [str(zoo_root.joinpath(*parts[:depth]))]
        stand_in.__package__ = name
        sys.modules[name] = stand_in
    try:
        return importlib.import_module(f"{package}.{defining[0]}")
    except Exception:  # noqa: BLE001 - the caller reports the package's own import error
        return None


def _split_dotted(dotted: str, what: str) -> tuple[str, str]:
    module_path, _, name = dotted.rpartition(".")
    if not module_path or not name:
        raise ModelZooError(
            f"{what}: {dotted!r} must be MODULE.SYMBOL, "
            "e.g. mnist.mnist_functional_api.custom_model"
        )
    return module_path, name


def resolve_symbol(zoo_root: Path, dotted: str, what: str, default_module: ModuleType) -> Any:
    """Resolve a flag value: `name` in the model_def's module, or `module.path.name`
    (`elasticdl.` names in this installation: the built-in input function)."""
    if dotted == BUILTIN_INPUT:
        from elasticdl.runtime.schema_input import from_schema

        return from_schema
    if "." not in dotted:
        module = default_module
        name = dotted
    else:
        module_path, name = _split_dotted(dotted, what)
        module = import_zoo_module(zoo_root, module_path, what)
    if not hasattr(module, name):
        raise ModelZooError(f"{what}: {getattr(module, '__file__', module)} has no {name!r}")
    return getattr(module, name)


def load_model_spec(
    model_def: str,
    model_zoo: str | None = None,
    params: str | Mapping[str, Any] | None = None,
    *,
    dataset_fn: str | None = None,
    loss: str | None = None,
    optimizer: str | None = None,
    eval_metrics_fn: str | None = None,
    zoo: ZooSource | None = None,
    features: str = "",
    eval_metrics: str = "",
    strict: bool = True,
) -> ModelSpec:
    """Resolve `model_def` in the zoo and check that every piece and every param is usable.

    `features`: the job's resolved feature columns as JSON (`ResolvedFeatures.to_json`);
    `eval_metrics`: metric names replacing the model's (`--eval_metrics`); `strict=False`
    leaves missing pieces for the caller to supply by flag."""
    from elasticdl.runtime import keras_compat, keras_mode
    from elasticdl.runtime.premade import PREMADE, premade_model_def

    source = zoo or resolve_zoo(model_zoo)
    root = source.root
    if "." not in model_def:
        builtin = premade_model_def(model_def)
        if builtin is None:
            raise ModelZooError(
                f"--model_def {model_def!r}: expected MODULE.SYMBOL (e.g. regressor.DNN, "
                f"sqlflow_models.DNNClassifier) or a premade model: {', '.join(PREMADE)}"
            )
        root = resolve_zoo(None).root
        module_path, name = _split_dotted(builtin, "--model_def")
    else:
        module_path, name = _split_dotted(model_def, "--model_def")
    _refuse_outside_contract(root, module_path, model_def)
    if keras_mode.current() == keras_mode.KERAS2:
        keras_compat.install()
    module = import_zoo_module(root, module_path, "--model_def", symbol=name)
    if not hasattr(module, name):
        public = sorted(n for n in vars(module) if not n.startswith("_"))
        raise ModelZooError(
            f"--model_def: {module.__file__} has no symbol {name!r}; it defines: "
            f"{', '.join(public)}"
        )
    symbol = getattr(module, name)
    style = _style_of(symbol, model_def)
    parsed = dict(params) if isinstance(params, Mapping) else parse_params(params)

    flags = {
        "dataset_fn": dataset_fn,
        "loss": loss,
        "optimizer": optimizer,
        "eval_metrics_fn": eval_metrics_fn,
    }
    pieces: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for role, flag in flags.items():
        if flag == BUILTIN_INPUT and role == "dataset_fn":
            sources[role] = flag  # bound to the job's features when the model is built
        elif flag:
            pieces[role] = resolve_symbol(root, flag, f"--{_FLAGS[role]}", module)
            sources[role] = flag
    if style != "spec":
        for role, names in _MODULE_NAMES.items():
            if pieces.get(role) is not None:
                continue
            own = _DEFAULT_METHODS.get(role) if style == "keras_defaults" else None
            if own and callable(getattr(symbol, own, None)):
                sources[role] = f"{model_def}.{own}"
                continue
            for where in _piece_modules(module, symbol):
                candidate = next((c for c in names if hasattr(where, c)), None)
                if candidate is not None:
                    pieces[role] = getattr(where, candidate)
                    sources[role] = f"{where.__name__}.{candidate}"
                    break
        if "dataset_fn" not in sources:
            sources["dataset_fn"] = BUILTIN_INPUT  # SQLFlow's zoo defines no input function
    plain, groups = split_groups(parsed)
    spec = ModelSpec(
        model_def=model_def,
        zoo=source,
        style=style,
        params=plain,
        module=module,
        symbol=symbol,
        sources=sources,
        _pieces=pieces,
        features=ResolvedFeatures.from_json(features) if features else None,
        eval_metrics_names=eval_metrics,
        param_groups=groups,
    )
    spec.optimizer_plan = _optimizer_plan(spec)
    if strict:
        _check_pieces(spec)
    _check_params(spec)
    return spec


def _refuse_outside_contract(zoo_root: Path, module_path: str, model_def: str) -> None:
    """One line naming the kind of a program that is no model file (runtime/zoo_kinds.py)."""
    from elasticdl.runtime.zoo_kinds import kind

    for candidate in _module_candidates(zoo_root, module_path):
        if candidate.is_file():
            found = kind(candidate.read_text(errors="replace"))
            if found:
                raise ModelZooError(
                    f"--model_def {model_def}: {candidate} is {found}, outside the model-zoo "
                    "contract (a Keras model with dataset_fn or feed, loss and optimizer); "
                    "ElasticDL ran such files with --job_command, which this project does not"
                )
            return


def _piece_modules(module: ModuleType, symbol: Any) -> list[ModuleType]:
    """Where module-level pieces are looked for: the model_def's module, then the module that
    defines the symbol when it is another module of the zoo (`sqlflow_models.DNNClassifier` is
    defined, with its `loss` and `optimizer`, in `sqlflow_models/dnnclassifier.py`)."""
    found = [module]
    defining = sys.modules.get(getattr(symbol, "__module__", "") or "")
    package = module.__name__.split(".")[0]
    if defining is not None and defining is not module:
        if defining.__name__.split(".")[0] == package:
            found.append(defining)
    return found


def _optimizer_plan(spec: ModelSpec) -> OptimizerPlan:
    """Where optimizer params go (runtime/optimizer_params.py)."""
    if spec.style == "spec" or not (spec.param_groups or "optimizer" in spec.params):
        return OptimizerPlan()
    constructor = None if _is_keras_model(spec.symbol) else _constructor(spec.symbol)
    accepted = accepted_names(constructor) if constructor is not None else set()
    defaults = _defaults(constructor) if constructor is not None else {}
    piece = spec._pieces.get("optimizer")
    if piece is None and spec.style == "keras_defaults":
        piece = getattr(spec.symbol, _DEFAULT_METHODS["optimizer"], None)
    piece_names = accepted_names(piece) if piece is not None else set()
    return plan_optimizers(accepted, defaults, piece_names, spec.params, spec.param_groups)


def _defaults(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _style_of(symbol: Any, model_def: str) -> str:
    if inspect.isclass(symbol) and issubclass(symbol, ElasticDLSpec):
        return "spec"
    if _is_keras_model_class(symbol) and any(
        callable(getattr(symbol, m, None)) for m in _DEFAULT_METHODS.values()
    ):
        return "keras_defaults"
    if _is_keras_model(symbol) or _is_keras_model_class(symbol) or inspect.isfunction(symbol):
        return "functions"
    if callable(symbol):
        return "functions"
    raise ModelZooError(
        f"--model_def: {model_def!r} is a {type(symbol).__name__}, not a model. Styles tried: "
        "a function returning a Keras model, a Keras Model subclass (optionally with "
        "default_input/default_loss/default_optimizer), a Keras model instance, an "
        "ElasticDLSpec subclass"
    )


def _check_pieces(spec: ModelSpec) -> None:
    if spec.style == "spec":
        return
    for role in ("dataset_fn", "loss", "optimizer"):
        if role not in spec.sources:
            raise spec._missing(role)


def _piece_callables(spec: ModelSpec) -> dict[str, tuple[Callable[..., Any], tuple[str, ...]]]:
    """Every callable that receives params, with the names the runtime fills itself."""
    found: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {}
    if not _is_keras_model(spec.symbol):
        found[spec.model_def] = (_constructor(spec.symbol), ("context",))
    if spec.style == "spec":
        found[f"{spec.model_def}.create_optimizer"] = (spec.symbol.create_optimizer, ())
    for role in ("optimizer", "eval_metrics_fn"):
        piece = spec._pieces.get(role)
        if piece is not None:
            found[spec.sources[role]] = (piece, _METRICS_ARGS)
    return found


def _check_params(spec: ModelSpec) -> None:
    pieces = _piece_callables(spec).items()
    acceptors = {where: accepted_names(fn, reserved) for where, (fn, reserved) in pieces}
    check_all_accepted(spec.plain_params, acceptors)
