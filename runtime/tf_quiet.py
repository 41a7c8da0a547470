"""Keep TensorFlow's C++ start-up lines off stderr, on every CPU.

TensorFlow 2.21 logs through absl before absl's logging is initialised, so
`TF_CPP_MIN_LOG_LEVEL` does not silence what it prints while `tensorflow` is being imported. On
CPUs with AVX-512, where oneDNN is on by default, that is absl's "WARNING: All log messages
before absl::InitializeLog() is called are written to STDERR" and `I0000 ... port.cc:153]
oneDNN custom operations are on ...`, twice. They would bury the one-line errors of every
command and fill the logs of every worker.

`install()` (called when the `elasticdl` package is imported, so in every process of a job)
puts an import hook in front of `tensorflow`: while the package executes, file descriptor 2
goes to a temporary file; afterwards the C++ log lines below the level `TF_CPP_MIN_LOG_LEVEL`
asks for are dropped, and every other line is written back to stderr in order. Only the import
is captured; once TensorFlow has initialised absl, `TF_CPP_MIN_LOG_LEVEL` works as documented.
No dependencies: every layer may import this.

The level is 3 unless the user set one, in this process's environment, so every child started
from it inherits it before its own TensorFlow import (pods get it from their manifest and the
image). 2 would not do: with the `tensorflow` wheel on a machine without a GPU, TensorFlow logs
`E0000 ... cuda_platform.cc:52] failed call to cuInit: ...` at ERROR level when it first looks
for devices, after the import, in every process, before any error the command prints; GPU images
log duplicate-plugin registrations at ERROR level too. TensorFlow's errors that matter reach
Python as exceptions; `TF_CPP_MIN_LOG_LEVEL=2` (or lower) shows its C++ error log again.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import tempfile
from types import ModuleType

DEFAULT_LEVEL = "3"
"""TF_CPP_MIN_LOG_LEVEL unless the user set one: 0 all, 1 no INFO, 2 no WARNING, 3 no ERROR."""

_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called"
_CPP_LINE = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w.\-]+:\d+\] ")
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
_CPU_GUARD_TAIL = "rebuild TensorFlow with the appropriate compiler flags."
"""The second line of cpu_feature_guard's INFO message, printed without a prefix."""


def min_level() -> int:
    """The TF_CPP_MIN_LOG_LEVEL in force (a malformed value counts as the default)."""
    value = os.environ.get("TF_CPP_MIN_LOG_LEVEL", DEFAULT_LEVEL).strip()
    return int(value) if value in ("0", "1", "2", "3") else int(DEFAULT_LEVEL)


def filter_lines(text: str, level: int) -> str:
    """`text` without the TensorFlow C++ log lines that `level` hides; other lines unchanged."""
    if level <= 0:
        return text
    kept = []
    for line in text.splitlines(keepends=True):
        match = _CPP_LINE.match(line)
        if match and _SEVERITY[match.group(1)] < level:
            continue
        if line.startswith(_ABSL_PREAMBLE) or line.rstrip().endswith(_CPU_GUARD_TAIL):
            continue
        kept.append(line)
    return "".join(kept)


class _QuietLoader(importlib.abc.Loader):
    """Runs the real loader of `tensorflow` with file descriptor 2 captured."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            capture = tempfile.TemporaryFile()
        except OSError:  # no room for a temporary file: import without filtering
            self._loader.exec_module(module)
            return
        with capture:
            sys.stderr.flush()
            saved = os.dup(2)
            os.dup2(capture.fileno(), 2)
            try:
                self._loader.exec_module(module)
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                capture.seek(0)
                text = filter_lines(capture.read().decode(errors="replace"), min_level())
                if text:
                    sys.stderr.write(text)
                    sys.stderr.flush()


class _TensorFlowHook(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` through the other finders and wraps its loader, once."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "tensorflow":
            return None
        uninstall()
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _QuietLoader(spec.loader)
        return spec


_HOOK = _TensorFlowHook()


def install() -> None:
    """Quiet the import of TensorFlow in this process (no-op if it is imported already)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", DEFAULT_LEVEL)
    if "tensorflow" in sys.modules or _HOOK in sys.meta_path:
        return
    sys.meta_path.insert(0, _HOOK)


def uninstall() -> None:
    """Remove the hook (it removes itself when TensorFlow is imported)."""
    if _HOOK in sys.meta_path:
        sys.meta_path.remove(_HOOK)
