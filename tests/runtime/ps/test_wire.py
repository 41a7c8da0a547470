"""The copy-saving wire encoding (runtime/ps/wire.py) against protobuf's own."""

from __future__ import annotations

import numpy as np
import pytest

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.runtime.ps.wire import parse_with_tensors, serialize_with_tensors
from elasticdl.runtime.tensor_codec import decode, encode

TENSORS = {
    "scalar": np.asarray(np.float32(3.5)),
    "empty": np.zeros((0, 3), np.float32),
    "ids": np.arange(12, dtype=np.int64).reshape(3, 4),
    "strided": np.arange(6, dtype=np.float64)[::2],
    "big": np.linspace(0, 1, 300_000, dtype=np.float32),
    "mask": np.array([True, False]),
    "big_endian": np.arange(4, dtype=">f4"),
}


def test_serialized_tensors_parse_as_the_ordinary_message():
    head = pb.PushGradientsRequest(version=7, task_id=3, non_trainable=[encode("s", np.ones(2))])
    message = pb.PushGradientsRequest.FromString(serialize_with_tensors(head, 3, TENSORS))
    assert (message.version, message.task_id, message.non_trainable[0].name) == (7, 3, "s")
    assert [t.name for t in message.gradients] == list(TENSORS)
    for tensor in message.gradients:
        got, want = decode(tensor), TENSORS[tensor.name]
        assert got.shape == want.shape and got.dtype == want.dtype.newbyteorder("<")
        np.testing.assert_array_equal(got, want)


def test_parsed_tensors_are_read_only_views_of_the_received_bytes():
    response = pb.PushGradientsResponse(
        accepted=True,
        version=9,
        staleness=2,
        dense_parameters=[encode(name, value) for name, value in TENSORS.items()],
    )
    data = response.SerializeToString()
    head, tensors = parse_with_tensors(data, pb.PushGradientsResponse, 3)
    assert (head.accepted, head.version, head.staleness, len(head.dense_parameters)) == (
        True,
        9,
        2,
        0,
    )
    assert list(tensors) == list(TENSORS)
    for name, want in TENSORS.items():
        np.testing.assert_array_equal(tensors[name], want)
        assert tensors[name].shape == want.shape and not tensors[name].flags.writeable
    assert np.shares_memory(tensors["big"], np.frombuffer(data, np.uint8))


def test_a_truncated_message_is_an_error():
    data = pb.PushGradientsResponse(dense_parameters=[encode("w", np.ones(8))]).SerializeToString()
    with pytest.raises((ValueError, IndexError)):
        parse_with_tensors(data[:-5], pb.PushGradientsResponse, 3)
