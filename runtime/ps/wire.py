"""The tensor-heavy parameter-server messages on the wire with fewer copies.

A protobuf `bytes` field costs a copy to build (`tobytes()`), another into the message, another
to serialize, and one more when read back (`tensor.content` is a fresh bytes object). Here:

* `serialize_with_tensors(head, field, tensors)`: the message's small fields serialized by
  protobuf (`head`), then each tensor written as a length-delimited entry of repeated field
  `field` straight from the array's buffer: one copy (the final `b"".join`). Protobuf merges
  concatenated messages, so the server parses the result as one ordinary message.
* `parse_with_tensors(data, cls, field)`: the tensors of repeated field `field` as read-only
  NumPy views of the received bytes (no copy), the remaining fields parsed by protobuf.

Both follow proto/elasticdl.proto's `Tensor` (1 name, 2 dtype, 3 dims, 4 content) and decode
exactly like `tensor_codec.decode` (same dtype table and size check).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.runtime.tensor_codec import decode, wire_dtype

_LEN = 2  # wire type of length-delimited fields
_CONTENT_TAG = bytes([(4 << 3) | _LEN])


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def serialize_with_tensors(head: Any, field: int, tensors: Mapping[str, np.ndarray]) -> bytes:
    """`head` (a message) with `tensors` (name -> array) appended to its repeated Tensor field
    number `field`, serialized."""
    tag = _varint((field << 3) | _LEN)
    pieces: list[Any] = [head.SerializeToString()]
    for name, array in tensors.items():
        array = np.asarray(array)
        dtype = wire_dtype(name, array)
        meta = pb.Tensor(name=name, dtype=dtype, dims=array.shape).SerializeToString()
        array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))  # >= 1-D
        size = _varint(array.nbytes)
        body = len(meta) + len(_CONTENT_TAG) + len(size) + array.nbytes
        pieces += [tag, _varint(body), meta, _CONTENT_TAG, size, array.reshape(-1).view(np.uint8)]
    return b"".join(pieces)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _skip(data: bytes, pos: int, wire_type: int) -> int:
    if wire_type == 0:
        return _read_varint(data, pos)[1]
    if wire_type == 1:
        return pos + 8
    if wire_type == _LEN:
        size, pos = _read_varint(data, pos)
        return pos + size
    if wire_type == 5:
        return pos + 4
    raise ValueError(f"unsupported protobuf wire type {wire_type}")


def _tensor(data: bytes, view: memoryview, start: int, end: int) -> tuple[str, np.ndarray]:
    """The name and array (viewing `data`) of the Tensor message in data[start:end]."""
    pos = start
    content = (0, 0)
    meta = bytearray()
    while pos < end:
        key, body = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        after = _skip(data, body, wire_type)
        if number == 4 and wire_type == _LEN:
            size, at = _read_varint(data, body)
            content = (at, at + size)
        else:
            meta += data[pos:after]
        pos = after
    tensor = pb.Tensor.FromString(bytes(meta))
    if pos != end:
        raise ValueError(f"tensor {tensor.name!r}: the message is corrupt")
    return tensor.name, decode(tensor, view[content[0] : content[1]])


def parse_with_tensors(data: bytes, cls: Any, field: int) -> tuple[Any, dict[str, np.ndarray]]:
    """(message of class `cls` without field `field`, name -> array of that repeated Tensor
    field, viewing `data`)."""
    view = memoryview(data)
    rest = bytearray()
    tensors: dict[str, np.ndarray] = {}
    pos, end = 0, len(data)
    while pos < end:
        key, body = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        after = _skip(data, body, wire_type)
        if number == field and wire_type == _LEN:
            size, at = _read_varint(data, body)
            name, array = _tensor(data, view, at, at + size)
            tensors[name] = array
        else:
            rest += data[pos:after]
        pos = after
    if pos != end:
        raise ValueError(f"{cls.__name__}: the message is corrupt")
    return cls.FromString(bytes(rest)), tensors
