"""The CTR models (deepfm.DeepFM, wide_and_deep.WideAndDeep): any Criteo-layout record parses,
the PS-backed variant builds standalone, the plain-Keras variant learns the ctr data."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2, feature_pb2

from elasticdl import Mode
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.embedding.tables import embedding_layers
from elasticdl.runtime.model_build import build_model
from elasticdl.runtime.model_spec import load_model_spec


def instance(model_def: str, params: str = ""):
    return load_model_spec(model_def, None, params).instantiate()


def foreign_record(label: float) -> bytes:
    """Criteo converted elsewhere: float counts, int64 categoricals, a float label, some
    features empty or missing, an extra column."""
    f = feature_pb2
    feature = {f"I{i}": f.Feature(float_list=f.FloatList(value=[float(i)])) for i in range(1, 13)}
    feature["I13"] = f.Feature(float_list=f.FloatList(value=[]))
    for i in range(1, 26):
        feature[f"C{i}"] = f.Feature(int64_list=f.Int64List(value=[1000 + i]))
    feature["label"] = f.Feature(float_list=f.FloatList(value=[label]))
    feature["extra"] = f.Feature(bytes_list=f.BytesList(value=[b"x"]))
    return example_pb2.Example(features=f.Features(feature=feature)).SerializeToString()


@pytest.mark.parametrize("model_def", ["deepfm.DeepFM", "wide_and_deep.WideAndDeep"])
def test_ctr_models_build_on_ctr_records_and_on_records_from_elsewhere(model_def):
    records = list(gen.examples("ctr", 64))
    model = instance(model_def)
    features, labels = build_model(model, records)
    assert features["ids"].dtype == tf.int64 and features["ids"].shape == (64, 26)
    assert int(tf.reduce_max(features["ids"])) > 2**40  # 63-bit hashed ids, no table size
    out = model.model(features).numpy()
    assert out.shape == (64, 1) and 0 < out.min() and out.max() < 1
    tables = embedding_layers(model.model)
    assert len(tables) == (26 if model_def.startswith("deepfm") else 27)

    foreign = [foreign_record(1.0), foreign_record(0.0)]
    metadata = DatasetMetadata.from_example(foreign[0])
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(foreign))
    parsed_features, parsed_labels = next(
        iter(model.dataset_fn(dataset, Mode.EVALUATION, metadata).batch(2))
    )
    np.testing.assert_array_equal(parsed_labels.numpy().ravel(), [1.0, 0.0])
    dense = parsed_features["dense"].numpy()
    np.testing.assert_allclose(dense[0, :12], np.log1p(np.arange(1, 13)), rtol=1e-6)
    assert dense[0, 12] == 0.0  # the empty I13
    assert model.model(parsed_features).shape == (2, 1)
    predict_only = model.dataset_fn(dataset, Mode.PREDICTION, metadata)
    assert set(next(iter(predict_only.batch(2)))) == {"dense", "ids"}


def test_keras_variant_of_deepfm_learns_the_ctr_data():
    train = list(gen.examples("ctr", 6144, seed=1, vocab_scale=0.001))
    test = list(gen.examples("ctr", 2048, seed=2, vocab_scale=0.001))
    model = instance("deepfm.DeepFM", "embedding='keras', hash_buckets=2048")
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(train))
    model.model.compile(optimizer=model.optimizer, loss=model.loss)
    model.model.fit(model.dataset_fn(dataset, Mode.TRAINING, None).batch(128), epochs=2, verbose=0)
    auc = model.eval_metrics().keras_metrics["auc"]
    held_out = tf.data.Dataset.from_tensor_slices(tf.constant(test))
    for features, labels in model.dataset_fn(held_out, Mode.EVALUATION, None).batch(512):
        auc.update_state(labels, model.model(features))
    assert float(auc.result()) > 0.7


def test_bad_ctr_params_are_one_clear_line():
    with pytest.raises(ValueError, match="needs hash_buckets"):
        instance("deepfm.DeepFM", "embedding='keras'")
    with pytest.raises(ValueError, match="optimizer must be"):
        instance("wide_and_deep.WideAndDeep", "optimizer='rmsprop'")
