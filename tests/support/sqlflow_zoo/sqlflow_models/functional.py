"""A functional model: inputs built from `field_metas`, features from `feature_columns`."""

import tensorflow as tf


def dnn_functional(feature_columns, field_metas, n_classes=3):
    inputs = {
        meta["feature_name"]: tf.keras.Input(
            shape=meta["shape"], name=meta["feature_name"], dtype=meta["dtype"]
        )
        for meta in field_metas.values()
    }
    x = tf.keras.layers.DenseFeatures(feature_columns)(inputs)
    x = tf.keras.layers.Dense(16, activation="relu")(x)
    outputs = tf.keras.layers.Dense(n_classes, activation="softmax")(x)
    return tf.keras.Model(inputs=list(inputs.values()), outputs=outputs)


def loss(labels, output):
    return tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, output))


def optimizer(lr=0.1):
    return tf.keras.optimizers.Adagrad(lr=lr)


def prepare_prediction_column(self, prediction):
    # A stray `self`, as SQLFlow's own example has it.
    return prediction.argmax(axis=-1)
