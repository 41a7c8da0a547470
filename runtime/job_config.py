"""What every process of one job must agree on, written once by the master as JSON.

The master resolves the model zoo (a git zoo is cloned once) and passes the local root to
parameter servers and workers, which rebuild the same `ModelSpec` from it. Per-process facts
(worker id, ports, addresses) travel on each process's argv instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from elasticdl.runtime import job_options

GRPC_MAX_MESSAGE_BYTES = 1 << 30
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", GRPC_MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE_BYTES),
]


_RESOLVED_DEFAULTS = {
    # What the master resolves before it writes the config (None in the flags means "the
    # model's own function" or "decided from another flag").
    "dataset_fn": "",
    "loss": "",
    "optimizer": "",
    "eval_metrics_fn": "",
    "use_async": True,
    "grads_to_wait": 1,
    "num_workers": 1,
    "trained_model": "",
    "keras_version": "3",
    "minibatch_size": job_options.DEFAULT_MINIBATCH,
}


@job_options.options_class(
    [
        dataclasses.replace(o, default=_RESOLVED_DEFAULTS.get(o.dest, o.default))
        for o in job_options.config_options()
    ],
    surface=job_options.CONFIG,
    positional=("job_name", "model_def", "model_zoo_root"),
    extra=(
        ("model_zoo_root", str, ""),
        ("model_zoo", str, "builtin"),
        ("model_zoo_commit", str, ""),
        ("job_type", str, "train"),
        ("prediction_dir", str, ""),
        ("keep_columns", tuple, ()),
        ("secret_file", str, ""),
        ("versions_per_epoch", int, 0),
        ("features", str, ""),
    ),
    frozen=True,
)
class JobConfig:
    """The job-wide settings shared by master, parameter servers and workers: the options
    marked CONFIG in `runtime/job_options.py` (`checkpoint_dir` resolved: empty means no
    checkpoints), plus what the master resolves: the zoo (`model_zoo_root`, its URL and
    commit), `job_type` (train, predict or evaluate; predict and evaluate jobs have no PS),
    `prediction_dir` (predict: where workers write their parts) and `keep_columns` (predict:
    input columns copied into each output row), `secret_file` (the job's secret,
    runtime/auth.py, relative to this file's directory), `versions_per_epoch` (train: the
    model versions one epoch makes, for a learning rate scheduled by epoch) and `features`
    (the model's feature columns resolved against the data, runtime/column_spec.py; "" when
    its constructor takes none).
    `JobConfig.from_options(options, ...)` copies the fields an options object shares with it."""

    @classmethod
    def from_options(cls, options: Any, **resolved: Any) -> JobConfig:
        """The config from a job's options (fields of the same name), then `resolved`."""
        return cls(**job_options.copy_fields(cls, options, **resolved))

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
            features=self.features,
            eval_metrics=self.eval_metrics,
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
    """Apply per-process TensorFlow settings before any op runs (the Keras mode first: it
    must be set before TensorFlow is imported, see runtime/keras_mode.py)."""
    from elasticdl.runtime import keras_mode

    tf = import_tensorflow(config.keras_version)
    keras = keras_mode.keras()
    if config.intra_op_threads > 0:
        tf.config.threading.set_intra_op_parallelism_threads(config.intra_op_threads)
        tf.config.threading.set_inter_op_parallelism_threads(config.intra_op_threads)
    keras.utils.set_random_seed(config.seed)


def import_tensorflow(mode: str) -> ModuleType:
    """TensorFlow, imported with the Keras of `mode` (and Keras 3 without scikit-learn).

    Keras 3 is imported in Keras 2 mode too: the parameter servers keep their variables in it
    whatever the model file's Keras, and its first import (5 s with scikit-learn on a loaded
    2-core machine) came inside the store's lock on the first push, past the liveness probe."""
    from elasticdl.runtime import keras_mode

    keras_mode.apply(mode)
    with _sklearn_unimportable():
        import tensorflow as tf

        keras_mode.keras()
        import keras  # noqa: F401 - see above
    return tf


@contextlib.contextmanager
def _sklearn_unimportable() -> Iterator[None]:
    """While Keras 3 is imported, `import sklearn` fails (and afterwards works again).

    Why: `import keras` imports scikit-learn whenever it is installed, for its scikit-learn
    wrappers (`keras.wrappers.SKLearnClassifier`, ...), which a worker or parameter server
    never uses; with scipy.stats it costs 0.5 s of every job process's start (2.8 -> 2.3 s
    for TensorFlow and Keras, measured in this project's venv), paid again by every
    relaunched worker. Only elasticdl's own processes do this (job processes:
    `configure_tensorflow`, runtime/standby.py; the command's master: keras_mode.own_process);
    a model zoo may still import sklearn itself. A process that imported it already is left
    as it is."""
    if "sklearn" in sys.modules:
        yield
        return
    sys.modules["sklearn"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if "sklearn" in sys.modules and sys.modules["sklearn"] is None:
            del sys.modules["sklearn"]


def host_port(host: str, port: int) -> str:
    """`host:port` for gRPC, an IPv6 address in brackets (`[fd00::1]:2222`)."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"
