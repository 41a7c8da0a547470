"""The options of a job as its master takes them: dataclasses generated from the option spec
(runtime/job_options.py), so each field is the flag of the same name (`--data` is
`training_data`, `--task_timeout_floor` is `task_timeout_floor_s`)."""

from __future__ import annotations

from typing import Any

from elasticdl.runtime import job_options as spec
from elasticdl.runtime import prediction_output as parts
from elasticdl.runtime.master.chaos import ChaosSpecError, parse_chaos
from elasticdl.runtime.outputs import OutputError


@spec.options_class(
    spec.TRAIN,
    positional=("model_def", "training_data", "output"),
    extra=(("master_host", str, "127.0.0.1"),),
)
class TrainOptions:
    """What `elasticdl train` accepts (fields: `spec.TRAIN`), plus the address the master
    binds (`master_host`: a pod's IP on Kubernetes). `use_async` None means async unless
    `grads_to_wait` is given; `grads_to_wait` None means 1."""

    def __post_init__(self) -> None:
        if self.use_async is None:
            self.use_async = self.grads_to_wait is None
        if self.grads_to_wait is None:
            self.grads_to_wait = 1

    @property
    def resolved_checkpoint_dir(self) -> str:
        """Where checkpoints go: --checkpoint_dir, else `<output>/checkpoints` when enabled."""
        if self.checkpoint_dir:
            return self.checkpoint_dir
        if self.checkpoint_steps > 0:
            return f"{self.output.rstrip('/')}/checkpoints"
        return ""

    @property
    def resolved_tensorboard_dir(self) -> str:
        """Where TensorBoard logs go, live: --tensorboard_dir, else `<output>/tensorboard`."""
        return self.tensorboard_dir or f"{self.output.rstrip('/')}/tensorboard"

    def validate(self) -> None:
        """Raise ValueError naming the first option out of range."""
        # --min_workers has its own message, naming both bounds.
        spec.check_ranges([o for o in spec.TRAIN if o.name != "min_workers"], self)
        if not 1 <= self.min_workers <= self.num_workers:
            raise ValueError(
                f"--min_workers must be between 1 and --num_workers={self.num_workers}, "
                f"got {self.min_workers}"
            )


@spec.options_class(
    spec.PREDICT,
    positional=("data", "trained_model"),
    extra=(("job_type", str, "predict"), ("master_host", str, "127.0.0.1")),
)
class InferenceOptions:
    """What `elasticdl predict` and `elasticdl evaluate` accept (fields: `spec.PREDICT`),
    plus the job type and the address the master binds."""

    def validate(self) -> None:
        if self.job_type not in ("predict", "evaluate"):
            raise ValueError(f"job_type must be predict or evaluate, got {self.job_type!r}")
        spec.check_ranges(spec.PREDICT, self)
        if self.job_type == "predict":
            if not self.output:
                raise OutputError("--output is required: a directory or URL for the predictions")
            if self.output_format not in parts.FORMATS:
                raise ValueError(
                    f"--output_format must be one of {', '.join(parts.FORMATS)}, "
                    f"got {self.output_format!r}"
                )
        if any(a.role == "ps" for a in parse_chaos(self.chaos)):
            raise ChaosSpecError(f"--chaos {self.chaos!r}: a {self.job_type} job has no PS")


def options_from_kwargs(**kwargs: Any) -> TrainOptions:
    """TrainOptions from keyword arguments named like the flags (strings or values), parsed
    as the flags are: `options_from_kwargs(model_def="m", data="d", output="o")`."""
    args = spec.parse_kwargs("elasticdl.train", spec.TRAIN, spec.FIELD, kwargs)
    return TrainOptions(**spec.copy_fields(TrainOptions, args))


def inference_options_from_kwargs(job_type: str, **kwargs: Any) -> InferenceOptions:
    """InferenceOptions of a `job_type` (predict or evaluate) job from keyword arguments."""
    args = spec.parse_kwargs(f"elasticdl.{job_type}", spec.JOBS[job_type], spec.FIELD, kwargs)
    return InferenceOptions(**spec.copy_fields(InferenceOptions, args), job_type=job_type)
