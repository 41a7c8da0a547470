"""Reading a trained model back: the TrainedModel message, its parameters, its model spec.

A model directory (any fsspec URL) is what a training job published: `trained_model.pb` (the
commit marker, written last), `params.npz`, `saved_model/`. Prediction and evaluation jobs
rebuild the user's Keras model from the model zoo the TrainedModel names (the spec, with its
`dataset_fn` and metrics, is needed, not just the SavedModel's serving signature) and load the
parameters by stable variable name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import fsspec
import numpy as np
from google.protobuf.message import DecodeError

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.runtime.data.metadata import DatasetMetadata

TRAINED_MODEL_FILE = "trained_model.pb"
LATEST_FILE = "LATEST"
"""In a versioned model's directory (`--versioned true`, a SQL statement's INTO name): the URL
of its newest finished run, replaced atomically by each training that publishes."""


class TrainedModelError(ValueError):
    """`--trained_model` is missing, incomplete or unreadable; the message says which."""


@dataclass
class TrainedModelFiles:
    """A published model: its TrainedModel message and parameters by variable name."""

    url: str
    trained: pb.TrainedModel
    params: dict[str, np.ndarray]

    @property
    def feature_inputs(self) -> set[str] | None:
        """The columns the model's feature columns read (None: it has none recorded, and
        needs every column it was trained on)."""
        if not self.trained.feature_columns:
            return None
        from elasticdl.runtime.column_spec import ResolvedFeatures

        return set(ResolvedFeatures.from_json(self.trained.feature_columns).inputs)

    @property
    def input_metadata(self) -> DatasetMetadata | None:
        """Columns of the training records (None for models exported before it was kept)."""
        if not self.trained.input_signature:
            return None
        return DatasetMetadata.from_json(self.trained.input_signature)


def _read(fs: Any, path: str, url: str, what: str) -> bytes:
    try:
        return fs.cat_file(path)
    except FileNotFoundError:
        raise TrainedModelError(
            f"--trained_model {url!r} has no {what}: "
            + (
                "it is not a finished model directory (a training job writes "
                f"{TRAINED_MODEL_FILE} last, so a model without it did not complete)"
                if what == TRAINED_MODEL_FILE
                else "the model directory is incomplete; train again or restore it"
            )
        ) from None
    except OSError as err:
        raise TrainedModelError(f"--trained_model {url!r}: cannot read {what}: {err}") from err


def resolve_model_url(url: str, storage_options: dict[str, Any] | None = None) -> str:
    """The model directory `url` means: itself, or the run its LATEST names (a versioned
    model). A job resolves it once, so all its processes read the same run."""
    if not url:
        raise TrainedModelError("--trained_model is required: the output of a training job")
    fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    try:
        text = fs.cat_file(f"{root.rstrip('/')}/{LATEST_FILE}").decode("utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return url
    except OSError as err:
        raise TrainedModelError(
            f"--trained_model {url!r}: cannot read {LATEST_FILE}: {err}"
        ) from None
    if not text:
        raise TrainedModelError(
            f"--trained_model {url!r}: its {LATEST_FILE} is empty; it should name a finished run"
        )
    return text


def read_trained_message(url: str) -> pb.TrainedModel:
    """The TrainedModel message of `url` (following LATEST) without its parameters."""
    url = resolve_model_url(url)
    fs, root = fsspec.core.url_to_fs(url)
    raw = _read(fs, f"{root.rstrip('/')}/{TRAINED_MODEL_FILE}", url, TRAINED_MODEL_FILE)
    try:
        return pb.TrainedModel.FromString(raw)
    except DecodeError as err:
        raise TrainedModelError(
            f"--trained_model {url!r}: {TRAINED_MODEL_FILE} is corrupt ({err})"
        ) from None


def read_trained_model(
    url: str, storage_options: dict[str, Any] | None = None
) -> TrainedModelFiles:
    """Read the TrainedModel and its parameters (following LATEST); TrainedModelError says
    what is wrong."""
    from elasticdl.runtime.master.export import load_params

    url = resolve_model_url(url, storage_options)
    fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    root = root.rstrip("/")
    if not fs.exists(root):
        raise TrainedModelError(f"--trained_model {url!r} does not exist")
    raw = _read(fs, f"{root}/{TRAINED_MODEL_FILE}", url, TRAINED_MODEL_FILE)
    try:
        trained = pb.TrainedModel.FromString(raw)
    except DecodeError as err:
        raise TrainedModelError(
            f"--trained_model {url!r}: {TRAINED_MODEL_FILE} is corrupt ({err}); "
            "train again or restore the file"
        ) from None
    if not trained.model_def or not trained.params_filename:
        raise TrainedModelError(
            f"--trained_model {url!r}: {TRAINED_MODEL_FILE} names no model_def or parameters "
            "file; it is not an ElasticDL TrainedModel"
        )
    data = _read(fs, f"{root}/{trained.params_filename}", url, trained.params_filename)
    try:
        params = load_params(data)
    except (ValueError, OSError, EOFError) as err:
        raise TrainedModelError(
            f"--trained_model {url!r}: {trained.params_filename} is corrupt ({err})"
        ) from None
    return TrainedModelFiles(url, trained, params)


def load_parameters(model: Any, params: dict[str, np.ndarray], url: str) -> None:
    """Assign `params` to a built model's variables, and the trained rows of its PS-backed
    embedding tables to their layers; TrainedModelError on any mismatch."""
    from elasticdl.runtime.embedding.tables import embedding_layers, split_trained
    from elasticdl.runtime.variables import assign, named_variables

    params, tables = split_trained(params)
    layers = embedding_layers(model)
    for name, (ids, rows) in tables.items():
        layer = layers.get(name)
        if layer is None or rows.shape[-1] != layer.output_dim:
            raise TrainedModelError(
                f"--trained_model {url!r}: it holds embedding table {name!r} "
                f"({rows.shape[-1]} wide), which the model rebuilt from the zoo "
                f"{'lacks' if layer is None else f'has {layer.output_dim} wide'}; "
                "was the model zoo or --params changed since training?"
            )
        layer.set_trained_rows(ids, rows)
    for name, layer in layers.items():
        if name not in tables:
            layer.set_trained_rows(np.zeros(0, np.int64), np.zeros((0, layer.output_dim)))

    trainable, non_trainable = named_variables(model)
    known = {**trainable, **non_trainable}
    missing = sorted(set(known) - set(params))
    wrong = sorted(
        name
        for name in set(known) & set(params)
        if tuple(known[name].shape) != tuple(params[name].shape)
    )
    if missing or wrong:
        detail = ", ".join(
            [f"{n} (missing)" for n in missing[:3]]
            + [
                f"{n} (shape {tuple(params[n].shape)}, model wants {tuple(known[n].shape)})"
                for n in wrong[:3]
            ]
        )
        raise TrainedModelError(
            f"--trained_model {url!r}: its parameters do not fit the model rebuilt from the zoo: "
            f"{detail}; was the model zoo or --params changed since training?"
        )
    assign(known, {name: params[name] for name in known})
