"""Turning the trained parameters into the job's model outputs (in a staging directory).

Layout of a model directory:

    saved_model/        Keras `model.export` (TF SavedModel, serving signature)
    model.keras         the Keras model file (`keras.saving.load_model`), whenever the model
                        can be serialised: written, then loaded back and checked to give the
                        same predictions; otherwise absent, and the report says why
    params.npz          parameters by stable variable name (what the PS held), and the rows
                        of PS-backed embedding tables (`embedding:<table>:ids` / `:rows`)
    trained_model.pb    the TrainedModel message: how to rebuild and use the model
    job_report.json     what happened during the job
    training_curves.png loss per epoch and evaluation metrics per version (curves.py)
    tensorboard/        event files, written live while the job ran (unless --tensorboard_dir
                        sent them elsewhere; tensorboard.py)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import inspect
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.model_build import build_model
from elasticdl.runtime.variables import assign, named_variables

log = logging.getLogger("elasticdl.master")
PARAMS_FILENAME = "params.npz"
SAVED_MODEL_DIR = "saved_model"
KERAS_FILE = "model.keras"


def save_params(values: dict[str, np.ndarray], path: Path) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **values)
    path.write_bytes(buffer.getvalue())


def load_params(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def export_model(
    config: JobConfig,
    values: dict[str, np.ndarray],
    sample_records: list[bytes],
    staging: Path,
    data_url: str,
    model_version: int,
    metrics: dict[str, float] | None = None,
    facts: dict[str, str] | None = None,
) -> pb.TrainedModel:
    """Rebuild the model, load `values`, and write SavedModel, params and TrainedModel.

    `values` may hold the rows of the model's embedding tables (`tables.trained_arrays`); the
    SavedModel serves them (an id no row was trained for reads as zeros). `facts`, when
    given, receives what the built model says of itself: `loss_units` (a model's optional
    `loss_units` attribute: the units of its loss when not the label's), and `keras_file`
    (KERAS_FILE, written) or `keras_file_missing` (why it could not be)."""
    from elasticdl import __version__
    from elasticdl.runtime.embedding.tables import split_trained, trained_arrays

    spec = config.load_spec()
    instance = spec.instantiate()
    metadata = _training_metadata(data_url, sample_records[0])
    batch = build_model(instance, sample_records, metadata=metadata)
    if facts is not None:
        facts["loss_units"] = str(getattr(instance.model, "loss_units", "") or "")
    values, tables = split_trained(values)
    layers = _serve_trained_rows(instance.model, tables)
    trainable, non_trainable = named_variables(instance.model)
    known = {**trainable, **non_trainable}
    missing = sorted(set(known) - set(values))
    if missing:
        raise RuntimeError(
            f"the parameter servers hold no value for {', '.join(missing[:5])}; "
            "the model built by the master differs from the workers' model"
        )
    assign(known, {name: values[name] for name in known})
    params = {name: values[name] for name in known}
    save_params({**params, **trained_arrays(tables)}, staging / PARAMS_FILENAME)
    export_saved_model(instance.model, layers, batch[0], staging / SAVED_MODEL_DIR)
    why_not = save_keras_file(instance.model, batch[0], staging / KERAS_FILE)
    if facts is not None:
        facts["keras_file" if not why_not else "keras_file_missing"] = why_not or KERAS_FILE
    trained = pb.TrainedModel(
        docker_commit_id="",
        model_def=config.model_def,
        model_def_params=config.params,
        params_filename=PARAMS_FILENAME,
        input_function=spec.sources.get("dataset_fn", ""),
        loss=spec.sources.get("loss", ""),
        optimizer=spec.sources.get("optimizer", ""),
        model_zoo=config.model_zoo,
        saved_model_path=SAVED_MODEL_DIR,
        data=data_url,
        created_time=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        model_version=model_version,
        eval_metrics_fn=spec.sources.get("eval_metrics_fn", ""),
        elasticdl_version=__version__,
        model_zoo_commit=config.model_zoo_commit,
        input_signature=metadata.to_json(),
        feature_columns=config.features,
    )
    if metadata.schema:
        # Trained from SQL: keep the query, the database (without password) and the schema.
        trained.sql = str(metadata.schema.get("sql", ""))
        trained.db_url = str(metadata.schema.get("db_url", ""))
        trained.label_column = str(metadata.schema.get("label") or "")
        trained.schema_json = json.dumps(metadata.schema, sort_keys=True)
    for name, value in (metrics or {}).items():
        trained.metrics[name] = float(value)
    for name, layer in layers.items():
        trained.embedding_tables.add(
            name=name,
            dim=layer.output_dim,
            rows=len(tables[name][0]),
            initializer=layer.embeddings_initializer,
        )
    return trained


def _serve_trained_rows(model: Any, tables: dict[str, Any]) -> dict[str, Any]:
    """Give each PS-backed embedding layer its trained rows (none: every id reads zeros)."""
    from elasticdl.runtime.embedding.tables import embedding_layers

    layers = embedding_layers(model)
    for name, layer in layers.items():
        if name not in tables:
            log.warning("embedding table %s: no trained rows; it serves zeros", name)
            tables[name] = (np.zeros(0, np.int64), np.zeros((0, layer.output_dim), np.float32))
        layer.set_trained_rows(*tables[name])
    return layers


def export_saved_model(model: Any, layers: dict[str, Any], features: Any, path: Path) -> None:
    """Keras `model.export`; with embedding tables (their hash tables and rows are tracked),
    or for a model whose inputs Keras cannot read, the signature is that of `features` (int64
    ids stay int64)."""
    with _quiet_tensorflow_info():
        _export(model, layers, features, path)


@contextlib.contextmanager
def _quiet_tensorflow_info() -> Iterator[None]:
    """TensorFlow's SavedModel builder logs "Assets written to: <path>" at INFO: the path is
    the job's staging folder, a temporary name of no use to anyone (the model is published
    to --output, which the job's last line names)."""
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def _export(model: Any, layers: dict[str, Any], features: Any, path: Path) -> None:
    if not layers and _inputs_known(model):
        if "verbose" in inspect.signature(model.export).parameters:
            model.export(str(path), verbose=False)
        else:  # Keras 2 (tf_keras) has no `verbose`: its summary goes to stdout
            with contextlib.redirect_stdout(io.StringIO()):
                model.export(str(path))
        return
    import keras
    import tensorflow as tf

    archive = keras.export.ExportArchive()
    archive.track(model)
    for layer in layers.values():
        for resource in layer.trained_resources:
            archive.track(resource)
    specs = tf.nest.map_structure(lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), features)
    archive.add_endpoint("serve", model.__call__, [specs])
    archive.write_out(str(path), verbose=False)


def _inputs_known(model: Any) -> bool:
    """Whether Keras's `model.export` can take the signature from the model. For a Sequential
    it reads `inputs`, which stay None when the first call was on a dict of features with no
    Input (ElasticDL's census_sequential: DenseFeatures first); such a model's signature is
    taken from the features instead."""
    from elasticdl.runtime.keras_mode import keras

    return not isinstance(model, keras().Sequential) or model.inputs is not None


def save_keras_file(model: Any, features: Any, path: Path) -> str:
    """Write `model` as a Keras file at `path`, load it back and compare its predictions on
    `features` with the model's; "" when it matches, else why there is no file (the file is
    then removed: a Keras file that does not give the model's predictions is worse than
    none). A subclassed model without `get_config`, a layer Keras cannot rebuild, trained
    rows held outside variables (PS-backed embedding tables) end here."""
    import tensorflow as tf

    from elasticdl.runtime.keras_mode import keras

    try:
        with _quiet_tensorflow_info(), contextlib.redirect_stdout(io.StringIO()):
            model.save(str(path))
            loaded = keras().models.load_model(str(path), compile=False)
        expected = tf.nest.flatten(model(features, training=False))
        got = tf.nest.flatten(loaded(features, training=False))
    except Exception as err:  # noqa: BLE001 - any failure means: no file, and why
        path.unlink(missing_ok=True)
        reason = " ".join(str(err).split())[:300] or type(err).__name__
        log.warning("no %s: the model cannot be saved as a Keras file: %s", path.name, reason)
        return f"the model cannot be saved as a Keras file: {reason}"
    if len(expected) != len(got) or not all(
        np.allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        for a, b in zip(expected, got, strict=True)
    ):
        path.unlink(missing_ok=True)
        log.warning("no %s: reloaded, it predicts differently", path.name)
        return "the model saved as a Keras file and loaded back predicts differently"
    return ""


def _training_metadata(data_url: str, first_record: bytes) -> DatasetMetadata:
    """Columns of the training data, with the SQL schema when the data came from SQL."""
    from elasticdl.runtime.data.files import expand_data_urls

    return DatasetMetadata.for_file(expand_data_urls(data_url)[0], first_record)


def write_trained_model(trained: pb.TrainedModel, staging: Path) -> None:
    (staging / "trained_model.pb").write_bytes(trained.SerializeToString())
