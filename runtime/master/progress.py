"""Training progress for people: a one-line bar on a terminal, periodic log lines otherwise.

What a line says: records trained of those planned, the epoch, records/s over the last
`RATE_WINDOW_S` seconds, the time left at that rate, the mean loss of the epoch so far (the
mean of the workers' minibatch losses since the epoch began: one minibatch's loss swings too
much to read) and the live workers. A field with nothing to say yet (no loss reported, no rate
measured) is left out rather than shown as nan.

On a terminal the bar is redrawn in place at most every `tty_interval_s`; a log record
written meanwhile first clears the bar's line (a filter on the root logger's handlers), so the
two never share a line, and `close()` leaves the last bar on a line of its own. Elsewhere (CI,
files) a log line is written when the records trained cross another `log_every_percent` of the
plan, or `log_interval_s` after the last line; never twice for the same count, never for 0.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TextIO

log = logging.getLogger("elasticdl.progress")

RATE_WINDOW_S = 10.0
BAR_WIDTH = 24


def duration(seconds: float) -> str:
    """`1:05` (m:ss) or `2:03:04` (h:mm:ss)."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_text(
    records: int,
    total: int,
    epoch: int,
    num_epochs: int,
    rate: float | None,
    loss: float | None,
    workers: int,
) -> str:
    """The words of one progress line (pure: what the display and its tests share)."""
    fraction = min(1.0, records / max(1, total))
    parts = [
        f"{records}/{total} records ({fraction:.1%})",
        f"epoch {min(epoch + 1, num_epochs)}/{num_epochs}",
    ]
    if rate is not None:
        parts.append(f"{rate:,.0f} records/s")
        if rate > 0 and records < total:
            parts.append(f"ETA {duration((total - records) / rate)}")
    if loss is not None:
        parts.append(f"loss {loss:.4g} (epoch mean)")
    parts.append(f"{workers} worker{'' if workers == 1 else 's'}")
    return " | ".join(parts)


def bar(records: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = int(width * min(1.0, records / max(1, total)))
    return "[" + "#" * filled + "." * (width - filled) + "]"


class _ClearBar(logging.Filter):
    """On a handler writing to the bar's terminal: clear the bar before a record is written."""

    def __init__(self, display: ProgressDisplay) -> None:
        super().__init__()
        self._display = display

    def filter(self, record: logging.LogRecord) -> bool:
        self._display.clear()
        return True


class ProgressDisplay:
    """Shows records done, epoch, records/s, ETA, the epoch's mean loss and live workers."""

    def __init__(
        self,
        total_records: int,
        num_epochs: int,
        stream: TextIO | None = None,
        tty_interval_s: float = 0.2,
        log_interval_s: float = 30.0,
        log_every_percent: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = max(1, total_records)
        self.num_epochs = num_epochs
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._tty_interval = tty_interval_s
        self._log_interval = log_interval_s
        self._step = max(1, int(self.total * log_every_percent / 100))
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()
        self._loss_epoch = -1
        self._loss_sum = 0.0
        self._loss_count = 0
        self._last_draw = float("-inf")
        self._last_log = float("-inf")
        self._logged_records = 0
        self._text = ""
        self._drawn = False
        self._filters: list[tuple[logging.Handler, _ClearBar]] = []
        if self.tty:
            self._clear_on_log()

    # -- inputs ------------------------------------------------------------------------------

    def add_losses(self, losses: Iterable[float], epoch: int) -> None:
        """Minibatch losses reported since the last call, counted in `epoch`'s mean (a new
        epoch starts a new mean)."""
        if epoch != self._loss_epoch:
            self._loss_epoch, self._loss_sum, self._loss_count = epoch, 0.0, 0
        for loss in losses:
            if loss == loss:  # NaN: no loss in that report
                self._loss_sum += loss
                self._loss_count += 1

    def epoch_losses(self, epoch: int, total: float, count: int) -> None:
        """The finite losses of `epoch` so far, as their sum and count (what the event log
        keeps: every report counted, however many), in place of those `add_losses` saw."""
        self._loss_epoch, self._loss_sum, self._loss_count = epoch, total, count

    def epoch_loss(self) -> float | None:
        return self._loss_sum / self._loss_count if self._loss_count else None

    def rate(self) -> float | None:
        """Records/s over the last RATE_WINDOW_S (None until two samples a moment apart)."""
        if len(self._samples) < 2:
            return None
        (t0, r0), (t1, r1) = self._samples[0], self._samples[-1]
        return (r1 - r0) / (t1 - t0) if t1 - t0 >= 0.5 else None

    def update(
        self,
        records: int,
        epoch: int,
        loss: float | None = None,
        workers: int = 0,
        force: bool = False,
    ) -> None:
        """Show the progress (`loss`: a minibatch's loss when no `add_losses` came, else
        ignored); `force`: now, whatever the intervals (the end of the job)."""
        now = self._clock()
        self._sample(now, records)
        if loss is not None and loss == loss and self._loss_count == 0:
            self.add_losses([loss], epoch)
        text = progress_text(
            records, self.total, epoch, self.num_epochs, self.rate(), self.epoch_loss(), workers
        )
        if self.tty:
            if force or now - self._last_draw >= self._tty_interval:
                self._last_draw = now
                self._draw(f"{bar(records, self.total)} {text}")
            return
        if records <= 0 or records == self._logged_records:
            return  # nothing new: no line (never "0/N" twice, never the same count twice)
        crossed = records // self._step > self._logged_records // self._step
        done = records >= self.total
        if force or done or crossed or now - self._last_log >= self._log_interval:
            self._last_log = now
            self._logged_records = records
            log.info("progress: %s", text)

    # -- the terminal ------------------------------------------------------------------------

    def clear(self) -> None:
        """Wipe the bar's line (before someone else writes a line)."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def close(self) -> None:
        """Leave the last bar on its own line and stop clearing before log records."""
        for handler, clear in self._filters:
            handler.removeFilter(clear)
        self._filters = []
        if self.tty and self._text:
            self.stream.write(f"\r{self._text}\x1b[K\n")
            self.stream.flush()
            self._text, self._drawn = "", False

    def _draw(self, text: str) -> None:
        self._text = text
        self.stream.write(f"\r{text}\x1b[K")
        self.stream.flush()
        self._drawn = True

    def _clear_on_log(self) -> None:
        for handler in logging.getLogger().handlers:
            if getattr(handler, "stream", None) is self.stream:
                clear = _ClearBar(self)
                handler.addFilter(clear)
                self._filters.append((handler, clear))

    def _sample(self, now: float, records: int) -> None:
        if self._samples and (records < self._samples[-1][1] or records == 0):
            # Before the first record (workers starting) and when a count went back (a
            # resumed job), the rate's clock starts again.
            self._samples.clear()
        self._samples.append((now, records))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()
