"""A one-input model fed a one-key dict: the key's value, as the Keras of ElasticDL's time did.

ElasticDL's deepfm files build `tf.keras.Input(shape=(10,))` (an unnamed input) and their
`feed` returns `{"feature": ids}`. TensorFlow 2.1's Keras fed the dict's only value to the only
input whatever the key; today's Keras (3, and tf_keras 2.21) refuses: `Missing data for input
"input_1". You passed a data dictionary with keys ['feature']`. `adapt(dataset_fn, model)`
keeps that old rule for exactly that case -- a model with one positional input whose name the
dict's single key does not name -- by unwrapping the dict at the end of the dataset function
(decided from the dataset's element spec, so it costs one `map` only where it applies). Models
whose input names match their features, several inputs, or dict inputs are left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def input_name(model: Any) -> str | None:
    """The name of `model`'s only input, when it has exactly one positional input."""
    inputs = getattr(model, "inputs", None)
    if not isinstance(inputs, list | tuple) or len(inputs) != 1:
        return None
    if isinstance(getattr(model, "_nested_inputs", None), Mapping):
        return None
    names = getattr(model, "input_names", None)
    if names:
        return str(names[0])
    history = getattr(inputs[0], "_keras_history", None)
    owner = getattr(history, "operation", None) or getattr(history, "layer", None)
    return getattr(owner, "name", None)


def _needs_unwrap(features_spec: Any, name: str) -> bool:
    return (
        isinstance(features_spec, Mapping) and len(features_spec) == 1 and name not in features_spec
    )


def adapt(dataset_fn: Callable[..., Any], model: Any) -> Callable[..., Any]:
    """`dataset_fn` whose one-key dict features become the value, for a one-input model."""
    name = input_name(model)
    if name is None:
        return dataset_fn

    def unwrapped(dataset: Any, mode: Any, metadata: Any = None) -> Any:
        out = dataset_fn(dataset, mode, metadata)
        spec = getattr(out, "element_spec", None)
        if isinstance(spec, tuple) and spec and _needs_unwrap(spec[0], name):
            return out.map(lambda features, *rest: (next(iter(features.values())), *rest))
        if _needs_unwrap(spec, name):
            return out.map(lambda features: next(iter(features.values())))
        return out

    return unwrapped
