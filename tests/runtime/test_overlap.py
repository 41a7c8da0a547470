"""An async worker overlaps its push with the next minibatch only while no other worker pushes
(runtime/worker/overlap.py): the rule as a table, then real Trainers on a real parameter
server over gRPC on 127.0.0.1, taking turns in a fixed order (no timing involved)."""

from __future__ import annotations

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
from tiny_zoo import MODEL

from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.data.recordio import read_records
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.ps.client import PSClient
from elasticdl.runtime.ps.servicer import ParameterServerServicer, parameters_of, start_server
from elasticdl.runtime.worker.overlap import ALONE_PUSHES, OverlapRule
from elasticdl.runtime.worker.trainer import Trainer


@pytest.mark.parametrize(
    ("pushes", "overlaps"),
    [
        # (staleness per shard, overlapped) of each answered push -> overlap after it
        ([([0], False), ([1], True), ([1], True)], [True, True, True]),  # alone: 1 behind
        ([([0, 1], True)], [True]),  # every shard 1 behind: its own previous push
        ([([], False)], [True]),  # no staleness answered (an older server)
        ([([3], True), ([1], False)], [False, False]),  # two workers: serial, 1 behind
        ([([2, 0], True)], [False]),  # any shard counts
        # alone again: overlapping after ALONE_PUSHES serial pushes nobody else preceded
        ([([1], False)] + [([0], False)] * ALONE_PUSHES, [False] * ALONE_PUSHES + [True]),
        # the other worker held its push for a minibatch: one 0 does not end the serial mode
        ([([1], False), ([0], False), ([2], False), ([0], False)], [False] * 4),
        # the overlapped push that lands after going serial counts neither way
        ([([3], True), ([1], True), ([0], False)], [False] * 3),
    ],
)
def test_overlap_rule_table(pushes, overlaps):
    rule = OverlapRule()
    assert [rule.observe(staleness, overlapped) for staleness, overlapped in pushes] == overlaps


@pytest.fixture
def two_trainers(tmp_path):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "tiny.py").write_text(MODEL)
    gen.generate("regression", str(tmp_path / "data"), 640, records_per_file=640)
    (file,) = sorted((tmp_path / "data").glob("*.recordio"))
    records = list(read_records(str(file)))
    config = JobConfig("overlap", "tiny.custom_model", str(zoo), minibatch_size=32, use_async=True)
    server, port = start_server(ParameterServerServicer(parameters_of(config)), 0)
    clients = [PSClient([f"127.0.0.1:{port}"], timeout_s=30) for _ in range(3)]
    clients[0].wait_ready(10)
    trainers = [Trainer(config, client, worker_id) for worker_id, client in enumerate(clients[:2])]
    try:
        yield trainers, records, str(file), clients[2]  # the last: the test's own
    finally:
        for client in clients:
            client.close()
        server.stop(None)


def test_workers_overlap_alone_and_go_serial_while_another_pushes(two_trainers, monkeypatch):
    (a, b), records, file, ps = two_trainers
    seen: list[tuple[list[int], bool]] = []  # (staleness, overlapped) of each answered push
    observe = OverlapRule.observe

    def observing(rule: OverlapRule, staleness: list[int], overlapped: bool) -> bool:
        seen.append((list(staleness), overlapped))
        return observe(rule, staleness, overlapped)

    monkeypatch.setattr(OverlapRule, "observe", observing)
    metadata = a.metadata_for(file, records[0])
    for trainer in (a, b):
        trainer.ensure_built(records, metadata)
    batches = list(a.batches(records, metadata))
    assert len(batches) == 20
    pushed = 0

    def step(trainer: Trainer, task: int, n: int) -> bool:
        nonlocal pushed
        features, labels = batches[n]
        result = trainer.train_batch(features, labels, 32, task, 32 * (n + 1))
        assert result.finite
        pushed += 1
        # The push may still travel (the trainer takes its answer later): the turn ends once
        # the server applied it, so that pushes land in the order of the turns.
        deadline = time.monotonic() + 10
        while ps.pull(-1).versions != [pushed]:
            assert time.monotonic() < deadline, "a push was not applied within 10 s"
            time.sleep(0.005)
        return trainer.overlapping

    # Alone: every push is 1 version behind (its own previous one), and it keeps overlapping.
    assert [step(a, 1, n) for n in range(4)] == [True] * 4
    assert a.finish_task() == 128
    # Both pushing in turns: overlapping would put each push 3 versions behind; both go serial
    # after their first answers and stay serial (each push 1 behind: the other's).
    del seen[:]
    turns = [(step(a, 2, n), step(b, 3, n)) for n in range(8)]
    assert all(not x and not y for x, y in turns[3:]), turns
    # Serial, a push still travels while the worker's loop goes on, but the next minibatch is
    # computed on its answer: each serial push is 1 version behind, the other worker's push.
    assert seen[6:] == [([1], False)] * len(seen[6:]), seen
    assert b.finish_task() == 256
    # Alone again: a's first push (computed before b's last one landed) is 1 behind; then serial
    # until ALONE_PUSHES pushes that nobody else's preceded were answered (an answer is taken
    # before the next minibatch's step), then overlapping.
    alone = [step(a, 2, n) for n in range(8, 16)]
    assert alone == [False] * (ALONE_PUSHES + 1) + [True] * (7 - ALONE_PUSHES), alone
    assert a.finish_task() == 32 * 16
    # No push was lost or doubled on the way from overlapped to serial and back.
    assert ps.pull(-1).versions == [pushed]
