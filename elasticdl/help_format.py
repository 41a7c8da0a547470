"""How `elasticdl ... --help` reads: every default shown, the Argo flags behind `--help-all`.

A local user reads `elasticdl train --help` for the flags of a job on this machine; the Argo
Workflows and Kubernetes flags (more than half of them) only matter with `--engine argo`, so
`tuck_away` hides them from `--help` and `--help-all` shows everything. The flags still parse
either way: only their help lines move.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

HELP_ALL = "--help-all"


class DefaultsFormatter(argparse.HelpFormatter):
    """Appends `(default: X)` to a flag's help, unless the help names its default already or
    the default is "not given" (None, "", False); `(required)` to a required flag."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if text is argparse.SUPPRESS:
            return text
        if action.required and action.option_strings:
            return f"{text} (required)".strip()
        default = action.default
        given = not (default is None or default is False or default in ("", argparse.SUPPRESS))
        shown = given and not isinstance(
            action, argparse._HelpAction | argparse._VersionAction | _HelpAll
        )
        if shown and "default" not in text.lower():
            return f"{text} (default: {_text(default)})".strip()
        return text


def _text(value: Any) -> str:
    if value is True:
        return "true"
    return str(value).replace("%", "%%")


class _HelpAll(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        self.hidden: dict[argparse.Action, str | None] = kwargs.pop("hidden")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        for action, text in self.hidden.items():
            action.help = text
        parser.epilog = None
        parser.print_help()
        parser.exit()


def tuck_away(
    parser: argparse.ArgumentParser,
    hide: Callable[[argparse.Action, str], bool],
    what: str,
) -> None:
    """Hide from `--help` the flags for which `hide(action, group title)` is true; add
    `--help-all` (also `--help_all`) to show them, and an epilog that says so."""
    hidden: dict[argparse.Action, str | None] = {}
    for group in parser._action_groups:
        for action in group._group_actions:
            if action.option_strings and hide(action, group.title or ""):
                hidden[action] = action.help
                action.help = argparse.SUPPRESS
    parser.add_argument(
        HELP_ALL, "--help_all", action=_HelpAll, hidden=hidden, help=f"show every flag, {what}"
    )
    command = parser.prog
    parser.epilog = f"{len(hidden)} more flags ({what}): {command} {HELP_ALL}"


def use_defaults_formatter(parser: argparse.ArgumentParser) -> None:
    """`DefaultsFormatter` for `parser` and every subcommand under it."""
    parser.formatter_class = DefaultsFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                use_defaults_formatter(sub)
