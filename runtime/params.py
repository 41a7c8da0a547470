"""`--params` parsing and binding: strings in, keyword arguments out, never `eval`.

`parse_params("hidden_units=[10, 100, 20, 5], learning_rate=0.01")` gives
`{"hidden_units": [10, 100, 20, 5], "learning_rate": 0.01}`. Items are separated by `,` or `;`
outside brackets and quotes. Each value is a Python literal read by `ast.literal_eval`; a bare
word such as `relu` or `tf.nn.relu` is taken as the string it spells. Anything else (a call,
an operator, an attribute of an expression) is rejected with the offending item named.

`bind_params` picks, for one callable, the params its signature names, so each piece of a model
spec (constructor, optimizer, dataset_fn, ...) gets only what it asks for; `check_all_accepted`
then reports params that no piece accepts.

An optimizer's arguments may be named `optimizer.<arg>` (or `<x>_optimizer.<arg>`), as SQLFlow's
WITH clause has them (`optimizer.learning_rate=0.1`): `split_groups` sets them apart, and the
model-zoo loader gives them to the optimizer they belong to (runtime/optimizer_params.py).
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GROUP_NAME = re.compile(r"^((?:[A-Za-z_][A-Za-z0-9_]*_)?optimizer)\.([A-Za-z_][A-Za-z0-9_]*)$")
_BARE_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/:]*$")
_OPEN = {"[": "]", "(": ")", "{": "}"}
# Equivalent spellings: a callable naming one receives the value given under the other.
ALIASES = {"learning_rate": "lr", "lr": "learning_rate"}


class ParamsError(ValueError):
    """A `--params` string or its use is wrong; the message says what and how to fix it."""


def _split_items(text: str) -> list[str]:
    items: list[str] = []
    depth: list[str] = []
    quote = ""
    start = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth.append(_OPEN[ch])
        elif ch in ")]}":
            if not depth or depth.pop() != ch:
                raise ParamsError(
                    f"--params: unbalanced {ch!r} at position {i} in {text!r}; "
                    "check the brackets of list and dict values"
                )
        elif ch in ",;" and not depth:
            items.append(text[start:i])
            start = i + 1
        i += 1
    if quote:
        raise ParamsError(f"--params: unterminated string in {text!r}; close the {quote} quote")
    if depth:
        raise ParamsError(
            f"--params: unclosed {depth[-1]!r} missing in {text!r}; check list and dict brackets"
        )
    items.append(text[start:])
    return items


def _parse_value(name: str, raw: str) -> Any:
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if _BARE_WORD.match(raw):
        return raw
    raise ParamsError(
        f"--params: value of {name!r} is not a Python literal: {raw!r}. Use numbers, quoted "
        "strings, lists, tuples, dicts, True/False/None, or a bare word for a string; "
        "expressions and calls are not evaluated"
    )


def parse_params(text: str | None) -> dict[str, Any]:
    """Parse a `--params` string into a dict; raise ParamsError naming the bad item."""
    if text is None or not text.strip():
        return {}
    params: dict[str, Any] = {}
    for item in _split_items(text):
        item = item.strip()
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep:
            raise ParamsError(f"--params: item {item!r} is not of the form name=value")
        if not _NAME.match(name) and not _GROUP_NAME.match(name):
            raise ParamsError(
                f"--params: {name!r} is not a valid parameter name (letters, digits and _, "
                "or optimizer.<name> for an optimizer's argument)"
            )
        if not raw:
            raise ParamsError(f"--params: {name!r} has no value; write {name}=VALUE")
        if name in params:
            raise ParamsError(f"--params: {name!r} is given twice")
        params[name] = _parse_value(name, raw)
    return params


def split_groups(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(plain params, {optimizer param: {argument: value}}) from parsed params:
    `optimizer.learning_rate=0.1` -> ({}, {"optimizer": {"learning_rate": 0.1}})."""
    plain: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    for name, value in params.items():
        match = _GROUP_NAME.match(name)
        if match:
            groups.setdefault(match.group(1), {})[match.group(2)] = value
        else:
            plain[name] = value
    return plain, groups


def format_params(params: Mapping[str, Any]) -> str:
    """The inverse of parse_params for literal values (used to record params in artifacts)."""
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def accepted_names(fn: Callable[..., Any], reserved: Iterable[str] = ()) -> set[str] | None:
    """Keyword names `fn` accepts, minus `reserved` (filled by the runtime); None = any."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return set()
    names: set[str] = set()
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            names.add(parameter.name)
    return names - set(reserved) - {"self"}


def bind_params(
    fn: Callable[..., Any], params: Mapping[str, Any], reserved: Iterable[str] = ()
) -> dict[str, Any]:
    """The subset of `params` that `fn` names (all of them if it takes **kwargs)."""
    names = accepted_names(fn, reserved)
    if names is None:
        return {k: v for k, v in params.items() if k not in set(reserved)}
    bound = {k: v for k, v in params.items() if k in names}
    for given, alias in ALIASES.items():
        if given in params and alias in names and alias not in bound:
            bound[alias] = params[given]
    return bound


def check_all_accepted(params: Mapping[str, Any], acceptors: Mapping[str, set[str] | None]) -> None:
    """Raise ParamsError for params that none of the named callables accepts.

    `acceptors` maps a callable's display name to its `accepted_names` (None = takes any).
    """
    if not params or any(names is None for names in acceptors.values()):
        return
    accepted: set[str] = set().union(*acceptors.values()) if acceptors else set()
    for given, alias in ALIASES.items():
        if alias in accepted:
            accepted.add(given)
    unknown = sorted(set(params) - accepted)
    if unknown:
        listing = "; ".join(
            f"{where}: {', '.join(sorted(names)) or '(none)'}"
            for where, names in acceptors.items()
            if names is not None
        )
        raise ParamsError(
            f"--params: no part of the model accepts {', '.join(map(repr, unknown))}. "
            f"Accepted names — {listing}"
        )
