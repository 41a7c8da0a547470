"""Which optimizer a model trains with, when params name one: `optimizer=RMSprop`,
`optimizer.learning_rate=0.1`, `dnn_optimizer=RMSprop`, `dnn_optimizer.learning_rate=0.01`.

SQLFlow's WITH clause sets optimizers this way (`model.optimizer=RMSprop`, `optimizer.*`), and
`--params` takes the same keys. Decided once when the spec loads (`plan`), in this order, so
an argument never silently falls back to a default:

1. the constructor takes `P` (`optimizer` or `X_optimizer`): with `P.*` arguments it receives
   the Keras optimizer they describe (the class its `P` names, or its default when that is a
   Keras class name); without, the value as given, as always;
2. `optimizer=NAME` for a model whose constructor does not take `optimizer`: the job trains with
   Keras's NAME, built with the `optimizer.*` arguments (SQLFlow's `model.optimizer`);
3. otherwise each `optimizer.ARG` goes to what makes the job's optimizer (the module's
   `optimizer(...)`, a `default_optimizer(...)`) when it takes ARG (`lr` and `learning_rate` are
   one), else to the constructor when it takes ARG (`regressor.DNN(learning_rate=...)`);
4. anything left is an error naming who takes what.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elasticdl.runtime.params import ALIASES, ParamsError


@dataclass(frozen=True)
class OptimizerPlan:
    """Where the optimizer params go (module docstring)."""

    to_constructor: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    keras_class: str | None = None
    keras_args: dict[str, Any] = field(default_factory=dict)
    piece_args: dict[str, Any] = field(default_factory=dict)
    constructor_args: dict[str, Any] = field(default_factory=dict)
    consumed: frozenset[str] = frozenset()
    """Plain params the plan uses up (`optimizer` naming a Keras class)."""


def _takes(names: set[str] | None, arg: str) -> str | None:
    """The name `arg` is taken under (itself or its alias), or None."""
    if names is None:
        return arg
    if arg in names:
        return arg
    alias = ALIASES.get(arg)
    return alias if alias in names else None


def plan(
    constructor: set[str] | None,
    constructor_defaults: Mapping[str, Any],
    piece: set[str] | None,
    plain: Mapping[str, Any],
    groups: Mapping[str, Mapping[str, Any]],
) -> OptimizerPlan:
    """Decide where `groups` (and an `optimizer` naming a Keras class) go; ParamsError when
    something goes nowhere. `constructor` / `piece`: the names the model's constructor and the
    optimizer's maker accept (None: any)."""
    from elasticdl.runtime.sql.attributes import KERAS_OPTIMIZERS, optimizer_name

    explicit = constructor or set()
    to_constructor: dict[str, tuple[str, dict[str, Any]]] = {}
    for param, args in groups.items():
        if param not in explicit:
            continue
        given = plain.get(param, constructor_defaults.get(param))
        name = optimizer_name(given)
        if name is None:
            raise ParamsError(
                f"--params {param}.*: {param} is {given!r}, not a Keras optimizer; name one "
                f"({', '.join(KERAS_OPTIMIZERS)})"
            )
        to_constructor[param] = (name, dict(args))
    keras_class, keras_args = None, {}
    piece_args: dict[str, Any] = {}
    constructor_args: dict[str, Any] = {}
    consumed: set[str] = set()
    if "optimizer" not in explicit:
        given = plain.get("optimizer")
        if given is not None:
            keras_class = optimizer_name(given)
            if keras_class is None:
                raise ParamsError(
                    f"--params optimizer={given!r}: the model takes no argument 'optimizer' and "
                    f"{given!r} is not a Keras optimizer ({', '.join(KERAS_OPTIMIZERS)})"
                )
            keras_args = dict(groups.get("optimizer", {}))
            consumed.add("optimizer")
        else:
            for arg, value in groups.get("optimizer", {}).items():
                if (name := _takes(piece, arg)) is not None:
                    piece_args[name] = value
                elif (name := _takes(constructor, arg)) is not None:
                    constructor_args[name] = value
                else:
                    raise ParamsError(
                        f"--params optimizer.{arg}: neither the model's optimizer "
                        f"({_listing(piece)}) nor its constructor ({_listing(constructor)}) "
                        f"takes {arg!r}"
                    )
    for param in groups:
        if param != "optimizer" and param not in explicit:
            raise ParamsError(
                f"--params {param}.*: the model's constructor takes no argument {param!r} "
                f"({_listing(constructor)})"
            )
    return OptimizerPlan(
        to_constructor, keras_class, keras_args, piece_args, constructor_args, frozenset(consumed)
    )


def _listing(names: set[str] | None) -> str:
    if names is None:
        return "any argument"
    return "takes " + (", ".join(sorted(names)) or "no argument")


def keras_optimizer(name: str, args: Mapping[str, Any]) -> Any:
    """Keras's optimizer class `name` built with `args`; ValueError naming a bad argument."""
    from elasticdl.runtime.keras_mode import keras

    cls = getattr(keras().optimizers, name)
    try:
        return cls(**args)
    except (TypeError, ValueError) as err:
        raise ValueError(f"optimizer {name}({_args_text(args)}): {err}") from None


def _args_text(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())
