"""An input function of the zoo's own, named with --dataset_fn (not the model's module)."""

import tensorflow as tf

from elasticdl.python.common.constants import Mode

COLUMNS = ("sepal_length", "sepal_width", "petal_length", "petal_width")


def iris_input(dataset, mode, metadata=None):
    spec = {name: tf.io.FixedLenFeature([1], tf.float32) for name in COLUMNS}
    if mode != Mode.PREDICTION:
        spec["class"] = tf.io.FixedLenFeature([1], tf.int64)

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        label = parsed.pop("class", None)
        return parsed if label is None else (parsed, label)

    return dataset.map(parse)
