"""Training progress for people: a one-line bar on a terminal, periodic log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

log = logging.getLogger("elasticdl.progress")


class ProgressDisplay:
    """Shows records done, epoch, loss and live workers.

    On a terminal the line is redrawn at most `tty_interval_s` apart; elsewhere (CI, files) a
    log line is written every `log_interval_s`.
    """

    def __init__(
        self,
        total_records: int,
        num_epochs: int,
        stream: TextIO | None = None,
        tty_interval_s: float = 0.2,
        log_interval_s: float = 10.0,
    ) -> None:
        self.total = max(1, total_records)
        self.num_epochs = num_epochs
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = tty_interval_s if self.tty else log_interval_s
        self._last = 0.0
        self._drawn = False

    def update(
        self, records: int, epoch: int, loss: float, workers: int, force: bool = False
    ) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        fraction = min(1.0, records / self.total)
        text = (
            f"{records}/{self.total} records ({fraction:5.1%}) | epoch "
            f"{min(epoch + 1, self.num_epochs)}/{self.num_epochs} | loss {loss:.4g} | "
            f"workers {workers}"
        )
        if self.tty:
            width = 24
            filled = int(width * fraction)
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\r[{bar}] {text}\x1b[K")
            self.stream.flush()
            self._drawn = True
        else:
            log.info("progress: %s", text)

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
