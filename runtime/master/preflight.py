"""Checks a training job makes in the master before it starts any process.

Each turns a mistake that would otherwise fail every worker launched (or the first PS restore)
into one line up front: the model cannot be built on the job's own first records, or the
checkpoint to start from does not fit the model.
"""

from __future__ import annotations

import logging
from typing import Any

from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.one_line import describe

log = logging.getLogger("elasticdl.master")


def job_spec(options: Any, zoo: Any, metadata: Any) -> tuple[Any, str]:
    """The model spec a training job trains, and its feature columns resolved against the
    training data (`metadata`: its first file's) as JSON ("" when the model takes none):
    ValueError in one line for a COLUMN the data cannot feed."""
    from elasticdl.runtime.feature_args import job_features
    from elasticdl.runtime.model_spec import load_model_spec

    o = options
    pieces = {
        "params": o.params,
        "dataset_fn": o.dataset_fn,
        "loss": o.loss,
        "optimizer": o.optimizer,
        "eval_metrics_fn": o.eval_metrics_fn,
        "zoo": zoo,
        "eval_metrics": o.eval_metrics,
    }
    spec = load_model_spec(o.model_def, **pieces)
    features = job_features(spec, o.feature_columns, metadata)
    if features:
        spec = load_model_spec(o.model_def, features=features, **pieces)
    return spec, features


def build_model_once(
    config: JobConfig, sample: list[bytes], file: str, model_def: str, params: str
) -> Any:
    """Build the model on the first records, as every worker will, and compute its loss once;
    returns the instance.

    A param of the right name and a wrong type (`hidden_units='abc'`) raises ValueError in one
    line naming --model_def and --params; a loss that fails on the model's outputs (labels of
    the wrong type, a loss that is no number) raises before any process starts."""
    from elasticdl.runtime.data.metadata import DatasetMetadata
    from elasticdl.runtime.model_build import build_model

    try:
        instance = config.load_spec().instantiate()
        batch = build_model(instance, sample, metadata=DatasetMetadata.for_file(file, sample[0]))
    except Exception as err:  # noqa: BLE001 - user code: any error is the model's
        with_params = f" with --params {params!r}" if params else ""
        raise ValueError(
            f"--model_def {model_def}{with_params}: the model cannot be built on the "
            f"first records of {file}: {describe(err)} (check the params' values and types)"
        ) from None
    try:
        features, labels = batch
        float(instance.loss(labels, instance.model(features, training=False)))
    except Exception as err:  # noqa: BLE001 - user code: any error is the loss's
        raise ValueError(
            f"--model_def {model_def}: its loss cannot be computed on the first records of "
            f"{file}: {describe(err)}"
        ) from None
    return instance


def init_checkpoint_version(config: JobConfig, instance: Any) -> tuple[int | None, list[Any]]:
    """The version of --checkpoint_dir_for_init to start from (None: no such dir) and the newer
    versions passed over (checkpoint.Skipped: truncated, not an elasticdl checkpoint, ...),
    each said in one line; raises (checkpoint.check_directory) with one line if no version is
    intact or the newest intact one does not fit the model."""
    if not config.checkpoint_dir_for_init:
        return None, []
    from elasticdl.runtime.ps import checkpoint
    from elasticdl.runtime.variables import named_variables

    directory = config.checkpoint_dir_for_init
    version, skipped = checkpoint.newest_intact(directory)
    for passed in skipped:
        log.warning(
            "checkpoint version %d in %s is skipped: %s (%s)",
            passed.version,
            directory,
            passed.reason,
            passed.path,
        )
    if version is None and skipped:
        reasons = "; ".join(f"version {p.version} is {p.reason}" for p in skipped)
        raise checkpoint.CheckpointError(
            f"no intact checkpoint in {directory} ({reasons}): check --checkpoint_dir_for_init"
        )
    trainable, state = named_variables(instance.model)
    shapes = {name: tuple(v.shape) for name, v in {**trainable, **state}.items()}
    found = checkpoint.check_directory(directory, shapes, config.model_def, version)
    if skipped:
        log.warning("the job starts from checkpoint version %d instead", found)
    return found, skipped
