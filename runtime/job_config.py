"""What every process of one job must agree on, written once by the master as JSON.

The master resolves the model zoo (a git zoo is cloned once) and passes the local root to
parameter servers and workers, which rebuild the same `ModelSpec` from it. Per-process facts
(worker id, ports, addresses) travel on each process's argv instead.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GRPC_MAX_MESSAGE_BYTES = 1 << 30
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", GRPC_MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE_BYTES),
]


@dataclass(frozen=True)
class JobConfig:
    """The job-wide settings shared by master, parameter servers and workers."""

    job_name: str
    model_def: str
    model_zoo_root: str
    model_zoo: str = "builtin"
    model_zoo_commit: str = ""
    params: str = ""
    dataset_fn: str = ""
    loss: str = ""
    optimizer: str = ""
    eval_metrics_fn: str = ""
    minibatch_size: int = 64
    num_epochs: int = 1
    records_per_task: int = 1024
    num_workers: int = 1
    num_ps: int = 1
    use_async: bool = True
    grads_to_wait: int = 1
    lr_staleness_modulation: bool = False
    seed: int = 0
    shuffle: bool = True
    intra_op_threads: int = 0
    """TensorFlow intra-op threads per worker/PS process; 0 lets TensorFlow choose."""
    checkpoint_dir: str = ""
    """Where PS shards write checkpoints (fsspec URL); empty: no checkpoints."""
    checkpoint_steps: int = 0
    """Write a checkpoint every N model versions (0: never)."""
    keep_checkpoint_max: int = 3
    checkpoint_dir_for_init: str = ""
    """Restore parameters and optimizer state from the latest valid checkpoint here."""
    job_type: str = "train"
    """train, predict or evaluate; predict and evaluate jobs have no parameter servers."""
    trained_model: str = ""
    """predict/evaluate: the model directory (URL) workers load the parameters from."""
    prediction_dir: str = ""
    """predict: where workers write output parts (URL); the master publishes it."""
    output_format: str = "recordio"
    keep_columns: tuple[str, ...] = ()
    """predict: input columns copied into each output row."""
    secret_file: str = ""
    """The job's secret (runtime/auth.py), relative to this file's directory; empty: none."""
    tls_dir: str = ""
    """TLS certificate, key and CA for the job's channels (runtime/auth.py); empty: no TLS."""

    def load_spec(self) -> Any:
        """Resolve the model spec from the zoo root (no clone: the master did it)."""
        from elasticdl.runtime.model_spec import load_model_spec
        from elasticdl.runtime.zoo_source import ZooSource

        zoo = ZooSource(Path(self.model_zoo_root), self.model_zoo, self.model_zoo_commit)
        return load_model_spec(
            self.model_def,
            params=self.params,
            dataset_fn=self.dataset_fn or None,
            loss=self.loss or None,
            optimizer=self.optimizer or None,
            eval_metrics_fn=self.eval_metrics_fn or None,
            zoo=zoo,
        )

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JobConfig:
        data = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        found = {k: v for k, v in data.items() if k in known}
        if "keep_columns" in found:
            found["keep_columns"] = tuple(found["keep_columns"])
        return cls(**found)

    def write(self, path: Path) -> Path:
        path.write_text(self.to_json())
        return path

    @classmethod
    def read(cls, path: str | Path) -> JobConfig:
        return cls.from_json(Path(path).read_text())


def configure_tensorflow(config: JobConfig) -> None:
    """Apply per-process TensorFlow settings before any op runs."""
    import keras
    import tensorflow as tf

    if config.intra_op_threads > 0:
        tf.config.threading.set_intra_op_parallelism_threads(config.intra_op_threads)
        tf.config.threading.set_inter_op_parallelism_threads(config.intra_op_threads)
    keras.utils.set_random_seed(config.seed)


def host_port(host: str, port: int) -> str:
    """`host:port` for gRPC, an IPv6 address in brackets (`[fd00::1]:2222`)."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"
