"""The pace of the Kubernetes manager's API calls (runtime/k8s/throttle.py), as pure logic."""

from __future__ import annotations

import pytest

from elasticdl.runtime.k8s.pod_states import CreationBackoff
from elasticdl.runtime.k8s.throttle import API_BURST, API_QPS, Pushback, TokenBucket, retry_after


def test_the_bucket_starts_full_then_gives_qps_tokens_a_second() -> None:
    bucket = TokenBucket(qps=5, burst=10)
    waits = [bucket.reserve(100.0) for _ in range(12)]
    assert waits[:10] == [0.0] * 10
    assert waits[10:] == pytest.approx([0.2, 0.4])  # the 11th and 12th wait their turn
    assert bucket.reserve(100.0 + 2.0) == 0.0  # 2 s later: 10 tokens came, 3 were owed


def test_a_bucket_saves_at_most_its_burst() -> None:
    bucket = TokenBucket(qps=1, burst=2)
    bucket.reserve(0.0)
    assert [bucket.reserve(1000.0) for _ in range(3)] == pytest.approx([0.0, 0.0, 1.0])


def test_the_defaults_are_kube_controller_managers() -> None:
    assert (API_QPS, API_BURST) == (20.0, 30)
    bucket = TokenBucket()
    waits = [bucket.reserve(0.0) for _ in range(1000)]
    assert waits[-1] == pytest.approx((1000 - 30) / 20)  # 1,000 pods: ~48.5 s


@pytest.mark.parametrize(
    ("status", "header", "held"),
    [
        (429, 1.5, 1.5),  # Retry-After is honoured
        (503, None, 1.0),  # no header: the backoff's first step
        (500, 0.0, 0.0),
        (0, None, 1.0),  # no answer at all
        (403, None, 0.0),  # a quota or RBAC refusal is the pod's own, not the server's
        (409, None, 0.0),
        (422, None, 0.0),
    ],
)
def test_what_holds_every_creation_back(status: int, header: float | None, held: float) -> None:
    pushback = Pushback(CreationBackoff(initial_s=1.0, jitter=0, give_up_after_s=None))
    assert pushback.refused(10.0, status, header) == held
    assert pushback.wait(10.0) == held
    assert pushback.wait(10.0 + held) == 0.0


def test_pushback_grows_while_refusals_go_on_and_resets_once_accepted() -> None:
    pushback = Pushback(CreationBackoff(initial_s=1.0, factor=2, max_s=30, jitter=0))
    assert [pushback.refused(0.0, 503) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert pushback.wait(0.0) == 30  # the longest hold stands
    pushback.accepted()
    assert pushback.refused(100.0, 503) == 1.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [({"Retry-After": "2"}, 2.0), ({"retry-after": "0.5"}, 0.5), ({}, None), (None, None)],
)
def test_retry_after_is_read_from_the_answers_headers(headers, seconds) -> None:
    assert retry_after(headers) == seconds
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None
