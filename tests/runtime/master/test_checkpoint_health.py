"""The rule that decides whether failed checkpoint writes fail the job (checkpoint_health.py)."""

from __future__ import annotations

import pytest

from elasticdl.runtime.master.checkpoint_health import ShardWrites, verdict

FULL = "cannot write checkpoint /c/version-000000000004/ps-1-of-2.npz: No space left on device"


@pytest.mark.parametrize(
    ("shards", "at_end", "fails"),
    [
        ({}, True, None),
        ({0: ShardWrites(written=5)}, True, None),
        ({0: ShardWrites(written=5, failed=2, failed_in_a_row=2, last_error=FULL)}, False, None),
        ({0: ShardWrites(written=5, failed=2, failed_in_a_row=2, last_error=FULL)}, True, None),
        ({0: ShardWrites(written=1, failed=7, failed_in_a_row=0)}, True, None),
        ({1: ShardWrites(written=5, failed=3, failed_in_a_row=3, last_error=FULL)}, False, "row"),
        ({1: ShardWrites(failed=1, failed_in_a_row=1, last_error=FULL)}, False, None),
        ({1: ShardWrites(failed=1, failed_in_a_row=1, last_error=FULL)}, True, "none"),
        ({0: ShardWrites(written=2), 1: ShardWrites(failed=4, failed_in_a_row=4)}, False, "row"),
    ],
)
def test_when_failed_checkpoint_writes_fail_the_job(shards, at_end, fails):
    reason = verdict(shards, at_end)
    if fails is None:
        assert reason is None
    elif fails == "row":
        assert reason is not None and "checkpoint writes in a row" in reason
        assert reason.startswith("checkpoints cannot be written: parameter server 1 failed ")
    else:
        assert reason == (
            f"no checkpoint was written: parameter server 1 failed all its 1 checkpoint "
            f"write(s), the last: {FULL} (free space there or choose another --checkpoint_dir)"
        )


def test_the_limit_is_a_parameter():
    shards = {0: ShardWrites(written=1, failed=1, failed_in_a_row=1, last_error=FULL)}
    assert verdict(shards, at_end=False, limit=1) is not None
    assert verdict(shards, at_end=False, limit=2) is None
