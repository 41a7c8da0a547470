"""A DNN regressor over feature columns (Keras 2: DenseFeatures)."""

import tensorflow as tf


class DNNRegressor(tf.keras.Model):
    def __init__(self, feature_columns=None, hidden_units=(16, 16)):
        super().__init__()
        self.features = tf.keras.layers.DenseFeatures(feature_columns)
        self.hidden = [tf.keras.layers.Dense(units, activation="relu") for units in hidden_units]
        self.out = tf.keras.layers.Dense(1)

    def call(self, inputs, training=False):
        x = self.features(inputs)
        for layer in self.hidden:
            x = layer(x)
        return self.out(x)


def optimizer(learning_rate=0.01):
    return tf.keras.optimizers.Adam(lr=learning_rate)


def loss(labels, output):
    return tf.keras.losses.MSE(labels, output)


def prepare_prediction_column(prediction):
    return prediction[0]
