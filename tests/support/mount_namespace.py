"""Run a shell command in a private mount namespace, where a test may mount a small tmpfs."""

from __future__ import annotations

import shutil
import subprocess


def unshare_prefix() -> list[str] | None:
    """`unshare -rm` (a user and mount namespace) if this machine allows it, else None."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "-rm", "true"], capture_output=True)
    return [unshare, "-rm"] if probe.returncode == 0 else None
