"""The event log's loss reports in bounded memory (runtime/master/loss_history.py): exact
per-epoch figures however many reports, merged points past the cap, a ring for live readers."""

from __future__ import annotations

import math

import pytest

from elasticdl.runtime.master import report as views
from elasticdl.runtime.master.divergence import divergence
from elasticdl.runtime.master.events import EventLog, LossReported, WorkerLaunched
from elasticdl.runtime.master.loss_history import LossHistory


def test_a_million_reports_keep_exact_epoch_means_in_bounded_memory() -> None:
    log = EventLog(LossHistory(max_points=1000, recent=100))
    total = {0: 0.0, 1: 0.0}
    for i in range(20_000):  # 20,000 points of 50 reports each
        epoch = 0 if i < 10_000 else 1
        loss = 1.0 + (i % 7) / 7
        log.add(LossReported(float(i), i, loss, epoch=epoch, count=50))
        total[epoch] += 50 * loss
    assert log.losses.reports == 1_000_000
    assert len(log.of(LossReported)) <= 1000
    assert sum(p.count for p in log.of(LossReported)) == 1_000_000  # every report stands
    history = views.history_section(log)["epochs"]
    assert [e["losses_reported"] for e in history] == [500_000, 500_000]
    assert history[0]["loss"] == pytest.approx(total[0] / 500_000)
    assert history[0]["model_versions"] == [0, 9_999]
    assert history[1]["model_versions"] == [10_000, 19_999]


def test_points_merge_within_an_epoch_only_and_keep_the_shape() -> None:
    history = LossHistory(max_points=4)
    for seq, (epoch, loss) in enumerate([(0, 4.0), (0, 2.0), (0, 3.0), (1, 1.0), (1, 3.0)]):
        history.add(seq, LossReported(0.0, seq, loss, epoch=epoch))
    points = [(p.epoch, p.loss, p.count, p.model_version) for p in history.points()]
    assert points == [(0, 3.0, 2, 1), (0, 3.0, 1, 2), (1, 2.0, 2, 4)]
    assert history.epochs[0].mean == 3.0 and history.epochs[1].count == 2


def test_nonfinite_and_unknown_epochs_count_in_no_epoch_mean() -> None:
    log = EventLog()
    log.add(LossReported(0.0, 1, math.inf, epoch=0))
    log.add(LossReported(0.0, 1, 2.0, epoch=-1))
    log.add(LossReported(0.0, 2, 1.0, epoch=0))
    assert log.epoch_loss(0).mean == 1.0 and log.epoch_loss(0).count == 1
    assert log.epoch_loss(1) is None
    assert len(log.of(LossReported)) == 3  # the points are all there


def test_since_merges_loss_points_with_the_other_events_in_order() -> None:
    log = EventLog(LossHistory(recent=3))
    log.add(LossReported(0.0, 1, 1.0))
    launched = log.add(WorkerLaunched(1.0, worker_id=5))
    log.add(LossReported(2.0, 2, 0.5))
    found, cursor = log.since(0, LossReported, WorkerLaunched)
    assert [type(e).__name__ for e in found] == ["LossReported", "WorkerLaunched", "LossReported"]
    assert found[1] is launched and cursor == 3 == len(log)
    assert log.since(cursor, LossReported) == ([], 3)
    for i in range(5):  # a reader a whole ring behind misses the oldest, counted
        log.add(LossReported(3.0 + i, 3 + i, 0.1))
    found, _ = log.since(cursor, LossReported)
    assert [e.model_version for e in found] == [5, 6, 7]
    assert log.losses.late_reads == 1


@pytest.mark.parametrize("merged", [False, True])
def test_divergence_weighs_merged_points_as_the_reports_they_stand_for(merged) -> None:
    """40 reports rising from 1 to 4.9: the last tenth's mean is over twice the first's,
    whether the points are kept one by one or merged in pairs."""
    losses = [1.0 + i / 10 for i in range(40)]
    if merged:
        pairs = [(losses[i] + losses[i + 1]) / 2 for i in range(0, 40, 2)]
        found = divergence(pairs, counts=[2] * 20)
    else:
        found = divergence(losses)
    assert found is not None
    assert found.first_loss == pytest.approx(1.15)  # the first 4 reports
    assert found.final_loss == pytest.approx(4.75)  # the last 4
