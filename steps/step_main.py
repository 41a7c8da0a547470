"""What every pipeline step's `main` does: parse argv, log, run, and end in one line.

    def main(argv=None) -> int:
        return run_step("elasticdl.steps.x", "x", add_arguments, run_from_args, finish, argv)

`run_from_args(args)` does the work; `finish(args, result)` prints its outcome and returns the
exit status. An exception whose type is in `failures` ends the step with one line on stderr,
`<label>: <what>` (`label` may depend on the arguments), and that status: by default
ValueError and FileNotFoundError (bad input, status 2). `what(args, err)` words the line
(default `error: <err>`), e.g. to redact a password.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

BAD_INPUT = 2
BAD_INPUT_ERRORS: Mapping[type[BaseException], int] = {
    ValueError: BAD_INPUT,
    FileNotFoundError: BAD_INPUT,
}


def _error(args: argparse.Namespace, err: BaseException) -> str:
    return f"error: {err}"


def run_step(
    prog: str,
    label: str | Callable[[argparse.Namespace], str],
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run_from_args: Callable[[argparse.Namespace], Any],
    finish: Callable[[argparse.Namespace, Any], int],
    argv: Sequence[str] | None = None,
    failures: Mapping[type[BaseException], int] = BAD_INPUT_ERRORS,
    what: Callable[[argparse.Namespace, BaseException], str] = _error,
) -> int:
    parser = argparse.ArgumentParser(prog=prog)
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s: %(message)s")
    try:
        result = run_from_args(args)
    except tuple(failures) as err:
        status = next(code for kind, code in failures.items() if isinstance(err, kind))
        name = label(args) if callable(label) else label
        print(f"{name}: {what(args, err)}", file=sys.stderr)
        return status
    return finish(args, result)
