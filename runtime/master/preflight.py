"""Checks a training job makes in the master before it starts any process.

Each turns a mistake that would otherwise fail every worker launched (or the first PS restore)
into one line up front: the model cannot be built on the job's own first records, or the
checkpoint to start from does not fit the model.
"""

from __future__ import annotations

import logging
from typing import Any

from elasticdl.runtime.job_config import JobConfig

log = logging.getLogger("elasticdl.master")


def build_model_once(
    config: JobConfig, sample: list[bytes], file: str, model_def: str, params: str
) -> Any:
    """Build the model on the first records, as every worker will; returns the instance.

    A param of the right name and a wrong type (`hidden_units='abc'`) raises ValueError in one
    line naming --model_def and --params."""
    from elasticdl.runtime.data.metadata import DatasetMetadata
    from elasticdl.runtime.model_build import build_model

    try:
        instance = config.load_spec().instantiate()
        build_model(instance, sample, metadata=DatasetMetadata.for_file(file, sample[0]))
    except Exception as err:  # noqa: BLE001 - user code: any error is the model's
        text = str(err).strip().splitlines()
        detail = f"{type(err).__name__}: {text[0]}" if text else type(err).__name__
        with_params = f" with --params {params!r}" if params else ""
        raise ValueError(
            f"--model_def {model_def}{with_params}: the model cannot be built on the "
            f"first records of {file}: {detail} (check the params' values and types)"
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
