"""The sparse worker's lookahead (runtime/worker/lookahead.py), as pure logic: which minibatch
is prepared when, what `take` hands back, and that nothing is lost or reordered."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from elasticdl.runtime.worker.lookahead import Lookahead


class InlineExecutor:
    """Runs each submitted function at once, recording the order of events."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args))
        except Exception as error:  # noqa: BLE001 - handed to the future, as an executor does
            future.set_exception(error)
        return future


def batches_of(n: int) -> list[tuple[dict[str, int], int]]:
    return [({"x": i}, i) for i in range(n)]


def preparer(events: list[str], fail: set[int] | None = None) -> Any:
    def prepare(features: dict[str, int]) -> Any:
        events.append(f"ids {features['x']}")

        def pull() -> str:
            if fail and features["x"] in fail:
                raise ConnectionError("PS down")
            events.append(f"pull {features['x']}")
            return f"rows {features['x']}"

        return pull

    return prepare


def train(lookahead: Lookahead, batches: list[Any], events: list[str], ahead: Any) -> list[Any]:
    taken = []
    for features, label in lookahead.batches(iter(batches), ahead=ahead):
        events.append(f"train {label}")
        taken.append((label, lookahead.take(features)))
    return taken


def test_each_next_minibatch_is_prepared_before_the_current_one_trains():
    events: list[str] = []
    lookahead = Lookahead(preparer(events), InlineExecutor(events))
    taken = train(lookahead, batches_of(3), events, ahead=lambda: True)
    assert taken == [(0, None), (1, "rows 1"), (2, "rows 2")]  # the first is the caller's
    assert events == ["ids 1", "pull 1", "train 0", "ids 2", "pull 2", "train 1", "train 2"]


@pytest.mark.parametrize("count", [0, 1])
def test_short_tasks_pass_through(count):
    events: list[str] = []
    lookahead = Lookahead(preparer(events), InlineExecutor(events))
    assert train(lookahead, batches_of(count), events, ahead=lambda: True) == [
        (i, None) for i in range(count)
    ]
    assert events == [f"train {i}" for i in range(count)]


def test_nothing_is_prepared_while_the_trainer_says_not_to_look_ahead():
    events: list[str] = []
    lookahead = Lookahead(preparer(events), InlineExecutor(events))
    answers = iter([False, True, False])
    taken = train(lookahead, batches_of(4), events, ahead=lambda: next(answers))
    assert taken == [(0, None), (1, None), (2, "rows 2"), (3, None)]


def test_take_answers_only_for_the_same_features_and_only_once():
    events: list[str] = []
    lookahead = Lookahead(preparer(events), InlineExecutor(events))
    stream = lookahead.batches(iter(batches_of(3)), ahead=lambda: True)
    next(stream)
    second = next(stream)
    assert lookahead.take({"x": 1}) is None  # equal, but not the same object: not taken
    next(stream)
    assert lookahead.take(second[0]) is None  # the slot moved on with the stream


def test_a_failed_pull_is_left_to_the_caller_to_redo():
    events: list[str] = []
    lookahead = Lookahead(preparer(events, fail={1}), InlineExecutor(events))
    taken = train(lookahead, batches_of(3), events, ahead=lambda: True)
    assert taken == [(0, None), (1, None), (2, "rows 2")]
