"""What the project changes in Keras itself, in one place: Keras 2's `lr=`.

Model files written for Keras 2 build optimizers with the deprecated spelling
`tf.keras.optimizers.Adagrad(lr=0.1)` (SQLFlow's model zoo does, everywhere). tf_keras 2.21
accepts it, logs a warning and *drops it*: the optimizer trains at its default rate (measured:
iris accuracy 0.31 against 0.97). Keras 2.3 honoured it, and so does a job here: `install()`
makes tf_keras's optimizers take `lr` as `learning_rate`. Keras 3 refuses `lr` with an error of
its own, which is no silent failure and is left as it is.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

log = logging.getLogger("elasticdl.keras")

_MARK = "_elasticdl_lr_alias"


def install() -> bool:
    """Make tf_keras optimizers honour `lr=` (idempotent); False when tf_keras is absent."""
    try:
        from tf_keras.src.optimizers import optimizer as base
    except ImportError:
        return False
    cls = base._BaseOptimizer
    if getattr(cls, _MARK, False):
        return True
    process_kwargs = cls._process_kwargs
    build_learning_rate = cls._build_learning_rate

    @functools.wraps(process_kwargs)
    def _process_kwargs(self: Any, kwargs: dict[str, Any]) -> None:
        lr = kwargs.pop("lr", None)
        if lr is not None:
            self.__dict__["_elasticdl_lr"] = lr
        process_kwargs(self, kwargs)

    @functools.wraps(build_learning_rate)
    def _build_learning_rate(self: Any, learning_rate: Any) -> Any:
        lr = self.__dict__.pop("_elasticdl_lr", None)
        if lr is not None:
            log.info("%s(lr=%s): taken as learning_rate", type(self).__name__, lr)
            learning_rate = lr
        return build_learning_rate(self, learning_rate)

    cls._process_kwargs = _process_kwargs
    cls._build_learning_rate = _build_learning_rate
    setattr(cls, _MARK, True)
    return True
