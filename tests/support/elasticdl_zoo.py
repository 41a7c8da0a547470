"""A zoo named `model_zoo`, in the shapes of ElasticDL's own (v0.2 and its develop branch).

Written here (never copied from ElasticDL), each file takes the shape of a kind of file in
ElasticDL's zoo that this project must train unchanged:

* `keras2_lr/keras2_lr.py` (cifar10_functional_api's shape): TF ops applied to Keras tensors
  (so auto mode picks Keras 2), `callbacks()` returning ElasticDL's LearningRateScheduler,
  `optimizer(lr)` returning `tf.optimizers.SGD(lr)`, `feed` instead of `dataset_fn`, and the
  parsing in another module of the zoo imported as `from model_zoo.common.parse import ...`
  (develop's cifar10 files import `model_zoo.cifar10.data_parser` so);
* `deepfm_edl/deepfm_edl.py` (deepfm_edl_embedding's shape): ElasticDL's `Embedding` from its
  v0.2 path on a float `Input`, `mask_zero` with a mask-applying layer, `K.sum`/`tf.reshape` on
  Keras tensors, a dict of outputs and metrics keyed by output;
* `heart_fc/heart_fc.py` (heart_functional_api's shape): feature columns with
  `elasticdl.python.elasticdl.feature_column.feature_column.embedding_column` and
  `DenseFeatures`;
* `ctr/` (dac_ctr's shape): Criteo-layout records (`elasticdl data gen ctr`) through the
  `elasticdl_preprocessing` layers (Normalizer, Discretization, Hashing, ToSparse,
  ConcatenateWithOffset, SparseEmbedding) into a wide-and-deep model with `{"logits",
  "probs"}` outputs; the hashed ids' table is large enough to live on the parameter servers.

`write_zoo(parent)` writes them under `parent/model_zoo` and returns that directory.
"""

from __future__ import annotations

from pathlib import Path

PARSE = """
import tensorflow as tf

from elasticdl.python.common.constants import Mode

FEATURES = ["x%d" % i for i in range(8)]


def parse_table(record, mode):
    description = {name: tf.io.FixedLenFeature([1], tf.float32) for name in FEATURES}
    if mode != Mode.PREDICTION:
        description["label"] = tf.io.FixedLenFeature([1], tf.int64)
    r = tf.io.parse_single_example(record, description)
    features = {"x": tf.concat([r[name] for name in FEATURES], 0)}
    if mode == Mode.PREDICTION:
        return features
    return features, tf.cast(r["label"], tf.int32)
"""

KERAS2_LR = """
import tensorflow as tf

from elasticdl.python.common.constants import Mode
from elasticdl.python.elasticdl.callbacks import LearningRateScheduler
from model_zoo.common.parse import parse_table


def custom_model():
    inputs = tf.keras.layers.Input(shape=(8,), name="x")
    hidden = tf.keras.layers.Dense(16, activation="relu")(inputs)
    hidden = tf.concat([hidden, tf.square(inputs)], axis=1)
    logits = tf.keras.layers.Dense(2, name="output")(hidden)
    return tf.keras.Model(inputs=inputs, outputs=logits, name="keras2_lr")


def loss(labels, predictions):
    labels = tf.reshape(labels, [-1])
    return tf.reduce_mean(
        input_tensor=tf.nn.sparse_softmax_cross_entropy_with_logits(
            logits=predictions, labels=labels
        )
    )


def optimizer(lr=0.1):
    return tf.optimizers.SGD(lr)


def callbacks():
    def _schedule(model_version):
        return 0.2 if model_version < 40 else 0.05

    return [LearningRateScheduler(_schedule)]


def feed(dataset, mode, _):
    def _parse_data(record):
        return parse_table(record, mode)

    dataset = dataset.map(_parse_data)
    if mode == Mode.TRAINING:
        dataset = dataset.shuffle(buffer_size=256)
    return dataset


def eval_metrics_fn():
    return {
        "accuracy": lambda labels, predictions: tf.equal(
            tf.argmax(predictions, 1, output_type=tf.int32),
            tf.cast(tf.reshape(labels, [-1]), tf.int32),
        )
    }
"""

DEEPFM_EDL = """
import tensorflow as tf
import tensorflow.keras.backend as K
from tensorflow.keras.layers import Dense, Flatten, Layer, Multiply, Subtract

from elasticdl.python.common.constants import Mode
from elasticdl.python.elasticdl.layers.embedding import Embedding


class ApplyMask(Layer):
    def __init__(self, **kwargs):
        self.supports_masking = True
        super(ApplyMask, self).__init__(**kwargs)

    def compute_mask(self, input, input_mask=None):
        return None

    def call(self, x, mask=None):
        return Multiply()([x, tf.cast(K.expand_dims(mask, -1), tf.float32)])


def custom_model(embedding_dim=4, input_length=6, fc_unit=8):
    inputs = tf.keras.Input(shape=(input_length,))
    embeddings = Embedding(output_dim=embedding_dim, mask_zero=True, input_length=input_length)(
        inputs
    )
    embeddings = ApplyMask()(embeddings)
    emb_sum = K.sum(embeddings, axis=1)
    second_order = K.sum(
        0.5 * Subtract()([K.square(emb_sum), K.sum(K.square(embeddings), axis=1)]), axis=1
    )
    id_bias = ApplyMask()(Embedding(output_dim=1, mask_zero=True)(inputs))
    first_order = K.sum(id_bias, axis=(1, 2))
    fm_output = tf.keras.layers.Add()([first_order, second_order])
    deep_output = tf.reshape(Dense(1)(Dense(fc_unit)(Flatten()(embeddings))), shape=(-1,))
    logits = tf.keras.layers.Add()([fm_output, deep_output])
    probs = tf.reshape(tf.sigmoid(logits), shape=(-1, 1))
    return tf.keras.Model(inputs=inputs, outputs={"logits": logits, "probs": probs})


def loss(labels, predictions):
    logits = tf.reshape(predictions["logits"], [-1])
    labels = tf.cast(tf.reshape(labels, [-1]), tf.dtypes.float32)
    return tf.reduce_mean(
        input_tensor=tf.nn.sigmoid_cross_entropy_with_logits(logits=logits, labels=labels)
    )


def optimizer(lr=0.1):
    return tf.optimizers.SGD(lr)


def feed(dataset, mode, _):
    def _parse_data(record):
        description = {"feature": tf.io.FixedLenFeature([6], tf.int64)}
        if mode != Mode.PREDICTION:
            description["label"] = tf.io.FixedLenFeature([1], tf.int64)
        r = tf.io.parse_single_example(record, description)
        features = {"feature": tf.cast(r["feature"], tf.float32)}
        if mode == Mode.PREDICTION:
            return features
        return features, tf.cast(r["label"], tf.int32)

    return dataset.map(_parse_data)


def eval_metrics_fn():
    return {
        "logits": {
            "accuracy": lambda labels, predictions: tf.equal(
                tf.cast(tf.reshape(predictions, [-1]) > 0.0, tf.int32),
                tf.cast(tf.reshape(labels, [-1]), tf.int32),
            )
        },
        "probs": {"auc": tf.keras.metrics.AUC()},
    }
"""

HEART_FC = """
import tensorflow as tf

from elasticdl.python.elasticdl.feature_column import feature_column


def get_feature_columns_and_inputs():
    feature_columns = [tf.feature_column.numeric_column("chol")]
    feature_input_layers = {"chol": tf.keras.Input(shape=(1,), name="chol")}
    age = tf.feature_column.numeric_column("age")
    feature_columns.append(tf.feature_column.bucketized_column(age, boundaries=[30, 45, 60]))
    feature_input_layers["age"] = tf.keras.Input(shape=(1,), name="age")
    thal = tf.feature_column.categorical_column_with_hash_bucket("thal", hash_bucket_size=32)
    feature_columns.append(feature_column.embedding_column(thal, dimension=4))
    feature_input_layers["thal"] = tf.keras.Input(shape=(1,), name="thal", dtype=tf.string)
    return feature_columns, feature_input_layers


def custom_model():
    feature_columns, feature_inputs = get_feature_columns_and_inputs()
    x = tf.keras.layers.DenseFeatures(feature_columns)(feature_inputs)
    x = tf.keras.layers.Dense(8, activation="relu")(x)
    y = tf.keras.layers.Dense(1, activation="sigmoid")(x)
    return tf.keras.Model(inputs=feature_inputs, outputs=y)


def loss(labels, predictions):
    labels = tf.cast(tf.reshape(labels, [-1]), tf.float32)
    predictions = tf.reshape(predictions, [-1])
    return tf.keras.losses.binary_crossentropy(labels, predictions)


def optimizer(lr=0.05):
    return tf.keras.optimizers.Adam(lr)


def feed(dataset, mode, _):
    def _parse_data(record):
        description = {
            "age": tf.io.FixedLenFeature([], tf.int64),
            "chol": tf.io.FixedLenFeature([], tf.float32),
            "thal": tf.io.FixedLenFeature([], tf.string),
            "target": tf.io.FixedLenFeature([], tf.int64),
        }
        parsed = tf.io.parse_single_example(record, description)
        label = parsed.pop("target")
        return parsed, label

    return dataset.map(_parse_data)


def eval_metrics_fn():
    return {
        "accuracy": lambda labels, predictions: tf.equal(
            tf.cast(tf.reshape(predictions, [-1]) > 0.5, tf.int32),
            tf.cast(tf.reshape(labels, [-1]), tf.int32),
        )
    }
"""

CTR_CONFIG = """
INT_FEATURES = ["I%d" % i for i in range(1, 14)]
CAT_FEATURES = ["C%d" % i for i in range(1, 27)]
LABEL_KEY = "label"

FEATURES_AVGS = {name: 1.0 for name in INT_FEATURES}
FEATURES_STDDEVS = {name: 4.0 for name in INT_FEATURES}
FEATURE_BOUNDARIES = {name: [0.0, 1.0, 2.0, 4.0, 8.0, 16.0] for name in INT_FEATURES}
HASH_BUCKETS = 1000000
"""

CTR_TRANSFORM = """
import tensorflow as tf

from elasticdl_preprocessing.layers import (
    ConcatenateWithOffset,
    Discretization,
    Hashing,
    Normalizer,
    SparseEmbedding,
    ToSparse,
)
from model_zoo.ctr.feature_config import (
    CAT_FEATURES,
    FEATURE_BOUNDARIES,
    FEATURES_AVGS,
    FEATURES_STDDEVS,
    HASH_BUCKETS,
    INT_FEATURES,
)


def transform_feature(inputs):
    standardized = tf.concat(
        [
            Normalizer(subtractor=FEATURES_AVGS[name], divisor=FEATURES_STDDEVS[name])(inputs[name])
            for name in INT_FEATURES
        ],
        -1,
    )
    bucket_ids, offsets = [], [0]
    for name in INT_FEATURES:
        layer = Discretization(bins=FEATURE_BOUNDARIES[name])
        bucket_ids.append(layer(inputs[name]))
        offsets.append(offsets[-1] + layer.num_bins())
    buckets = ConcatenateWithOffset(offsets[:-1])(bucket_ids)
    hashed = [Hashing(num_bins=HASH_BUCKETS)(ToSparse()(inputs[name])) for name in CAT_FEATURES]
    categories = ConcatenateWithOffset([HASH_BUCKETS * i for i in range(len(CAT_FEATURES))])(hashed)
    return standardized, buckets, offsets[-1], categories


def embed_categories(categories, dim, combiner):
    rows = HASH_BUCKETS * len(CAT_FEATURES)
    return SparseEmbedding(input_dim=rows, output_dim=dim, combiner=combiner)(categories)
"""

CTR_MODEL = """
import tensorflow as tf

from model_zoo.ctr.feature_config import CAT_FEATURES, INT_FEATURES, LABEL_KEY
from model_zoo.ctr.transform import embed_categories, transform_feature


def custom_model():
    inputs = {}
    for name in INT_FEATURES + CAT_FEATURES:
        dtype = tf.int64 if name in INT_FEATURES else tf.string
        inputs[name] = tf.keras.layers.Input(name=name, shape=(1,), dtype=dtype)
    standardized, buckets, max_bucket, categories = transform_feature(inputs)
    wide = tf.keras.backend.sum(tf.keras.layers.Embedding(max_bucket, 1)(buckets), axis=1)
    wide = tf.concat([wide, embed_categories(categories, 1, "sum")], 1)
    deep = tf.concat([standardized, embed_categories(categories, 8, "mean")], 1)
    for units in [16, 4]:
        deep = tf.keras.layers.Dense(units, activation="relu")(deep)
    deep_logit = tf.keras.layers.Dense(1, use_bias=False)(deep)
    logits = tf.reduce_sum(tf.concat([wide, deep_logit], 1), 1, keepdims=True)
    probs = tf.reshape(tf.sigmoid(logits), shape=(-1,))
    return tf.keras.Model(inputs=inputs, outputs={"logits": logits, "probs": probs}, name="ctr")


def loss(labels, predictions):
    logits = predictions["logits"]
    return tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.cast(tf.reshape(labels, (-1, 1)), tf.float32), logits=logits
        )
    )


def optimizer(lr=0.01):
    return tf.keras.optimizers.Adam(learning_rate=lr)


def eval_metrics_fn():
    return {
        "logits": {
            "accuracy": lambda labels, predictions: tf.equal(
                tf.cast(tf.reshape(predictions, [-1]) > 0.0, tf.int32),
                tf.cast(tf.reshape(labels, [-1]), tf.int32),
            )
        },
        "probs": {"auc": tf.keras.metrics.AUC()},
    }


def feed(dataset, mode, _):
    def _parse_data(record):
        description = dict(
            [(name, tf.io.FixedLenFeature((1,), tf.int64)) for name in INT_FEATURES]
            + [(name, tf.io.FixedLenFeature((1,), tf.string)) for name in CAT_FEATURES]
            + [(LABEL_KEY, tf.io.FixedLenFeature([], tf.int64))]
        )
        parsed = tf.io.parse_single_example(record, description)
        label = parsed.pop(LABEL_KEY)
        return parsed, label

    return dataset.map(_parse_data)
"""

FILES = {
    "__init__.py": "",
    "common/__init__.py": "",
    "common/parse.py": PARSE,
    "keras2_lr/__init__.py": "",
    "keras2_lr/keras2_lr.py": KERAS2_LR,
    "deepfm_edl/__init__.py": "",
    "deepfm_edl/deepfm_edl.py": DEEPFM_EDL,
    "heart_fc/__init__.py": "",
    "heart_fc/heart_fc.py": HEART_FC,
    "ctr/__init__.py": "",
    "ctr/feature_config.py": CTR_CONFIG,
    "ctr/transform.py": CTR_TRANSFORM,
    "ctr/ctr_model.py": CTR_MODEL,
}


def write_zoo(parent: Path) -> Path:
    """Write the zoo under `parent/model_zoo`; return that directory (the `--model_zoo`)."""
    root = parent / "model_zoo"
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))
    return root
