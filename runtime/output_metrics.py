"""Evaluation metrics of a model with several outputs: `{output: {name: metric}}`.

ElasticDL's CTR and census models return a dict of outputs (`{"logits": ..., "probs": ...}`)
and their `eval_metrics_fn()` says which output each metric reads:

    {"logits": {"accuracy": fn}, "probs": {"auc": tf.keras.metrics.AUC()}}

`flatten` turns that into one flat dict of metrics plus, per metric, the output it reads, so
the rest of the runtime (accumulation, merging, reports) keeps a flat `name -> value`. A
metric keeps its own name (`accuracy`, `auc`); when two outputs have a metric of the same name,
both are named `output/name`. A flat dict passes through unchanged (every metric reads the
whole prediction). `select` picks a metric's output from a batch of predictions, with one clear
line when the model has no such output.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any


def is_nested(metrics: Mapping[str, Any]) -> bool:
    """Whether `eval_metrics_fn()`'s dict is keyed by output (its values are dicts)."""
    return bool(metrics) and all(isinstance(v, Mapping) for v in metrics.values())


def flatten(metrics: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """(name -> metric, name -> output) of `metrics`; the second is empty for a flat dict."""
    metrics = dict(metrics or {})
    if not is_nested(metrics):
        mixed = [k for k, v in metrics.items() if isinstance(v, Mapping)]
        if mixed:
            raise ValueError(
                f"eval_metrics_fn(): {mixed[0]!r} maps to a dict while other entries are "
                "metrics; give either {name: metric} or {output: {name: metric}} for every "
                "entry"
            )
        return metrics, {}
    counts = Counter(name for inner in metrics.values() for name in inner)
    flat: dict[str, Any] = {}
    outputs: dict[str, str] = {}
    for output, inner in metrics.items():
        for name, metric in inner.items():
            key = name if counts[name] == 1 else f"{output}/{name}"
            flat[key] = metric
            outputs[key] = str(output)
    return flat, outputs


def select(predictions: Any, output: str | None) -> Any:
    """The part of `predictions` a metric reads: all of it, or the named output."""
    if output is None:
        return predictions
    if not isinstance(predictions, Mapping):
        raise ValueError(
            f"eval_metrics_fn() gives metrics for the output {output!r}, but the model returns "
            "a single output; key the metrics by output only for a model returning a dict"
        )
    if output not in predictions:
        raise ValueError(
            f"eval_metrics_fn() gives metrics for the output {output!r}, but the model's "
            f"outputs are: {', '.join(sorted(map(str, predictions)))}"
        )
    return predictions[output]
