"""Whether failed checkpoint writes fail the job (issue 13 §2): a pure rule, tested as a table.

Each parameter server writes its own shard's checkpoints in the background
(runtime/ps/checkpoint.CheckpointWriter) and counts its failed writes; the master reads the
counts from the answers to its liveness probes (ps_health.py) and, at the end, once more after
the servers finished their queued writes. Every failed write becomes a `checkpoint_failed`
event in the report; then this rule decides:

* a parameter server that failed `MAX_FAILED_IN_A_ROW` (3) writes in a row fails the job at once:
  the disk is full or unwritable and stays so, and a job that goes on without checkpoints could
  not recover from the loss of a parameter server;
* at the end, a parameter server that failed a write and wrote no checkpoint at all fails the
  job: the job asked for checkpoints and has none of that shard;
* otherwise (failures followed by a written checkpoint) the job goes on and may succeed; the
  failures stay in its report.

Counts are per incarnation: a relaunched parameter server starts from zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MAX_FAILED_IN_A_ROW = 3


@dataclass(frozen=True)
class ShardWrites:
    """One parameter server's checkpoint writes since it started."""

    written: int = 0
    failed: int = 0
    failed_in_a_row: int = 0
    last_error: str = ""
    last_failed_version: int = -1


def verdict(
    shards: Mapping[int, ShardWrites], at_end: bool, limit: int = MAX_FAILED_IN_A_ROW
) -> str | None:
    """Why the job fails for its checkpoints (one line), or None when it goes on."""
    for ps_id, writes in sorted(shards.items()):
        if writes.failed_in_a_row >= limit:
            return (
                f"checkpoints cannot be written: parameter server {ps_id} failed "
                f"{writes.failed_in_a_row} checkpoint writes in a row, the last: "
                f"{writes.last_error} (free space there or choose another --checkpoint_dir)"
            )
        if at_end and writes.failed and not writes.written:
            return (
                f"no checkpoint was written: parameter server {ps_id} failed all its "
                f"{writes.failed} checkpoint write(s), the last: {writes.last_error} "
                "(free space there or choose another --checkpoint_dir)"
            )
    return None
