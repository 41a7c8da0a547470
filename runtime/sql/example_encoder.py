"""Rows to serialized tf.train.Example bytes without building protobuf objects.

Converting a table is dominated by per-row work, and building a `tf.train.Example` message per
row costs tens of microseconds. The wire format is small and fixed, so rows are encoded
directly: each column's map-entry prefix (field tags and the feature name) is computed once,
and per row only the value bytes and a few length varints are written. The bytes parse as the
same Example a protobuf library would build (tests compare them field by field); features are
written in column order.

Wire layout (proto3, tensorflow/core/example/{example,feature}.proto):

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }      entry: { key = 1; value = 2; }
    Feature   { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; }
    *List     { repeated <T> value = 1; }                 floats and int64s packed
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

Kind = Literal["int64", "float", "bytes"]

_FLOAT = struct.Struct("<f").pack
_MASK64 = (1 << 64) - 1


def varint(value: int) -> bytes:
    """Protobuf base-128 varint; negative int64 values take ten bytes (two's complement)."""
    if 0 <= value < 0x80:
        return bytes((value,))
    value &= _MASK64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + varint(len(payload)) + payload


class ExampleEncoder:
    """Encodes rows of scalar values (one per column, None for absent) as Example bytes."""

    def __init__(self, columns: Sequence[tuple[str, Kind]]) -> None:
        self.columns = list(columns)
        self._keys = [_field(0x0A, name.encode()) for name, _ in self.columns]
        self._encoders = [self._encoder_for(kind) for _, kind in self.columns]

    @staticmethod
    def _encoder_for(kind: Kind) -> Any:
        vector = _VECTOR_ENCODERS[kind]
        scalar = ExampleEncoder._scalar_encoder_for(kind)
        return lambda v: vector(v) if isinstance(v, list | tuple | np.ndarray) else scalar(v)

    @staticmethod
    def _scalar_encoder_for(kind: Kind) -> Any:
        if kind == "float":
            # Feature{float_list{value: [v]}} has a fixed size: 0x12 06 0A 04 <4 bytes>.
            return lambda v: b"\x12\x06\x0a\x04" + _FLOAT(v)
        if kind == "int64":

            def int64(v: int) -> bytes:
                packed = varint(int(v))
                inner = b"\x0a" + bytes((len(packed),)) + packed
                return b"\x1a" + bytes((len(inner),)) + inner

            return int64
        if kind == "bytes":

            def text(v: Any) -> bytes:
                data = v.encode() if isinstance(v, str) else bytes(v)
                inner = b"\x0a" + varint(len(data)) + data
                return b"\x0a" + varint(len(inner)) + inner

            return text
        raise ValueError(f"unknown feature kind {kind!r}")

    def encode(self, row: Sequence[Any]) -> bytes:
        """One row as a serialized tf.train.Example; None values are left out.

        A value is a scalar, or a list / NumPy array for a feature of several values.
        """
        entries = []
        for key, encode, value in zip(self._keys, self._encoders, row, strict=True):
            if value is None:
                continue
            feature = encode(value)
            entry = key + b"\x12" + varint(len(feature)) + feature
            entries.append(b"\x0a" + varint(len(entry)) + entry)
        features = b"".join(entries)
        return b"\x0a" + varint(len(features)) + features


def _float_list(values: Any) -> bytes:
    data = np.asarray(values, dtype="<f4").tobytes()
    inner = b"\x0a" + varint(len(data)) + data
    return b"\x12" + varint(len(inner)) + inner


def _int64_list(values: Any) -> bytes:
    data = b"".join(varint(int(v)) for v in values)
    inner = b"\x0a" + varint(len(data)) + data
    return b"\x1a" + varint(len(inner)) + inner


def _bytes_list(values: Any) -> bytes:
    items = [v.encode() if isinstance(v, str) else bytes(v) for v in values]
    inner = b"".join(b"\x0a" + varint(len(v)) + v for v in items)
    return b"\x0a" + varint(len(inner)) + inner


_VECTOR_ENCODERS = {"float": _float_list, "int64": _int64_list, "bytes": _bytes_list}
