"""The live views as pure functions of the event log: the history, the TensorBoard points,
the status report and its text, and the training-curves picture."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from elasticdl.runtime.master import report as views
from elasticdl.runtime.master.curves import COLORS, series, write_png
from elasticdl.runtime.master.events import (
    EvaluationDone,
    EventLog,
    InstanceLost,
    LossReported,
    WorkerLaunched,
)
from elasticdl.runtime.master.live_status import format_status, status_report
from elasticdl.runtime.master.tensorboard import TensorBoardFeed, learning_rate_at

T0 = 100.0


@dataclass
class Snap:
    records_planned: int = 400
    records_trained: int = 0
    records_redone: int = 0
    epoch: int = 0
    loss: float = float("nan")
    model_version: int = 0
    finished: bool = False
    failure: str | None = None


class Sink:
    def __init__(self) -> None:
        self.points: list[tuple[str, float, int]] = []
        self.closed = False

    def scalars(self, points):
        self.points += points

    def close(self):
        self.closed = True


def _log() -> EventLog:
    log = EventLog()
    log.add(LossReported(T0 + 1, 1, 1.0, epoch=0))
    log.add(LossReported(T0 + 2, 2, 3.0, epoch=0))
    log.add(LossReported(T0 + 3, 3, 0.5, epoch=1))
    log.add(LossReported(T0 + 3, 3, 0.7, epoch=-1))  # epoch not known: in no epoch
    log.add(EvaluationDone(T0 + 4, 3, {"mse": 0.25}, 0.1))
    return log


def test_history_is_the_mean_loss_per_epoch_and_each_evaluation() -> None:
    history = views.history_section(_log())
    assert history["epochs"] == [
        {"epoch": 0, "loss": 2.0, "losses_reported": 2, "model_versions": [1, 2]},
        {"epoch": 1, "loss": 0.5, "losses_reported": 1, "model_versions": [3, 3]},
    ]
    assert history["evaluation"] == [{"model_version": 3, "metrics": {"mse": 0.25}}]


def test_tensorboard_feed_writes_each_point_once_and_epoch_means_once_past_them() -> None:
    log, sink, now = _log(), Sink(), [0.0]
    feed = TensorBoardFeed(log, sink, learning_rate=None, rate_every_s=1.0, clock=lambda: now[0])
    feed.update(Snap(records_trained=100, epoch=1, model_version=3))
    tags = [(t, v, s) for t, v, s in sink.points]
    assert ("loss", 1.0, 1) in tags and ("eval/mse", 0.25, 3) in tags
    assert ("train/epoch_loss", 2.0, 1) in tags  # epoch 0 is over, epoch 1 is not
    assert not [p for p in tags if p[0] == "train/epoch_loss" and p[2] == 2]
    sink.points.clear()
    now[0] = 2.0
    feed.update(Snap(records_trained=300, epoch=1, model_version=5, finished=True), force=True)
    assert ("train/epoch_loss", 0.5, 2) in sink.points
    assert ("train/records_per_second", 100.0, 5) in sink.points
    assert not [p for p in sink.points if p[0] == "loss"]  # nothing new in the log
    feed.close()
    assert sink.closed


def test_learning_rate_of_a_constant_and_of_a_schedule() -> None:
    import keras

    assert learning_rate_at(keras.optimizers.SGD(0.05), 10) == pytest.approx(0.05)
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    assert learning_rate_at(keras.optimizers.SGD(schedule), 10) == pytest.approx(0.05)
    assert learning_rate_at(object(), 1) is None


def test_status_report_names_each_workers_state_and_the_recent_failures() -> None:
    log = _log()
    for worker_id in (0, 1, 2, 3):
        log.add(WorkerLaunched(T0, worker_id=worker_id))
    log.add(
        InstanceLost(
            T0 + 5,
            role="worker",
            id=3,
            exit_kind="killed",
            cause="killed by SIGKILL",
            detected_at=T0 + 5,
            failure=True,
        )
    )
    snap = Snap(records_trained=200, epoch=1, loss=0.5, model_version=3)
    status = status_report("j1", log, snap, T0, T0 + 10, 2, alive=[0, 1], holding={0})
    assert status["workers"] == [
        {"worker_id": 0, "state": "training"},
        {"worker_id": 1, "state": "idle"},
        {"worker_id": 2, "state": "starting"},
        {"worker_id": 3, "state": "killed"},
    ]
    p = status["progress"]
    assert (p["percent"], p["epoch"], p["records_per_second"]) == (50.0, 2, 20.0)
    assert p["epoch_mean_loss"] == 0.5
    assert status["metrics"] == {"mse": 0.25}
    text = format_status(status)
    assert "200/400 records (50.0%), epoch 2/2" in text
    assert "workers: 1 idle, 1 killed, 1 starting, 1 training" in text
    assert "worker 3 killed at 5.0s: killed by SIGKILL" in text
    assert "metrics (model version 3): mse=0.25" in text


def test_curves_picture_is_a_png_with_a_panel_per_curve(tmp_path: Path) -> None:
    history = views.history_section(_log())
    assert [title for title, _, _ in series(history)] == ["loss (mean per epoch)", "eval mse"]
    assert write_png({"epochs": [], "evaluation": []}, tmp_path / "none.png") is None
    path = write_png(history, tmp_path / "curves.png")
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(path) as image:
        image.load()
        assert image.size == (720, 480)
        # The loss curve is drawn inside the first panel, the metric's inside the second.
        assert COLORS[0] in set(image.crop((80, 40, 700, 200)).getdata())
        assert COLORS[1] in set(image.crop((80, 280, 700, 440)).getdata())
