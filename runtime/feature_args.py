"""Feature columns handed to a model's constructor, as SQLFlow's model zoo expects them.

A SQLFlow model class takes `feature_columns` (a list of `tf.feature_column` objects it feeds
to Keras 2's `DenseFeatures`), and a functional model also `field_metas` (per input column its
name, dtype and shape). Models with several inputs take one argument per `COLUMN ... FOR name`
clause (`linear_feature_columns`, `dnn_feature_columns`). The job resolves the COLUMN clause
once against the data (runtime/column_spec.py); `constructor_arguments` turns the resolved form
into what the constructor's signature asks for:

* a class marked `ELASTICDL_FEATURES = True` (the built-in premade models, Keras 3) receives
  each group as a `ResolvedFeatures` of its own, not `tf.feature_column` objects;
* when no COLUMN clause named a group the constructor asks for (`linear_feature_columns` with
  the COLUMN clause absent), it receives every feature column.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from elasticdl.runtime.column_spec import (
    DEFAULT_TARGET,
    ResolvedFeatures,
    field_metas,
    tf_feature_columns,
)

FIELD_METAS = "field_metas"


def job_features(spec: Any, text: str, metadata: Any) -> str:
    """The job's resolved feature columns as JSON (`JobConfig.features`), from the COLUMN
    text (`--feature_columns`) and the training data's metadata; "" when the model's
    constructor takes no feature columns and none were given. ValueError (one line) for a
    column the data lacks or cannot feed."""
    from elasticdl.runtime.column_spec import data_columns, parse_groups, resolve
    from elasticdl.runtime.sql.lexer import StatementError

    if not text and not spec.feature_arguments:
        return ""
    try:
        groups = parse_groups(text)
    except StatementError as err:
        raise ValueError(f"--feature_columns: {err.message}") from None
    if groups and not spec.feature_arguments:
        raise ValueError(
            f"--feature_columns: {spec.model_def} takes no feature columns (its constructor "
            "has no feature_columns, *_feature_columns or field_metas argument)"
        )
    return resolve(groups, data_columns(metadata), metadata.label).to_json()


def is_feature_argument(name: str) -> bool:
    return name == DEFAULT_TARGET or name.endswith("_feature_columns") or name == FIELD_METAS


def feature_arguments(accepted: Iterable[str] | None) -> list[str]:
    """The constructor arguments (named explicitly) that receive feature columns."""
    return [name for name in accepted or () if is_feature_argument(name)]


def constructor_arguments(
    symbol: Any, accepted: Iterable[str] | None, features: ResolvedFeatures
) -> dict[str, Any]:
    """The feature-column arguments for `symbol`'s constructor (module docstring)."""
    native = bool(getattr(symbol, "ELASTICDL_FEATURES", False))
    found: dict[str, Any] = {}
    for name in sorted(feature_arguments(accepted)):
        if name == FIELD_METAS:
            found[name] = field_metas(features)
            continue
        group = features.group(name)
        if group is None:
            if features.arguments != [DEFAULT_TARGET]:
                continue  # the constructor's default for a group no clause named
            group = features.groups[0]
        subset = features.subset(group)
        found[name] = subset if native else tf_feature_columns(group, subset)
    return found
