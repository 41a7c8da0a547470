"""The report as a view of the event log: one loss is one event, every section derives from it."""

from __future__ import annotations

import jsonschema

from elasticdl.runtime.master import report as views
from elasticdl.runtime.master.events import (
    ChaosFired,
    ChaosSkipped,
    EventLog,
    InstanceLost,
    LossReported,
    PSRecovered,
    TaskEvent,
    WorkerLaunched,
    WorkerRelaunched,
)

T0 = 100.0


def _log() -> EventLog:
    log = EventLog()
    log.add(WorkerLaunched(T0, worker_id=0))
    log.add(WorkerLaunched(T0, worker_id=1))
    log.add(ChaosFired(T0 + 4.0, "worker1:kill@tasks=2", to=("worker1",)))
    log.add(TaskEvent(T0 + 4.1, "task_requeued", 0.002, 1, 7, "worker 1 killed"))
    log.add(WorkerRelaunched(T0 + 4.2, worker_id=2, replaces=1, seconds=0.2))
    log.add(
        InstanceLost(
            T0 + 4.0,
            role="worker",
            id=1,
            exit_kind="killed",
            signal=9,
            cause="killed by SIGKILL (chaos worker1:kill@tasks=2)",
            detail="worker1 killed by SIGKILL",
            action="relaunch_budget",
            detected_at=T0 + 4.0,
            requeue_s=0.1,
            tasks_requeued=1,
            records_requeued=64,
            relaunched_as=2,
            failure=True,
        )
    )
    log.add(
        InstanceLost(
            T0 + 6.0,
            role="ps",
            id=0,
            exit_kind="hung",
            signal=9,
            cause="hung",
            action="relaunch_budget",
            detected_at=T0 + 5.0,
            failure=True,
        )
    )
    rows = {"emb/b": 7, "emb/a": 5}
    log.add(PSRecovered(T0 + 9.0, 0, 4.0, 0.01, 10, model_version_before=13, restored_rows=rows))
    log.add(LossReported(0.0, 3, 0.5))
    return log


def test_one_worker_death_feeds_every_section() -> None:
    log = _log()
    workers = views.workers_section(log, T0, 2, 1, 2)
    assert (workers["launched"], workers["failed"], workers["relaunched"]) == (3, 1, 1)
    assert workers["preempted"] == 0
    (one,) = [w for w in workers["instances"] if w["worker_id"] == 1]
    assert one["exit"]["reason"] == "killed" and one["exit"]["at_s"] == 4.0
    (two,) = [w for w in workers["instances"] if w["worker_id"] == 2]
    assert two["replaces"] == 1 and two["exit"] is None
    worker, ps = views.failures_section(log, T0)
    assert (worker["id"], worker["relaunched_as"], worker["requeue_s"]) == (1, 2, 0.1)
    assert (ps["kind"], ps["at_s"], ps["requeue_s"], ps["relaunch_s"]) == ("hung", 5.0, None, 4.0)
    assert (ps["restored_version"], ps["rolled_back_versions"]) == (10, 3)
    assert ps["rolled_back"] == [11, 13]  # the updates of versions 11..13 are gone
    assert ps["restored_rows"] == 12
    assert list(ps["restored_table_rows"].items()) == [("emb/a", 5), ("emb/b", 7)]
    assert views.recoveries_section(log) == [
        {"cause": "worker 1 killed", "seconds": 0.1, "tasks_requeued": 1},
        {"cause": "ps0 hung", "seconds": 4.0, "tasks_requeued": 0},
    ]
    kinds = [e["kind"] for e in views.events_section(log, T0)]
    assert kinds == ["chaos", "worker_exit", "worker_relaunched", "ps_exit", "ps_relaunched"]
    assert views.chaos_section(log, T0) == ["worker1:kill@tasks=2 at 4.0s"]


def test_a_skipped_chaos_action_says_so_in_the_chaos_section() -> None:
    log = _log()
    log.add(ChaosSkipped(T0 + 9.0, "ps0:kill@tasks=9", "the job ended before it came due"))
    assert views.chaos_section(log, T0) == [
        "worker1:kill@tasks=2 at 4.0s",
        "ps0:kill@tasks=9 skipped at 9.0s: the job ended before it came due",
    ]


def test_a_report_built_from_the_log_follows_the_schema() -> None:
    log = _log()
    counts = {
        "tasks_finished": 8,
        "by_worker": {"0": 5, "2": 3},
        "records": {"planned": 1024, "trained": 1088, "redone": 64},
    }
    report = {
        "job_name": "j",
        "kind": "evaluate",
        "status": "succeeded",
        "error": "",
        "trained_model": "m",
        "data": "d",
        "seconds": 2.0,
        "model_version": 3,
        "metrics": {"mse": 0.5},
        "records": {"input": 1024},
        **views.shared_sections(log, T0, counts, (2, 1, 2), 1024, 2.0),
    }
    jsonschema.validate(report, views.schema(), cls=jsonschema.Draft202012Validator)
    assert report["tasks"]["requeued"] == 1
    assert report["throughput"] == {"records_per_second": 512.0, "seconds": 2.0}
    assert "1 failed" in views.summary_line(report)


def test_since_hands_out_each_event_once() -> None:
    log = _log()
    new, end = log.since(0, LossReported)
    assert [e.loss for e in new] == [0.5]
    assert log.since(end, LossReported) == ([], end)


def _big_log(workers: int, lost: int) -> EventLog:
    """`workers` launched, `lost` of them preempted (each replaced, its task requeued)."""
    log = EventLog()
    for w in range(workers):
        log.add(WorkerLaunched(T0, worker_id=w))
    for i in range(lost):
        at, new = T0 + 10.0 + i / 100, workers + i
        log.add(TaskEvent(at, "task_requeued", 0.001, i, 1000 + i, f"worker {i} preempted"))
        log.add(WorkerRelaunched(at, worker_id=new, replaces=i, seconds=0.1, from_budget=False))
        log.add(
            InstanceLost(
                at,
                role="worker",
                id=i,
                exit_kind="preempted",
                cause="preempted",
                detail=f"pod job-worker-{i} was killed by SIGKILL: preempted",
                action="relaunch_free",
                detected_at=at,
                requeue_s=0.01,
                tasks_requeued=1,
                records_requeued=100,
                relaunched_as=new,
                failure=False,
            )
        )
        log.add(LossReported(at, i, 1.0, epoch=0))
    return log


def test_a_big_jobs_report_is_capped_with_what_was_left_out_and_exact_counts() -> None:
    """5,000 workers, 1,000 of them lost: every count exact, each list of details capped
    (its first and last entries kept), `left_out` saying how many of which, the schema kept."""
    log = _big_log(5000, 1000)
    counts = {
        "tasks_finished": 20_000,
        "by_worker": {str(w): 4 for w in range(6000)},
        "records": {"planned": 10, "trained": 10, "redone": 0, "skipped_nonfinite_loss": 0},
        "epochs": [{"epoch": 0, "planned": 10, "trained": 10, "redone": 0, "covered": 0}],
        "model_version": 1000,
        "last_loss": 1.0,
    }
    report = views.training_report(
        log,
        counts,
        job_name="big",
        status="succeeded",
        error="",
        model_def="m.M",
        output="/out",
        workers=(5000, 1, 5000),
        num_ps=2,
        t0=T0,
        seconds=60.0,
        preparing_s=1.0,
    )
    workers = report["workers"]
    assert (workers["launched"], workers["preempted"]) == (6000, 1000)
    assert report["tasks"]["requeued"] == 1000
    assert len(workers["instances"]) == views.INSTANCES_CAP
    assert [w["worker_id"] for w in workers["instances"][:2]] == [0, 1]
    last = workers["instances"][-1]
    assert (last["worker_id"], last["replaces"]) == (5999, 999)
    assert len(report["events"]) == len(workers["exits"]) == views.DETAIL_CAP
    assert report["left_out"] == {
        "workers.instances": 6000 - views.INSTANCES_CAP,
        "workers.exits": 1000 - views.DETAIL_CAP,
        "tasks.events": 1000 - views.DETAIL_CAP,
        "recoveries": 1000 - views.DETAIL_CAP,
        "events": 2000 - views.DETAIL_CAP,
    }
    assert report["history"]["epochs"][0]["losses_reported"] == 1000
    jsonschema.validate(report, views.schema(), cls=jsonschema.Draft202012Validator)
    import json

    assert len(json.dumps(report)) < 1_000_000
    small = views.shared_sections(_big_log(50, 5), T0, counts, (50, 1, 50), 10, 60.0)
    assert small["left_out"] == {} and len(small["workers"]["instances"]) == 55
