import pytest

from elasticdl.runtime.data.shards import Shard, plan_shards


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
