import pytest

from elasticdl.runtime.data.shards import Shard, plan_shards, task_size


def test_shards_cover_every_record_once():
    files = [("a", 10), ("b", 0), ("c", 7)]
    shards = plan_shards(files, 4)
    assert shards == [
        Shard("a", 0, 4),
        Shard("a", 4, 8),
        Shard("a", 8, 10),
        Shard("c", 0, 4),
        Shard("c", 4, 7),
    ]
    assert sum(s.num_records for s in shards) == 17


@pytest.mark.parametrize("size", [1, 3, 100, 1000])
def test_every_record_in_exactly_one_shard(size):
    files = [(f"f{i}", n) for i, n in enumerate([0, 1, 99, 100, 101, 250])]
    seen = set()
    for shard in plan_shards(files, size):
        assert 0 < shard.num_records <= size
        for r in range(shard.start, shard.end):
            assert (shard.file, r) not in seen
            seen.add((shard.file, r))
    assert seen == {(name, r) for name, n in files for r in range(n)}


@pytest.mark.parametrize("size", [0, -5])
def test_bad_records_per_task(size):
    with pytest.raises(ValueError, match="records_per_task"):
        plan_shards([("a", 3)], size)


@pytest.mark.parametrize(
    ("files", "per_task", "workers", "minibatch", "size"),
    [
        ([("a", 100_000)], 1024, 10, 64, 1024),  # 98 tasks for 10 workers: as asked
        ([("a", 100_000)], 1024, 200, 64, 192),  # 98 < 400: 521 tasks of 3 minibatches
        ([("a", 100_000)], 1024, 49, 64, 1024),  # 98 = 2 x 49: as asked
        ([("a", 50), ("b", 50)], 100, 4, 8, 16),  # files bound tasks: 4 + 4 of 16 records
        ([("a", 64)], 64, 2, 16, 16),  # the smallest job of the defaults' shape: 4 tasks
        ([("a", 10)], 1024, 100, 64, 64),  # less than a minibatch: one task, all there is
        ([("a", 100)], 100, 3, 7, 14),  # a whole number of minibatches
        ([("a", 1000)], 10, 100, 64, 10),  # asked below a minibatch: as asked
        ([("a", 0)], 1024, 4, 64, 1024),  # no records: the plan says so, not the size
    ],
)
def test_tasks_shrink_until_each_worker_has_two_an_epoch(files, per_task, workers, minibatch, size):
    """--records_per_task is a ceiling: an epoch of fewer than 2 tasks per worker (one to
    train, one to hold ahead) gets smaller tasks, whole minibatches, at least one."""
    assert task_size(files, per_task, workers, minibatch) == size
    tasks = len(plan_shards(files, size))
    if size < per_task:
        assert tasks >= 2 * workers or size == minibatch
        bigger = len(plan_shards(files, size + minibatch))
        assert bigger < 2 * workers or size + minibatch > per_task  # the largest that does
