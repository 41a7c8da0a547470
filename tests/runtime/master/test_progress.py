"""The progress display, driven by a fake clock and captured output (no job, no timing)."""

from __future__ import annotations

import io
import logging

import pytest

from elasticdl.runtime.master.progress import ProgressDisplay, duration, progress_text


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_text_says_rate_eta_epoch_mean_loss_and_workers():
    text = progress_text(2500, 10000, 0, 2, 500.0, 0.123456, 3)
    assert text == (
        "2500/10000 records (25.0%) | epoch 1/2 | 500 records/s | ETA 0:15 | "
        "loss 0.1235 (epoch mean) | 3 workers"
    )
    # Nothing to say yet: no rate, no loss (never "nan"); done: no ETA.
    assert progress_text(0, 10, 0, 1, None, None, 1) == "0/10 records (0.0%) | epoch 1/1 | 1 worker"
    assert "ETA" not in progress_text(10, 10, 0, 1, 5.0, 1.0, 0)
    assert duration(65) == "1:05" and duration(3 * 3600 + 4) == "3:00:04"


def test_the_loss_is_the_mean_of_the_epoch_and_restarts_with_the_next():
    display = ProgressDisplay(100, 2, stream=io.StringIO(), clock=Clock())
    assert display.epoch_loss() is None
    display.add_losses([0.08, 0.75, float("nan"), 0.19], epoch=0)
    assert display.epoch_loss() == pytest.approx(0.34)
    display.add_losses([0.3], epoch=0)
    assert display.epoch_loss() == pytest.approx(0.33)
    display.add_losses([0.1, 0.2], epoch=1)
    assert display.epoch_loss() == pytest.approx(0.15)


def test_off_a_terminal_a_line_every_ten_percent_or_interval_never_twice(caplog):
    clock = Clock()
    display = ProgressDisplay(40000, 1, stream=io.StringIO(), log_interval_s=30.0, clock=clock)
    caplog.set_level(logging.INFO, logger="elasticdl.progress")
    display.update(0, 0, workers=2)
    display.update(0, 0, workers=2, force=True)
    assert caplog.records == []  # nothing trained: no "0/40000" line, let alone two
    for records in range(0, 40001, 500):  # one update a second
        clock.now += 1.0
        display.add_losses([1.0], epoch=0)
        display.update(records, 0, workers=2)
    display.update(40000, 0, workers=0, force=True)  # the end: already logged at 100%
    lines = [r.getMessage() for r in caplog.records]
    counts = [int(line.split()[1].split("/")[0]) for line in lines]
    assert counts == sorted(set(counts)), lines  # no duplicates, in order
    assert counts[0] == 500 and counts[-1] == 40000
    assert len(lines) == 11, lines  # the first report, then each 10% (80 s: no 30 s line)
    assert "records/s" in lines[-2] and "ETA" in lines[-2] and "loss 1 (epoch mean)" in lines[-2]


def test_off_a_terminal_a_slow_job_logs_every_interval(caplog):
    clock = Clock()
    display = ProgressDisplay(1000, 1, stream=io.StringIO(), log_interval_s=30.0, clock=clock)
    caplog.set_level(logging.INFO, logger="elasticdl.progress")
    for records in range(1, 41):  # 1% in 40 s
        clock.now += 1.0
        display.update(records // 4, 0, workers=1)
    assert len(caplog.records) == 2  # the first report, 30 s later the next


def test_on_a_terminal_the_bar_is_redrawn_and_log_lines_get_their_own_line():
    clock = Clock()
    terminal = Terminal()
    handler = logging.StreamHandler(terminal)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        display = ProgressDisplay(1000, 1, stream=terminal, clock=clock)
        display.update(100, 0, workers=2)
        clock.now += 1.0
        display.add_losses([0.5], epoch=0)
        display.update(600, 0, workers=2)
        logging.getLogger("elasticdl.master").warning("a worker left")
        clock.now += 0.05
        display.update(650, 0, workers=1)  # within the redraw interval: not drawn
        display.update(1000, 0, workers=0, force=True)
        display.close()
        logging.getLogger("elasticdl.master").warning("the summary")
    finally:
        root.removeHandler(handler)
    out = terminal.getvalue()
    # The warning starts after the bar's line was wiped; the summary after the final bar's
    # newline: no log line ever continues a bar.
    assert "\r\x1b[Ka worker left\n" in out
    assert "650/1000" not in out
    final = "[########################] 1000/1000 records (100.0%) | epoch 1/1 |"
    assert final in out
    assert out.endswith("workers\x1b[K\nthe summary\n"), repr(out[-200:])
    drawn = (
        "\r[##############..........] 600/1000 records (60.0%) | epoch 1/1 | 500 records/s | "
        "ETA 0:01 | loss 0.5 (epoch mean) | 2 workers\x1b[K"
    )
    assert drawn in out
    assert not handler.filters  # close() took its filter away
