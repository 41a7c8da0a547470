"""TensorBoard event files written while a job runs, at `--tensorboard_dir` (any fsspec URL).

A local directory gets the event files directly, flushed after each batch of scalars, so
`tensorboard --logdir DIR` shows the job as it trains. Elsewhere (gs://, memory://, ...) an
object cannot be appended to: the files are written to a local mirror and uploaded whole,
at most every `upload_interval_s` and at the end, so what a reader sees is at most that old.

Scalars (step: the model version): `loss` (each reported minibatch loss), `train/epoch_loss`
(the mean reported loss of each finished epoch), `train/records_per_second`,
`train/learning_rate` (when the model's optimizer can tell it), `eval/<metric>`.

Writing TensorBoard never fails a job: the first error is logged once and the sink turns off.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import fsspec

log = logging.getLogger("elasticdl.master")

UPLOAD_INTERVAL_S = 5.0


def is_local(url: str) -> bool:
    fs, _ = fsspec.core.url_to_fs(url)
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    return protocol in ("file", "local")


class TensorBoardSink:
    """Scalars to TensorBoard event files at `url`, visible while the job runs."""

    def __init__(self, url: str, upload_interval_s: float = UPLOAD_INTERVAL_S) -> None:
        import tensorflow as tf

        self.url = url
        self._local = is_local(url)
        self._fs: Any = None
        self._remote = ""
        if self._local:
            fs, path = fsspec.core.url_to_fs(url)
            self.directory = Path(path)
            self.directory.mkdir(parents=True, exist_ok=True)
        else:
            self._fs, self._remote = fsspec.core.url_to_fs(url)
            self.directory = Path(tempfile.mkdtemp(prefix="elasticdl-tensorboard-"))
        self._interval = upload_interval_s
        self._uploaded = 0.0
        self._writer: Any = tf.summary.create_file_writer(str(self.directory))
        self._writer.flush()  # the event file exists from the start

    @property
    def working(self) -> bool:
        return self._writer is not None

    def scalars(self, points: list[tuple[str, float, int]]) -> None:
        """Write (tag, value, step) points and flush them (upload them, when due)."""
        if self._writer is None or not points:
            return
        import tensorflow as tf

        try:
            with self._writer.as_default():
                for tag, value, step in points:
                    tf.summary.scalar(tag, value, step=step)
            self._writer.flush()
            if not self._local and time.monotonic() - self._uploaded >= self._interval:
                self._upload()
        except Exception as err:  # noqa: BLE001 - a full disk, a lost bucket: never fatal
            self._give_up(err)

    def close(self) -> None:
        """Flush, upload the last points, and stop (again: nothing)."""
        if self._writer is None:
            self._cleanup()
            return
        try:
            self._writer.close()
            self._writer = None
            if not self._local:
                self._upload()
        except Exception as err:  # noqa: BLE001
            self._give_up(err)
        self._cleanup()

    def _upload(self) -> None:
        for file in sorted(p for p in self.directory.rglob("*") if p.is_file()):
            remote = f"{self._remote.rstrip('/')}/{file.relative_to(self.directory).as_posix()}"
            self._fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
            self._fs.put_file(str(file), remote)
        self._uploaded = time.monotonic()

    def _give_up(self, err: Exception) -> None:
        log.warning("TensorBoard: stopped writing to %s: %s", self.url, err)
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                writer.close()
        except Exception:  # noqa: BLE001
            pass

    def _cleanup(self) -> None:
        if not self._local:
            shutil.rmtree(self.directory, ignore_errors=True)


def learning_rate_at(optimizer: Any, step: int) -> float | None:
    """The optimizer's learning rate after `step` updates (a schedule evaluated there); None
    when it cannot tell."""
    try:
        import keras
        import numpy as np

        base = getattr(optimizer, "_learning_rate", None)
        if base is None:
            return None
        if isinstance(base, keras.optimizers.schedules.LearningRateSchedule):
            return float(np.asarray(base(step)))
        if isinstance(base, keras.Variable):
            return float(np.asarray(base.numpy()))
        return float(np.asarray(base() if callable(base) else base))
    except Exception:  # noqa: BLE001 - an exotic optimizer: no curve, no failure
        return None


class TensorBoardFeed:
    """Turns the event log and the task state into TensorBoard points, as the job runs.

    Each `update` writes what is new since the last one: the losses and evaluations in the
    log, the mean loss of each epoch once the job moved past it (or finished), and, at most
    every `rate_every_s`, records/s since the last rate point and the learning rate."""

    def __init__(
        self,
        log: Any,
        sink: TensorBoardSink,
        learning_rate: Any = None,
        rate_every_s: float = 1.0,
        clock: Any = time.monotonic,
    ) -> None:
        self.sink = sink
        self._log = log
        self._learning_rate = learning_rate
        self._rate_every_s = rate_every_s
        self._clock = clock
        self._seen = 0
        self._epoch_losses: dict[int, list[float]] = {}
        self._epochs_written: set[int] = set()
        self._last_rate: tuple[float, int] | None = None

    def update(self, snapshot: Any, force: bool = False) -> None:
        self.sink.scalars(self.points(snapshot, force))

    def points(self, snapshot: Any, force: bool = False) -> list[tuple[str, float, int]]:
        from elasticdl.runtime.master.events import EvaluationDone, LossReported

        found: list[tuple[str, float, int]] = []
        new, self._seen = self._log.since(self._seen, LossReported, EvaluationDone)
        for e in new:
            if isinstance(e, LossReported):
                found.append(("loss", e.loss, e.model_version))
                if e.epoch >= 0:
                    self._epoch_losses.setdefault(e.epoch, []).append(e.loss)
            else:
                found += [(f"eval/{k}", v, e.model_version) for k, v in e.metrics.items()]
        for epoch in sorted(self._epoch_losses):
            done = epoch < snapshot.epoch or snapshot.finished
            if done and epoch not in self._epochs_written:
                losses = self._epoch_losses[epoch]
                found.append(("train/epoch_loss", sum(losses) / len(losses), epoch + 1))
                self._epochs_written.add(epoch)
        found += self._rate_points(snapshot, force)
        return found

    def _rate_points(self, snapshot: Any, force: bool) -> list[tuple[str, float, int]]:
        now = self._clock()
        if self._last_rate is None:
            self._last_rate = (now, snapshot.records_trained)
            return []
        at, records = self._last_rate
        if now - at < self._rate_every_s and not force or now <= at:
            return []
        self._last_rate = (now, snapshot.records_trained)
        step = snapshot.model_version
        rate = (snapshot.records_trained - records) / (now - at)
        found = [("train/records_per_second", rate, step)]
        if self._learning_rate is not None:
            lr = learning_rate_at(self._learning_rate, step)
            if lr is not None:
                found.append(("train/learning_rate", lr, step))
        return found

    def close(self) -> None:
        self.sink.close()


def open_feed(job_name: str, url: str, events: Any, spec: Any) -> TensorBoardFeed | None:
    """The live TensorBoard feed of a job at `url`; None (one warning) if it cannot be
    written: TensorBoard never fails a job. `spec`: the model spec (the learning-rate curve
    reads its optimizer)."""
    try:
        sink = TensorBoardSink(url)
    except Exception as err:  # noqa: BLE001 - a bad URL, no permission, a full disk
        log.warning("job %s: no TensorBoard logs at %s: %s", job_name, url, err)
        return None
    try:
        optimizer = spec.instantiate().optimizer
    except Exception:  # noqa: BLE001 - no learning-rate curve, nothing else lost
        optimizer = None
    log.info("job %s: TensorBoard logs in %s", job_name, url)
    return TensorBoardFeed(events, sink, optimizer)


def set_aside_default(output: str, log_dir: Path) -> Path | None:
    """A job that did not succeed publishes nothing in a local --output: the TensorBoard logs
    written there by default move to the job's log folder (beside its report), and --output
    goes if they alone made it. Returns where they went (None: nothing to move)."""
    if not is_local(output):
        return None
    _, path = fsspec.core.url_to_fs(os.path.expanduser(output))
    folder = Path(path).absolute()
    logs = folder / "tensorboard"
    if not logs.is_dir():
        return None
    target = log_dir / "tensorboard"
    shutil.rmtree(target, ignore_errors=True)
    try:
        shutil.move(str(logs), str(target))
    except OSError as err:
        log.warning("could not move the TensorBoard logs %s to %s: %s", logs, target, err)
        shutil.rmtree(logs, ignore_errors=True)
        target = None
    try:
        folder.rmdir()
    except OSError:
        pass
    return target
