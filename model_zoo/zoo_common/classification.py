"""Loss and metric shared by the classifiers of the zoo (logits out, integer labels)."""

from __future__ import annotations

import tensorflow as tf


def sparse_softmax_loss(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    """Mean cross-entropy of logits [batch, classes] against integer labels [batch, 1]."""
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=predictions)
    )


def accuracy(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    """Per-example 1.0 where the arg-max of `predictions` equals the label, else 0.0."""
    predicted = tf.argmax(predictions, axis=1, output_type=tf.int32)
    hits = tf.equal(predicted, tf.reshape(tf.cast(labels, tf.int32), [-1]))
    return tf.cast(hits, tf.float32)
