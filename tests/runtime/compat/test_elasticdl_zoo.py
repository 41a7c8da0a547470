"""Files in the shapes of ElasticDL's own zoo train unchanged: jobs of 2 workers and 2 PS.

The zoo (tests/support/elasticdl_zoo.py) is a directory named `model_zoo`, run the way
ElasticDL's tutorials run theirs (`--model_zoo=.../model_zoo --model_def=pkg.module.symbol`),
with the Keras mode left to `auto`: each of these files needs Keras 2, which the job must pick.

* a Keras 2 file with ElasticDL's LearningRateScheduler and `tf.optimizers.SGD(lr)`, `feed`,
  and an absolute `from model_zoo.common.parse import ...`;
* ElasticDL's `Embedding` (v0.2 path) among TF ops on Keras tensors, outputs and metrics keyed
  by output;
* feature columns through v0.2's `elasticdl.python.elasticdl.feature_column`;
* a CTR model of `elasticdl_preprocessing` layers on Criteo-layout records, its hashed ids in
  tables on the parameter servers (SparseEmbedding).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from elasticdl_zoo import write_zoo
from job_checks import context_of, report_of

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.data.recordio import write_records
from elasticdl.runtime.embedding.tables import split_trained
from elasticdl.runtime.master.export import load_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    return write_zoo(tmp_path_factory.mktemp("elasticdl"))


def train(zoo: Path, model_def: str, train_data: Path, valid_data: Path, out: Path, **options):
    """Train with 2 workers and 2 PS; the report, and the Keras mode the job chose."""
    result = elasticdl.train(
        model_zoo=str(zoo),
        model_def=model_def,
        data=str(train_data),
        validation_data=str(valid_data),
        output=str(out / "model"),
        log_dir=str(out / "logs"),
        num_workers=2,
        num_ps=2,
        intra_op_threads=1,
        **options,
    )
    assert result.succeeded, result.error
    mode = json.loads((out / "logs" / "job.json").read_text())["keras_version"]
    return report_of(out / "model"), mode


def _example(**features) -> bytes:
    feature = {}
    for name, value in features.items():
        if isinstance(value, bytes):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        elif np.issubdtype(np.asarray(value).dtype, np.integer):
            ints = np.atleast_1d(value).tolist()
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=ints))
        else:
            floats = np.atleast_1d(value).tolist()
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=floats))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def id_records(count: int, seed: int) -> list[bytes]:
    """6 ids (0 pads the tail): a clicked record's ids come from 1-30, the others' from 31-60,
    so the per-id embeddings alone separate them."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(count):
        label = int(rng.integers(2))
        ids = rng.integers(1, 31, 6) + (0 if label else 30)
        ids[int(rng.integers(3, 7)) :] = 0
        records.append(_example(id=np.int64(i), feature=ids.astype(np.int64), label=label))
    return records


def heart_records(count: int, seed: int) -> list[bytes]:
    """`target` is 1 for a 'reversible' thal or an age over 60; chol is noise."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(count):
        thal = ["normal", "fixed", "reversible"][int(rng.integers(3))]
        age = int(rng.integers(29, 78))
        target = int(thal == "reversible" or age > 60)
        chol = np.float32(rng.normal(0.0, 1.0))
        records.append(
            _example(
                id=np.int64(i), age=np.int64(age), chol=chol, thal=thal.encode(), target=target
            )
        )
    return records


def test_a_keras2_file_with_callbacks_sgd_lr_feed_and_a_model_zoo_import(zoo, tmp_path):
    data = tmp_path / "data"
    gen.generate("classification", str(data / "train"), 2048, records_per_file=1024)
    gen.generate("classification", str(data / "valid"), 512, seed=7)
    report, mode = train(
        zoo,
        "keras2_lr.keras2_lr.custom_model",
        data / "train",
        data / "valid",
        tmp_path,
        minibatch_size=32,
        records_per_task=256,
        num_epochs=2,
    )
    assert mode == "2"
    assert report["metrics"]["accuracy"] > 0.9, context_of(report, "metrics")


def test_elasticdl_embedding_among_tf_ops_with_outputs_keyed_metrics(zoo, tmp_path):
    write_records(tmp_path / "train.recordio", id_records(2048, seed=1))
    write_records(tmp_path / "valid.recordio", id_records(512, seed=2))
    report, mode = train(
        zoo,
        "deepfm_edl.deepfm_edl.custom_model",
        tmp_path / "train.recordio",
        tmp_path / "valid.recordio",
        tmp_path,
        minibatch_size=32,
        records_per_task=256,
        num_epochs=2,
    )
    assert mode == "2"
    metrics = report["metrics"]
    assert set(metrics) == {"accuracy", "auc"}, metrics
    assert metrics["auc"] > 0.95 and metrics["accuracy"] > 0.9, metrics
    _, tables = split_trained(load_params((tmp_path / "model" / "params.npz").read_bytes()))
    assert len(tables) == 2 and all(len(ids) > 30 for ids, _ in tables.values())


def test_feature_columns_through_the_v02_path(zoo, tmp_path):
    write_records(tmp_path / "train.recordio", heart_records(2048, seed=1))
    write_records(tmp_path / "valid.recordio", heart_records(512, seed=2))
    report, mode = train(
        zoo,
        "heart_fc.heart_fc.custom_model",
        tmp_path / "train.recordio",
        tmp_path / "valid.recordio",
        tmp_path,
        minibatch_size=32,
        records_per_task=256,
        num_epochs=3,
    )
    assert mode == "2"
    assert report["metrics"]["accuracy"] > 0.9, context_of(report, "metrics")


def test_a_ctr_model_of_elasticdl_preprocessing_layers_on_criteo_records(zoo, tmp_path):
    data = tmp_path / "data"
    gen.generate("ctr", str(data / "train"), 4096, records_per_file=2048, vocab_scale=0.002)
    gen.generate("ctr", str(data / "valid"), 1024, seed=2, vocab_scale=0.002)
    report, mode = train(
        zoo,
        "ctr.ctr_model.custom_model",
        data / "train",
        data / "valid",
        tmp_path,
        minibatch_size=64,
        records_per_task=512,
        num_epochs=2,
    )
    assert mode == "2"
    metrics = report["metrics"]
    assert set(metrics) == {"accuracy", "auc"}, metrics
    assert metrics["auc"] > 0.7, context_of(report, "metrics")
    _, tables = split_trained(load_params((tmp_path / "model" / "params.npz").read_bytes()))
    assert len(tables) == 2, sorted(tables)  # the two SparseEmbeddings' tables on the PS
    assert all(len(ids) > 1000 for ids, _ in tables.values())
