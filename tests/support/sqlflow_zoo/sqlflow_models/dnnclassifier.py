"""A DNN classifier over feature columns (Keras 2: DenseFeatures)."""

import tensorflow as tf


class DNNClassifier(tf.keras.Model):
    def __init__(self, feature_columns=None, hidden_units=(16, 16), n_classes=3):
        super().__init__()
        self.features = None
        if feature_columns is not None:
            self.features = tf.keras.layers.DenseFeatures(feature_columns)
        self.hidden = [tf.keras.layers.Dense(units, activation="relu") for units in hidden_units]
        self.out = tf.keras.layers.Dense(n_classes, activation="softmax")

    def call(self, inputs, training=False):
        x = self.features(inputs) if self.features is not None else inputs
        for layer in self.hidden:
            x = layer(x)
        return self.out(x)


def optimizer(learning_rate=0.001):
    # Keras 2's spelling of the rate; tf_keras alone would ignore it.
    return tf.keras.optimizers.Adagrad(lr=learning_rate)


def loss(labels, output):
    # One value per example: the job averages it, as Keras compile does.
    return tf.keras.losses.sparse_categorical_crossentropy(labels, output)


def eval_metrics_fn():
    def accuracy(labels, predictions):
        predicted = tf.argmax(predictions, 1, output_type=tf.int32)
        return tf.equal(predicted, tf.cast(tf.reshape(labels, [-1]), tf.int32))

    return {"accuracy": accuracy}


def prepare_prediction_column(prediction):
    """The most probable class of one row."""
    return prediction.argmax(axis=-1)
