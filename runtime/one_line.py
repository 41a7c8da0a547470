"""One line for an error that ends a job after it started, whatever raised it.

A full TMPDIR at export used to print 89 lines of TensorFlow `ResourceExhaustedError`; the user
needs the cause and the file. `describe` keeps: an OSError's cause and file name; a TensorFlow
op error's message without its `{{function_node ...}}` prefix and ` [Op:...]` suffix; an error
TensorFlow raised from traced user code (its message starts "in user code:", a `dataset_fn` or
a model's `call` that fails while traced) its last line, the error inside, with the file, line
and function of the user's frame; else the first line of the error, after its type.
`save_traceback` keeps the whole story in the job's log directory for whoever debugs it.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

_FUNCTION_NODE = re.compile(r"\{\{function_node [^}]*\}\}\s*")
_OP_SUFFIX = re.compile(r"\s*\[Op:[^\]]*\]\s*$")
_USER_CODE = "in user code:"
_USER_FRAME = re.compile(r'File "(?:[^"]*/)?([^"/]+)", line (\d+), in (\S+)')
MAX_CHARS = 500
TRACEBACK_FILE = "master.traceback.txt"


def describe(err: BaseException) -> str:
    """The error in one line (at most MAX_CHARS characters)."""
    if isinstance(err, OSError) and err.strerror:
        name = f": {err.filename}" if err.filename else ""
        return f"{err.strerror}{name}"[:MAX_CHARS]
    text = getattr(err, "message", None) if _is_op_error(err) else None
    if isinstance(text, str):
        text = _OP_SUFFIX.sub("", _FUNCTION_NODE.sub("", text))
    else:
        text = str(err)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0] == _USER_CODE:
        return _traced(lines)[:MAX_CHARS]
    first = lines[0] if lines else ""
    return f"{type(err).__name__}: {first}"[:MAX_CHARS] if first else type(err).__name__


def _traced(lines: list[str]) -> str:
    """The error inside TensorFlow's "in user code:" report (its last line names its type),
    then where in the user's code it was raised."""
    frames = [m for line in lines if (m := _USER_FRAME.search(line))]
    where = f" ({frames[-1][1]} line {frames[-1][2]}, in {frames[-1][3]})" if frames else ""
    return lines[-1] + where


def _is_op_error(err: BaseException) -> bool:
    return any(c.__name__ == "OpError" for c in type(err).__mro__)


def save_traceback(err: BaseException, directory: Path) -> Path | None:
    """Write `err`'s traceback into `directory` (None when that fails too)."""
    path = directory / TRACEBACK_FILE
    try:
        path.write_text("".join(traceback.format_exception(err)))
    except OSError:
        return None
    return path
