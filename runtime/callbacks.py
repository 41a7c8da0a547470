"""What a model file's `callbacks()` asks of an elastic job, and the early-stopping rule.

`job_callbacks(found)` turns the list `callbacks()` returned into `JobCallbacks`: the
learning rate by model version (ElasticDL's `LearningRateScheduler`) or by epoch (Keras's,
with `versions_per_epoch` model versions to an epoch), the version to stop at
(`MaxStepsStopping`), an early-stopping rule on evaluation metrics (Keras `EarlyStopping`),
a TensorBoard log directory (Keras `TensorBoard`), and `SavedModelExporter` (the job exports
anyway). Any other callback is refused with one line naming it: a callback that a job would
silently skip is worse than an error.

`EarlyStopper` is pure: it sees each evaluation's metrics and says when to stop, with Keras's
rule (patience counted in evaluation rounds instead of epochs).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SUPPORTED = (
    "elasticdl LearningRateScheduler, MaxStepsStopping, SavedModelExporter; Keras "
    "LearningRateScheduler, EarlyStopping, TensorBoard"
)
_HINTS = {
    "ModelCheckpoint": "use --checkpoint_steps N (checkpoints on the parameter servers)",
    "BackupAndRestore": "use --checkpoint_steps N and --checkpoint_dir_for_init to resume",
    "CSVLogger": "the loss and metrics are in OUTPUT/job_report.json and TensorBoard",
    "ReduceLROnPlateau": "use a LearningRateScheduler by model version",
    "ProgbarLogger": "the job draws its own progress bar",
    "History": "the evaluation history is in OUTPUT/job_report.json",
}
_MAXIMIZED = ("acc", "auc", "precision", "recall", "f1")


class CallbackError(ValueError):
    """A callback the job cannot honour; the message names it and says what to do."""


@dataclass(frozen=True)
class EarlyStopping:
    """Keras EarlyStopping's settings, with `monitor` resolved to an evaluation metric."""

    monitor: str
    mode: str = "min"
    min_delta: float = 0.0
    patience: int = 0
    baseline: float | None = None
    start_from: int = 0


@dataclass
class JobCallbacks:
    """The parts of `callbacks()` that change the job (all None / empty: none given)."""

    names: list[str] = field(default_factory=list)
    lr_by_version: Callable[[int], float] | None = None
    lr_by_epoch: Callable[[int, float], float] | None = None
    max_steps: int | None = None
    early_stopping: EarlyStopping | None = None
    tensorboard_dir: str | None = None

    _epoch_rates: list[float] = field(default_factory=list, repr=False)

    def learning_rate(self, version: int, versions_per_epoch: int, initial: float) -> float | None:
        """The learning rate of the application that makes version `version + 1`, or None.

        By epoch (Keras): epoch = version // versions_per_epoch, and the rate of epoch e is
        `schedule(e, rate of epoch e-1)` (epoch 0 starts from `initial`), as Keras calls it
        at each epoch's start.
        """
        if self.lr_by_version is not None:
            return float(self.lr_by_version(version))
        if self.lr_by_epoch is not None:
            epoch = version // max(1, versions_per_epoch)
            while len(self._epoch_rates) <= epoch:
                previous = self._epoch_rates[-1] if self._epoch_rates else initial
                self._epoch_rates.append(float(self.lr_by_epoch(len(self._epoch_rates), previous)))
            return self._epoch_rates[epoch]
        return None

    def check_metrics(self, names: Iterable[str], has_validation: bool) -> None:
        """Resolve EarlyStopping's monitor against the evaluation metrics (once, at start)."""
        rule = self.early_stopping
        if rule is None:
            return
        names = list(names)
        if not has_validation:
            raise CallbackError(
                f"callbacks(): EarlyStopping(monitor={rule.monitor!r}) needs evaluations: "
                "pass --validation_data (and --evaluation_steps N to evaluate while training)"
            )
        monitor = rule.monitor
        if monitor not in names and monitor.startswith("val_") and monitor[4:] in names:
            monitor = monitor[4:]
        if monitor not in names:
            raise CallbackError(
                f"callbacks(): EarlyStopping monitors {rule.monitor!r}, which is not an "
                f"evaluation metric of this model ({', '.join(names) or 'none'}); set monitor= "
                "one of them"
            )
        mode = rule.mode
        if mode not in ("min", "max"):
            mode = "max" if any(k in monitor.lower() for k in _MAXIMIZED) else "min"
        self.early_stopping = EarlyStopping(
            monitor, mode, rule.min_delta, rule.patience, rule.baseline, rule.start_from
        )


def _keras_class(obj: Any) -> str | None:
    """The Keras callback class `obj` is (or derives from), by name; None if not Keras's."""
    for klass in type(obj).__mro__:
        module = klass.__module__ or ""
        if module.split(".")[0] in ("keras", "tf_keras") or module.startswith(
            "tensorflow.python.keras"
        ):
            if klass.__name__ in ("LearningRateScheduler", "EarlyStopping", "TensorBoard"):
                return klass.__name__
    return None


def _describe(obj: Any) -> str:
    klass = type(obj)
    return f"{klass.__module__}.{klass.__qualname__}"


def _keras_lr(schedule: Callable[..., Any]) -> Callable[[int, float], float]:
    """Keras LearningRateScheduler's `schedule(epoch, lr)` or `schedule(epoch)`."""
    try:
        count = len(inspect.signature(schedule).parameters)
    except (TypeError, ValueError):
        count = 2
    if count >= 2:
        return lambda epoch, lr: float(schedule(epoch, lr))
    return lambda epoch, lr: float(schedule(epoch))


def job_callbacks(found: Iterable[Any] | None) -> JobCallbacks:
    """Interpret `callbacks()`'s list; a CallbackError for any callback a job cannot honour."""
    from elasticdl.python.elasticdl import callbacks as edl

    result = JobCallbacks()
    for callback in list(found or []):
        name = type(callback).__name__
        if isinstance(callback, edl.LearningRateScheduler):
            result.lr_by_version = callback.learning_rate
        elif isinstance(callback, edl.MaxStepsStopping):
            result.max_steps = callback.max_steps
        elif isinstance(callback, edl.SavedModelExporter):
            pass
        elif _keras_class(callback) == "LearningRateScheduler":
            result.lr_by_epoch = _keras_lr(callback.schedule)
        elif _keras_class(callback) == "EarlyStopping":
            if getattr(callback, "restore_best_weights", False):
                raise CallbackError(
                    "callbacks(): EarlyStopping(restore_best_weights=True) is not supported: "
                    "the job keeps the model of its last version; drop restore_best_weights"
                )
            baseline = getattr(callback, "baseline", None)
            result.early_stopping = EarlyStopping(
                monitor=str(getattr(callback, "monitor", "val_loss")),
                mode=str(getattr(callback, "mode", "auto")),
                min_delta=abs(float(getattr(callback, "min_delta", 0.0))),
                patience=int(getattr(callback, "patience", 0)),
                baseline=None if baseline is None else float(baseline),
                start_from=int(getattr(callback, "start_from_epoch", 0)),
            )
        elif _keras_class(callback) == "TensorBoard":
            result.tensorboard_dir = str(callback.log_dir)
        else:
            hint = _HINTS.get(name, f"remove it (supported: {SUPPORTED})")
            raise CallbackError(
                f"callbacks(): {_describe(callback)} is not supported in an elastic job; {hint}"
            )
        result.names.append(name)
    if result.lr_by_version is not None and result.lr_by_epoch is not None:
        raise CallbackError(
            "callbacks(): two LearningRateSchedulers (ElasticDL's by model version and Keras's "
            "by epoch); keep one"
        )
    return result


class EarlyStopper:
    """Keras EarlyStopping's decision over evaluation rounds (pure, one per job)."""

    def __init__(self, rule: EarlyStopping) -> None:
        self.rule = rule
        self.best = math.inf if rule.mode == "min" else -math.inf
        self.wait = 0
        self.rounds = 0

    def _better(self, current: float, reference: float) -> bool:
        if self.rule.mode == "min":
            return current < reference - self.rule.min_delta
        return current > reference + self.rule.min_delta

    def observe(self, metrics: Mapping[str, Any]) -> str | None:
        """Take one evaluation's metrics; the reason to stop training, or None to go on."""
        index = self.rounds
        self.rounds += 1
        if index < self.rule.start_from or self.rule.monitor not in metrics:
            return None
        current = float(metrics[self.rule.monitor])
        self.wait += 1
        if self._better(current, self.best):
            self.best = current
            if self.rule.baseline is None or self._better(current, self.rule.baseline):
                self.wait = 0
                return None
        if self.wait >= self.rule.patience and index > 0:
            return (
                f"EarlyStopping: {self.rule.monitor} did not improve for {self.wait} "
                f"evaluation(s) (best {self.best:g})"
            )
        return None
