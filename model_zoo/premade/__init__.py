"""SQLFlow's premade models: `TO TRAIN DNNClassifier ... COLUMN ... LABEL class INTO m`.

SQLFlow ran TensorFlow's canned estimators under these names; here each is a Keras 3 model
taking the WITH keys SQLFlow documents for the estimator and its features from the COLUMN
clause (every column but the label without one), resolved by the job and given to the
constructor (runtime/feature_args.py; the layer: `zoo_common/features.py`):

* DNNClassifier: hidden_units, n_classes (2), optimizer (Adagrad), activation_fn (relu),
  dropout, batch_norm;
* DNNRegressor: hidden_units, label_dimension (1), optimizer (Adagrad), activation_fn,
  dropout, batch_norm;
* LinearClassifier: n_classes (2), optimizer (Ftrl); LinearRegressor: label_dimension (1),
  optimizer (Ftrl);
* DNNLinearCombinedClassifier: dnn_hidden_units, n_classes, dnn_optimizer (Adagrad),
  linear_optimizer, dnn_activation_fn, dnn_dropout, batch_norm, with `COLUMN ... FOR
  linear_feature_columns` and `COLUMN ... FOR dnn_feature_columns` (without them every feature
  feeds both parts); DNNLinearCombinedRegressor: the same with label_dimension.

`optimizer.learning_rate` (or `learning_rate`) sets the optimizer's rate; the defaults are the
canned estimators' (Adagrad 0.05, Ftrl 0.2). A classifier outputs the probability of each class
(the class id is what PREDICT writes) and its label is a class id in [0, n_classes); a
regressor outputs the label's value. One difference from the estimators: the parameter
servers apply one optimizer to a whole model, so a wide-and-deep model trains both parts with
`dnn_optimizer`; a different `linear_optimizer` is refused rather than ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf
from zoo_common.features import FeatureLayer

from elasticdl.runtime.column_spec import ResolvedFeatures

_RATES = {"Adagrad": 0.05, "Ftrl": 0.2}


def _optimizer(given: Any, learning_rate: float | None) -> Any:
    """A Keras optimizer from a class name or an instance (built from `optimizer.*` keys)."""
    if not isinstance(given, str):
        if learning_rate is not None:
            given.learning_rate = learning_rate
        return given
    cls = getattr(tf.keras.optimizers, given)
    rate = learning_rate if learning_rate is not None else _RATES.get(given, 0.01)
    return cls(learning_rate=rate)


def _name_of(optimizer: Any) -> str:
    return optimizer if isinstance(optimizer, str) else type(optimizer).__name__


def _features(value: ResolvedFeatures | None, model: str, argument: str) -> ResolvedFeatures:
    if value is None:
        raise ValueError(
            f"{model} needs {argument}: train it through a job (elasticdl train / sql), which "
            "resolves the COLUMN clause (or every column but the label) against the data"
        )
    return value


def class_ids_accuracy(labels: tf.Tensor, probabilities: tf.Tensor) -> tf.Tensor:
    """Per-example accuracy of the most probable class."""
    predicted = tf.argmax(probabilities, axis=-1, output_type=tf.int64)
    return tf.cast(tf.equal(predicted, tf.reshape(tf.cast(labels, tf.int64), [-1])), tf.float32)


def squared_error(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    return tf.square(tf.cast(predictions, tf.float32) - tf.cast(labels, tf.float32))


def absolute_error(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    return tf.abs(tf.cast(predictions, tf.float32) - tf.cast(labels, tf.float32))


class _Premade(tf.keras.Model):
    """Feature layers per group, hidden layers, one output; the `default_*` the zoo loader
    calls. Subclasses say which groups feed the deep part and which the linear part.

    A regressor whose label has statistics (data from SQL) learns the standardized label and
    maps its output back to the label's units, as `regressor.DNN` does: training is then well
    conditioned for a label of any scale (a salary of 8,000 as well as a price of 0.5)."""

    ELASTICDL_FEATURES = True
    """Feature columns come as resolved groups, not `tf.feature_column` objects."""

    def __init__(
        self,
        *,
        deep: ResolvedFeatures | None,
        linear: ResolvedFeatures | None,
        hidden_units: Sequence[int],
        outputs: int,
        classifier: bool,
        optimizer: Any,
        activation: str,
        dropout: float | None,
        batch_norm: bool,
        name: str,
    ) -> None:
        super().__init__(name=name)
        if isinstance(hidden_units, int):
            hidden_units = (hidden_units,)
        self.hidden_units = tuple(int(u) for u in hidden_units)
        if any(u < 1 for u in self.hidden_units):
            raise ValueError(f"{name}: hidden_units must be positive integers, got {hidden_units}")
        self.classifier = classifier
        self.outputs = int(outputs)
        self.optimizer_given = optimizer
        label = (deep or linear).label if (deep or linear) else None
        std = float((label.stats if label else {}).get("std") or 0.0)
        self.label_scale = None
        if not classifier and std > 0:
            self.label_scale = (float(label.stats.get("mean") or 0.0), std)
        layers = tf.keras.layers
        self._deep_features = FeatureLayer(deep, name="dnn_features") if deep else None
        self._linear_features = FeatureLayer(linear, name="linear_features") if linear else None
        self._hidden = [
            layers.Dense(units, activation=activation, name=f"hidden_{i}")
            for i, units in enumerate(self.hidden_units, start=1)
        ]
        self._norms = (
            [layers.BatchNormalization(name=f"norm_{i}") for i in range(len(self._hidden))]
            if batch_norm
            else []
        )
        self._dropout = layers.Dropout(float(dropout)) if dropout else None
        self._deep_out = layers.Dense(self.outputs, name="dnn_logits") if deep else None
        self._linear_out = layers.Dense(self.outputs, name="linear_logits") if linear else None

    def call(self, inputs: dict[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        logits = []
        if self._deep_features is not None:
            x = self._deep_features(inputs)
            for i, layer in enumerate(self._hidden):
                x = layer(x)
                if self._norms:
                    x = self._norms[i](x, training=training)
                if self._dropout is not None:
                    x = self._dropout(x, training=training)
            logits.append(self._deep_out(x))
        if self._linear_features is not None:
            logits.append(self._linear_out(self._linear_features(inputs)))
        total = logits[0] if len(logits) == 1 else tf.add_n(logits)
        if self.classifier:
            return tf.nn.softmax(total)
        if self.label_scale is not None:
            mean, std = self.label_scale
            return total * std + mean
        return total

    @property
    def loss_units(self) -> str:
        """The loss's units when not the label's (the job report's `loss_units`)."""
        if self.label_scale is None:
            return ""
        mean, std = self.label_scale
        return (
            f"standardized label units, (label - {mean:.6g}) / {std:.6g}: times "
            f"{std * std:.4g} for the label's units, those of the metrics"
        )

    def default_loss(self, labels: tf.Tensor, outputs: tf.Tensor) -> tf.Tensor:
        """Cross-entropy of the class ids (a classifier), squared error (a regressor)."""
        if self.classifier:
            ids = tf.reshape(tf.cast(labels, tf.int64), [-1])
            return tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(ids, outputs))
        labels = tf.reshape(tf.cast(labels, tf.float32), tf.shape(outputs))
        if self.label_scale is not None:
            mean, std = self.label_scale
            labels, outputs = (labels - mean) / std, (outputs - mean) / std
        return tf.reduce_mean(squared_error(labels, outputs))

    def default_optimizer(self, learning_rate: float | None = None) -> Any:
        """The optimizer given (a name or one built from `optimizer.*`), at `learning_rate`
        when given, else the canned estimators' default rate."""
        return _optimizer(self.optimizer_given, learning_rate)

    def default_metrics(self) -> dict[str, Any]:
        if self.classifier:
            return {"accuracy": class_ids_accuracy}
        return {"mse": squared_error, "mae": absolute_error}


class DNNClassifier(_Premade):
    def __init__(
        self,
        feature_columns: ResolvedFeatures | None = None,
        hidden_units: Sequence[int] = (100, 100),
        n_classes: int = 2,
        optimizer: Any = "Adagrad",
        activation_fn: str = "relu",
        dropout: float | None = None,
        batch_norm: bool = False,
    ) -> None:
        if int(n_classes) < 2:
            raise ValueError(f"DNNClassifier: n_classes must be at least 2, got {n_classes}")
        super().__init__(
            deep=_features(feature_columns, "DNNClassifier", "feature_columns"),
            linear=None,
            hidden_units=hidden_units,
            outputs=n_classes,
            classifier=True,
            optimizer=optimizer,
            activation=activation_fn,
            dropout=dropout,
            batch_norm=batch_norm,
            name="dnn_classifier",
        )


class DNNRegressor(_Premade):
    def __init__(
        self,
        feature_columns: ResolvedFeatures | None = None,
        hidden_units: Sequence[int] = (100, 100),
        label_dimension: int = 1,
        optimizer: Any = "Adagrad",
        activation_fn: str = "relu",
        dropout: float | None = None,
        batch_norm: bool = False,
    ) -> None:
        super().__init__(
            deep=_features(feature_columns, "DNNRegressor", "feature_columns"),
            linear=None,
            hidden_units=hidden_units,
            outputs=label_dimension,
            classifier=False,
            optimizer=optimizer,
            activation=activation_fn,
            dropout=dropout,
            batch_norm=batch_norm,
            name="dnn_regressor",
        )


class LinearClassifier(_Premade):
    def __init__(
        self,
        feature_columns: ResolvedFeatures | None = None,
        n_classes: int = 2,
        optimizer: Any = "Ftrl",
    ) -> None:
        if int(n_classes) < 2:
            raise ValueError(f"LinearClassifier: n_classes must be at least 2, got {n_classes}")
        super().__init__(
            deep=None,
            linear=_features(feature_columns, "LinearClassifier", "feature_columns"),
            hidden_units=(),
            outputs=n_classes,
            classifier=True,
            optimizer=optimizer,
            activation="linear",
            dropout=None,
            batch_norm=False,
            name="linear_classifier",
        )


class LinearRegressor(_Premade):
    def __init__(
        self,
        feature_columns: ResolvedFeatures | None = None,
        label_dimension: int = 1,
        optimizer: Any = "Ftrl",
    ) -> None:
        super().__init__(
            deep=None,
            linear=_features(feature_columns, "LinearRegressor", "feature_columns"),
            hidden_units=(),
            outputs=label_dimension,
            classifier=False,
            optimizer=optimizer,
            activation="linear",
            dropout=None,
            batch_norm=False,
            name="linear_regressor",
        )


def _one_optimizer(model: str, dnn: Any, linear: Any) -> Any:
    """The one optimizer of a wide-and-deep model (see the module docstring)."""
    if linear is not None and _name_of(linear) != _name_of(dnn):
        raise ValueError(
            f"{model}: the parameter servers apply one optimizer to the whole model; "
            f"linear_optimizer {_name_of(linear)} differs from dnn_optimizer {_name_of(dnn)}, "
            "which trains both parts: drop model.linear_optimizer or make them equal"
        )
    return dnn


class DNNLinearCombinedClassifier(_Premade):
    def __init__(
        self,
        linear_feature_columns: ResolvedFeatures | None = None,
        dnn_feature_columns: ResolvedFeatures | None = None,
        dnn_hidden_units: Sequence[int] = (100, 100),
        n_classes: int = 2,
        dnn_optimizer: Any = "Adagrad",
        linear_optimizer: Any = None,
        dnn_activation_fn: str = "relu",
        dnn_dropout: float | None = None,
        batch_norm: bool = False,
    ) -> None:
        if int(n_classes) < 2:
            raise ValueError(f"{type(self).__name__}: n_classes must be at least 2")
        model = "DNNLinearCombinedClassifier"
        super().__init__(
            deep=_features(dnn_feature_columns, model, "dnn_feature_columns"),
            linear=_features(linear_feature_columns, model, "linear_feature_columns"),
            hidden_units=dnn_hidden_units,
            outputs=n_classes,
            classifier=True,
            optimizer=_one_optimizer(model, dnn_optimizer, linear_optimizer),
            activation=dnn_activation_fn,
            dropout=dnn_dropout,
            batch_norm=batch_norm,
            name="dnn_linear_combined_classifier",
        )


class DNNLinearCombinedRegressor(_Premade):
    def __init__(
        self,
        linear_feature_columns: ResolvedFeatures | None = None,
        dnn_feature_columns: ResolvedFeatures | None = None,
        dnn_hidden_units: Sequence[int] = (100, 100),
        label_dimension: int = 1,
        dnn_optimizer: Any = "Adagrad",
        linear_optimizer: Any = None,
        dnn_activation_fn: str = "relu",
        dnn_dropout: float | None = None,
        batch_norm: bool = False,
    ) -> None:
        model = "DNNLinearCombinedRegressor"
        super().__init__(
            deep=_features(dnn_feature_columns, model, "dnn_feature_columns"),
            linear=_features(linear_feature_columns, model, "linear_feature_columns"),
            hidden_units=dnn_hidden_units,
            outputs=label_dimension,
            classifier=False,
            optimizer=_one_optimizer(model, dnn_optimizer, linear_optimizer),
            activation=dnn_activation_fn,
            dropout=dnn_dropout,
            batch_norm=batch_norm,
            name="dnn_linear_combined_regressor",
        )
