"""A lost, refused or recovered role is one console line as it happens (console.py), and an
error after start is one line (one_line.py)."""

from __future__ import annotations

import errno
import inspect
import logging

import pytest

from elasticdl.runtime.master import console
from elasticdl.runtime.master.console import announce
from elasticdl.runtime.master.events import (
    EventLog,
    InstanceLost,
    LossReported,
    PSRecovered,
    RelaunchRefused,
)
from elasticdl.runtime.one_line import describe


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (
            InstanceLost(
                1.0,
                role="ps",
                id=0,
                cause="killed by SIGKILL (hung: stopped (state T))",
                action="relaunch_budget",
                failure=True,
            ),
            "parameter server 0 lost: killed by SIGKILL (hung: stopped (state T)) (relaunched)",
        ),
        (
            InstanceLost(
                1.0,
                role="worker",
                id=2,
                cause="exited with code 1: boom",
                action="relaunch_budget",
                relaunched_as=5,
                tasks_requeued=1,
                failure=True,
            ),
            "worker 2 lost: exited with code 1: boom (1 task(s) back in the queue; relaunched "
            "as worker 5)",
        ),
        (InstanceLost(1.0, role="worker", id=3, action="retire", failure=False), None),
        (RelaunchRefused(1.0, 4, "the relaunch budget is spent"), "worker 4 not relaunched: "),
        (
            PSRecovered(1.0, 0, 3.25, 0.5, 40),
            "parameter server 0 serves again after 3.2 s, restored checkpoint version 40",
        ),
        (LossReported(1.0, 3, 0.5), None),
    ],
)
def test_what_the_console_says(event, line):
    found = announce(event)
    assert (found is None) if line is None else found.startswith(line), found


def test_an_event_log_listener_says_it_as_it_is_added(caplog):
    log = EventLog()
    log.listen(console.log_event)
    caplog.set_level(logging.WARNING, "elasticdl.master")
    log.add(RelaunchRefused(1.0, 4, "out of budget"))
    assert [r.getMessage() for r in caplog.records] == ["worker 4 not relaunched: out of budget"]


def test_an_error_after_start_is_one_line():
    import tensorflow as tf

    full = OSError(errno.ENOSPC, "No space left on device", "/tmp/x/params.npz")
    assert describe(full) == "No space left on device: /tmp/x/params.npz"
    exhausted = tf.errors.ResourceExhaustedError(
        None,
        None,
        "{{function_node __wrapped__MergeV2Checkpoints_device_/job:localhost}} /tmp/s/v.index; "
        "No space left on device [Op:MergeV2Checkpoints]",
    )
    assert describe(exhausted) == "ResourceExhaustedError: /tmp/s/v.index; No space left on device"
    assert describe(RuntimeError("first\nsecond")) == "RuntimeError: first"
    assert describe(KeyError()) == "KeyError"


def _parse_odps_row(record):
    # ElasticDL's ODPS iris feed: slices a row of strings; a RecordIO record is one string.
    import tensorflow as tf

    return tf.strings.to_number(record[0:-1], tf.float32)


def test_an_error_in_traced_user_code_is_the_error_inside_and_where():
    """TensorFlow reports an error raised while tracing a dataset_fn as "in user code:", the
    user's frames, then the error: the line is that error and the user's frame, never
    "ValueError: in user code:" alone."""
    import tensorflow as tf

    records = tf.data.Dataset.from_tensor_slices([b"a", b"b"])
    with pytest.raises(ValueError) as raised:
        records.map(_parse_odps_row)
    assert str(raised.value).startswith("in user code:")
    line = describe(raised.value)
    assert line.startswith("ValueError: Attempting to slice scalar input."), line
    source, first = inspect.getsourcelines(_parse_odps_row)
    raising = first + next(i for i, text in enumerate(source) if "record[0:-1]" in text)
    assert line.endswith(f"(test_console.py line {raising}, in _parse_odps_row)"), line
    assert "\n" not in line and "in user code" not in line
