"""NumPy arrays <-> `elasticdl.Tensor` messages, as raw little-endian bytes.

No per-element conversion: encoding is one `tobytes()`, decoding one `np.frombuffer` over the
message's bytes (read-only; copy before mutating).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from elasticdl.proto import elasticdl_pb2 as pb

_TO_PROTO = {
    np.dtype("float32"): pb.DT_FLOAT32,
    np.dtype("float64"): pb.DT_FLOAT64,
    np.dtype("int32"): pb.DT_INT32,
    np.dtype("int64"): pb.DT_INT64,
    np.dtype("bool"): pb.DT_BOOL,
    np.dtype("float16"): pb.DT_FLOAT16,
    np.dtype("int8"): pb.DT_INT8,
    np.dtype("uint8"): pb.DT_UINT8,
    np.dtype("int16"): pb.DT_INT16,
}
_FROM_PROTO = {code: dtype.newbyteorder("<") for dtype, code in _TO_PROTO.items()}


def wire_dtype(name: str, array: np.ndarray) -> int:
    """The proto DataType of `array` (TypeError naming the tensor when it has none)."""
    try:
        return _TO_PROTO[array.dtype.newbyteorder("=")]
    except KeyError:
        raise TypeError(f"tensor {name!r}: dtype {array.dtype} cannot go on the wire") from None


def encode(name: str, array: np.ndarray, indices: np.ndarray | None = None) -> pb.Tensor:
    """One array (and, for a sparse gradient, its row indices) as a Tensor message."""
    array = np.asarray(array)
    dtype = wire_dtype(name, array)
    tensor = pb.Tensor(
        name=name,
        dtype=dtype,
        dims=array.shape,
        content=np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes(),
    )
    if indices is not None:
        tensor.indices.extend(np.asarray(indices, dtype=np.int64).tolist())
    return tensor


def decode(tensor: pb.Tensor, content: bytes | memoryview | None = None) -> np.ndarray:
    """The array of a Tensor message (a read-only view of its bytes, or of `content` when
    given: the message's content held elsewhere, see runtime/ps/wire.py)."""
    try:
        dtype = _FROM_PROTO[tensor.dtype]
    except KeyError:
        raise ValueError(f"tensor {tensor.name!r}: unknown dtype {tensor.dtype}") from None
    shape = tuple(tensor.dims)
    array = np.frombuffer(tensor.content if content is None else content, dtype=dtype)
    expected = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if array.size != expected:
        raise ValueError(
            f"tensor {tensor.name!r}: {array.size} values for shape {shape} "
            f"({expected} expected); the message is corrupt"
        )
    return array.reshape(shape)


def decode_all(tensors: Iterable[pb.Tensor]) -> dict[str, np.ndarray]:
    return {t.name: decode(t) for t in tensors}
