"""The options of a training job, as the CLI, the Python API and SQL front ends give them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TrainOptions:
    """What `elasticdl train` accepts; every field has the CLI flag's name."""

    model_def: str
    training_data: str
    output: str
    model_zoo: str | None = None
    validation_data: str = ""
    evaluation_steps: int = 0
    checkpoint_steps: int = 0
    keep_checkpoint_max: int = 3
    checkpoint_dir: str = ""
    checkpoint_dir_for_init: str = ""
    max_ps_relaunches: int = 3
    params: str = ""
    dataset_fn: str | None = None
    loss: str | None = None
    optimizer: str | None = None
    eval_metrics_fn: str | None = None
    num_workers: int = 2
    min_workers: int = 1
    num_ps: int = 1
    minibatch_size: int = 64
    num_epochs: int = 1
    records_per_task: int = 1024
    use_async: bool = True
    grads_to_wait: int = 1
    lr_staleness_modulation: bool = False
    max_worker_relaunches: int = 3
    max_task_retries: int = 3
    task_timeout_floor_s: float = 300.0
    master_host: str = "127.0.0.1"
    master_port: int = 0
    tls_dir: str = ""
    """TLS certificate, key and CA for the job's channels (runtime/auth.py load_tls)."""
    chaos: str = ""
    seed: int = 0
    shuffle: bool = True
    intra_op_threads: int = 0
    job_name: str = ""
    log_dir: str = ""
    engine: str = "local"

    @property
    def resolved_checkpoint_dir(self) -> str:
        """Where checkpoints go: --checkpoint_dir, else `<output>/checkpoints` when enabled."""
        if self.checkpoint_dir:
            return self.checkpoint_dir
        if self.checkpoint_steps > 0:
            return f"{self.output.rstrip('/')}/checkpoints"
        return ""

    def validate(self) -> None:
        """Raise ValueError naming the first option out of range."""
        positive = {
            "num_workers": self.num_workers,
            "num_ps": self.num_ps,
            "minibatch_size": self.minibatch_size,
            "num_epochs": self.num_epochs,
            "records_per_task": self.records_per_task,
            "grads_to_wait": self.grads_to_wait,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"--{name} must be >= 1, got {value}")
        for name, value in {
            "max_worker_relaunches": self.max_worker_relaunches,
            "max_task_retries": self.max_task_retries,
            "evaluation_steps": self.evaluation_steps,
            "checkpoint_steps": self.checkpoint_steps,
            "keep_checkpoint_max": self.keep_checkpoint_max,
            "max_ps_relaunches": self.max_ps_relaunches,
            "intra_op_threads": self.intra_op_threads,
        }.items():
            if value < 0:
                raise ValueError(f"--{name} must be >= 0, got {value}")
        if not 1 <= self.min_workers <= self.num_workers:
            raise ValueError(
                f"--min_workers must be between 1 and --num_workers={self.num_workers}, "
                f"got {self.min_workers}"
            )
        if self.engine != "local":
            raise ValueError(
                f"--engine {self.engine!r} is not available here; use --engine local "
                "(the Argo engine renders workflows with `elasticdl render`)"
            )
        if not 0 <= self.master_port < 65536:
            raise ValueError(f"--master_port must be in 0..65535, got {self.master_port}")
