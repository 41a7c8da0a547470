"""The pure part of elastic size: which targets a job takes, and the steps to reach one."""

from __future__ import annotations

import threading

import pytest

from elasticdl.runtime.master.options import TrainOptions
from elasticdl.runtime.master.scaling import (
    MAX_WORKERS,
    ScaleError,
    ScaleInbox,
    ScalePlan,
    check_target,
    plan_scale,
)


@pytest.mark.parametrize(
    ("workers", "min_workers", "error"),
    [
        (1, 1, None),
        (3, 2, None),
        (MAX_WORKERS, 1, None),
        (1, 2, "below the job's --min_workers=2 (ask for 2 to 1000)"),
        (0, 1, "below the job's --min_workers=1 (ask for 1 to 1000)"),
        (-4, 1, "below the job's --min_workers=1"),
        (MAX_WORKERS + 1, 1, "above the limit for one job (ask for 1 to 1000)"),
    ],
)
def test_check_target(workers, min_workers, error):
    if error is None:
        check_target(workers, min_workers)
    else:
        with pytest.raises(ScaleError, match=error.replace("(", r"\(").replace(")", r"\)")):
            check_target(workers, min_workers)


@pytest.mark.parametrize(
    ("workers", "max_workers", "reason", "error"),
    [
        (16, 16, "the 16 tasks in an epoch", None),
        (17, 16, "the 16 tasks in an epoch", "above the 16 tasks in an epoch (ask for 1 to 16)"),
        (1000, 71, "the worker processes", "above the worker processes (ask for 1 to 71)"),
        (0, 16, "the 16 tasks in an epoch", "below the job's --min_workers=1 (ask for 1 to 16)"),
    ],
)
def test_check_target_with_the_bound_the_master_computed(workers, max_workers, reason, error):
    if error is None:
        check_target(workers, 1, max_workers, reason)
        return
    with pytest.raises(ScaleError) as raised:
        check_target(workers, 1, max_workers, reason)
    assert str(raised.value) == error


@pytest.mark.parametrize(
    ("target", "active", "plan"),
    [
        (2, [0, 1], ScalePlan()),
        (3, [0, 1], ScalePlan(launch=1)),
        (5, [], ScalePlan(launch=5)),
        (1, [0, 1, 2], ScalePlan(retire=(2, 1))),
        # Ids need not be contiguous (relaunches take new ids); the newest leave first.
        (2, [7, 0, 4, 9], ScalePlan(retire=(9, 7))),
        (0, [3], ScalePlan(retire=(3,))),
    ],
)
def test_plan_scale(target, active, plan):
    assert plan_scale(target, active) == plan


def test_the_inbox_hands_requests_over_and_answers_them():
    inbox = ScaleInbox()
    first = inbox.submit(3, "grpc a")
    second = inbox.submit(1, "configmap b")
    assert not first.wait(0)
    taken = inbox.take()
    assert [(r.workers, r.source) for r in taken] == [(3, "grpc a"), (1, "configmap b")]
    assert inbox.take() == []

    answered = threading.Event()

    def answer_later() -> None:
        first.answer("scaled from 2 to 3 worker(s)")
        second.answer(error="cannot scale to 1 worker(s): below")
        answered.set()

    threading.Thread(target=answer_later).start()
    assert first.wait(5) and second.wait(5) and answered.wait(5)
    assert (first.message, first.error) == ("scaled from 2 to 3 worker(s)", "")
    assert second.error == "cannot scale to 1 worker(s): below"


def test_a_closed_inbox_refuses_at_once_and_answers_what_was_left():
    inbox = ScaleInbox()
    left = inbox.submit(4, "grpc")
    inbox.close("training is over: the job is finishing")
    assert left.wait(0) and left.error == "training is over: the job is finishing"
    late = inbox.submit(2, "grpc")
    assert late.wait(0) and late.error == "training is over: the job is finishing"
    assert inbox.take() == []


@pytest.mark.parametrize(("num_workers", "min_workers"), [(2, 0), (2, 3), (1, -1)])
def test_min_workers_must_be_between_one_and_num_workers(num_workers, min_workers):
    options = TrainOptions("m.f", "data", "out", num_workers=num_workers, min_workers=min_workers)
    with pytest.raises(ValueError, match="--min_workers must be between 1 and --num_workers="):
        options.validate()


class _Context:
    def __init__(self, peer: str) -> None:
        self._peer = peer

    def peer(self) -> str:
        return self._peer


def test_grpc_resize_requests_are_taken_from_this_machine_only():
    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.runtime.master.servicer import MasterServicer

    inbox = ScaleInbox()
    servicer = MasterServicer(tasks=None, scale_inbox=inbox)  # type: ignore[arg-type]
    request = pb.ScaleWorkersRequest(num_workers=3)
    refused = servicer.scale_workers(request, _Context("ipv4:10.0.0.5:41234"))
    assert not refused.accepted and "from this machine only (not ipv4:10.0.0.5:41234)" in (
        refused.message
    )
    assert inbox.take() == []

    def answer() -> None:
        while True:
            for taken in inbox.take():
                taken.answer("scaled from 2 to 3 worker(s)")
                return

    threading.Thread(target=answer, daemon=True).start()
    accepted = servicer.scale_workers(request, _Context("ipv4:127.0.0.1:41234"))
    assert accepted.accepted and accepted.message == "scaled from 2 to 3 worker(s)"
    no_inbox = MasterServicer(tasks=None).scale_workers(request, _Context("ipv4:127.0.0.1:1"))  # type: ignore[arg-type]
    assert not no_inbox.accepted and "only training jobs can" in no_inbox.message
