"""A Keras 2 model file's optimizer, as the Keras 3 optimizer the parameter server applies.

The PS keeps its variables and optimizer state in Keras 3 objects (parameters.py) whatever
Keras the model file uses. In Keras 2 mode (runtime/keras_mode.py) the file's `optimizer()`
returns a tf_keras optimizer; its config names the same optimizer and hyper-parameters in
Keras 3 (SGD, Adam, Adagrad, RMSprop, Adamax, Nadam, Adadelta, Ftrl, AdamW, Lion), learning
rate schedules included, so it is rebuilt from the config. A TF1-style
`tf.compat.v1.train.*Optimizer` (the first design document's `GradientDescentOptimizer`)
becomes the Keras optimizer of the same rule.
"""

from __future__ import annotations

from typing import Any

_TF1 = {
    "GradientDescentOptimizer": ("SGD", {}),
    "MomentumOptimizer": ("SGD", {"_momentum": "momentum", "_use_nesterov": "nesterov"}),
    "AdamOptimizer": ("Adam", {"_beta1": "beta_1", "_beta2": "beta_2", "_epsilon": "epsilon"}),
    "AdagradOptimizer": ("Adagrad", {"_initial_accumulator_value": "initial_accumulator_value"}),
    "RMSPropOptimizer": ("RMSprop", {"_decay": "rho", "_momentum": "momentum"}),
}
_NOT_KERAS3 = ("is_legacy_optimizer", "jit_compile", "decay")


def as_keras3(optimizer: Any) -> Any:
    """`optimizer` if it is a Keras 3 optimizer, else the Keras 3 optimizer it describes;
    ValueError naming it when there is none."""
    import keras

    if isinstance(optimizer, keras.optimizers.Optimizer):
        return optimizer
    name = type(optimizer).__name__
    if name in _TF1:
        return _from_tf1(optimizer, *_TF1[name])
    config = getattr(optimizer, "get_config", lambda: None)()
    target = getattr(keras.optimizers, name, None)
    if config is None or target is None:
        raise ValueError(
            f"optimizer {type(optimizer).__module__}.{name} has no Keras 3 equivalent the "
            "parameter server can apply; return a tf.keras.optimizers optimizer (SGD, Adam, ...)"
        )
    config = {k: v for k, v in config.items() if k not in _NOT_KERAS3}
    rate = config.get("learning_rate")
    if isinstance(rate, dict):
        config["learning_rate"] = _schedule(rate)
    elif rate is not None:
        config["learning_rate"] = float(rate)
    return target.from_config(config)


def _schedule(serialized: dict[str, Any]) -> Any:
    import keras

    name = serialized.get("class_name", "")
    schedule = getattr(keras.optimizers.schedules, name, None)
    if schedule is None:
        raise ValueError(
            f"learning rate schedule {name!r} has no Keras 3 equivalent the parameter server "
            "can apply; use one of keras.optimizers.schedules"
        )
    return schedule.from_config(serialized.get("config", {}))


def _from_tf1(optimizer: Any, target: str, renames: dict[str, str]) -> Any:
    import keras

    kwargs = {"learning_rate": float(optimizer._learning_rate)}
    for attribute, argument in renames.items():
        if hasattr(optimizer, attribute):
            value = getattr(optimizer, attribute)
            kwargs[argument] = bool(value) if argument == "nesterov" else float(value)
    return getattr(keras.optimizers, target)(**kwargs)
