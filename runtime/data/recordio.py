"""RecordIO: read and write files byte-compatible with pyrecordio 0.0.7 (Go wangkuiyi/recordio).

A file is a sequence of chunks. Each chunk is a 20-byte little-endian header,

    uint32 magic (0x01020304) | uint32 CRC32 (IEEE, as zlib.crc32) of the compressed payload |
    uint32 compressor id (0 none, 1 snappy framed stream, 2 gzip) |
    uint32 compressed payload size | uint32 number of records

followed by the compressed payload, which decompresses to ``(uint32 LE length, bytes)`` per
record. The file has no index: `read_index` builds one by hopping from header to header (seek,
read 20 bytes, never decompress), so a reader can decompress only the chunks that overlap the
``[start, end)`` range of records it is asked for.

Paths are fsspec URLs (``/local/path``, ``file://``, ``memory://``, ``gs://``...), with
``storage_options`` passed to fsspec, or a path on an explicit ``fs``.

Integrity: every chunk read is CRC-checked before decompression and its records are framed
exactly (lengths must tile the payload and the count must match the header). Any defect raises
`RecordIOError` naming the file, the chunk and its byte offset. A reader keeps the last chunks
it read (`CACHED_CHUNK_BYTES`), checked and split, for the ranges that follow.
"""

from __future__ import annotations

import enum
import gzip
import logging
import os
import struct
import zlib
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import cramjam
import fsspec

__all__ = [
    "HEADER_SIZE",
    "MAGIC",
    "ChunkInfo",
    "Compressor",
    "RecordIOError",
    "RecordIOIndex",
    "RecordIOReader",
    "RecordIOWriter",
    "count_records",
    "read_index",
    "read_records",
    "write_records",
]

logger = logging.getLogger(__name__)

MAGIC = 0x01020304
HEADER_SIZE = 20
_HEADER = struct.Struct("<IIIII")
_U32 = struct.Struct("<I")
_U32_MAX = 0xFFFFFFFF
_FIX = "the file is corrupt, truncated or not RecordIO; re-generate it"


class Compressor(enum.IntEnum):
    """Chunk compressor ids as stored in the chunk header."""

    NONE = 0
    SNAPPY = 1  # snappy *framed* stream format (what Go's snappy.NewBufferedWriter writes)
    GZIP = 2


# Upper bound of decompressed/compressed size per compressor, used to reject a header whose
# record count cannot possibly fit its payload (each record takes at least 4 bytes). Snappy
# copies at most 64 bytes per 3-byte tag (21.3x); deflate at most ~1032x.
_MAX_EXPANSION = {Compressor.NONE: 1, Compressor.SNAPPY: 22, Compressor.GZIP: 1040}


class RecordIOError(ValueError):
    """A RecordIO file is malformed; the message names the file, the chunk and the defect."""

    def __init__(
        self,
        path: str,
        what: str,
        *,
        chunk: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = ""
        if chunk is not None:
            where = f" chunk {chunk}"
        if offset is not None:
            where += f" at byte offset {offset}"
        super().__init__(f"RecordIO file {path!r}:{where}: {what}; {_FIX}")
        self.path = path
        self.chunk = chunk
        self.offset = offset


@dataclass(frozen=True)
class ChunkInfo:
    """One chunk's header, where it starts in the file and its first record's number."""

    offset: int
    first_record: int
    num_records: int
    compressor: Compressor
    compressed_size: int
    crc: int

    @property
    def end_offset(self) -> int:
        """Byte offset just past this chunk's payload."""
        return self.offset + HEADER_SIZE + self.compressed_size


@dataclass(frozen=True)
class RecordIOIndex:
    """The chunks of one file, in file order; built from headers only by `read_index`."""

    path: str
    chunks: tuple[ChunkInfo, ...]
    file_size: int
    _firsts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _total: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "chunks", tuple(self.chunks))
        object.__setattr__(self, "_firsts", tuple(c.first_record for c in self.chunks))
        last = self.chunks[-1] if self.chunks else None
        object.__setattr__(self, "_total", last.first_record + last.num_records if last else 0)

    @property
    def num_records(self) -> int:
        """Total number of records in the file."""
        return self._total

    def _chunk_ids(self, start: int, end: int) -> range:
        """Indices of the chunks holding records in [start, end) (may include empty chunks)."""
        if start >= end or not self.chunks:
            return range(0)
        first = max(bisect_right(self._firsts, start) - 1, 0)
        last = bisect_right(self._firsts, end - 1)  # chunks starting before `end`
        return range(first, last)

    def chunk_range(self, start: int, end: int) -> tuple[ChunkInfo, ...]:
        """The chunks with at least one record in [start, end), in file order."""
        chunks = self.chunks
        return tuple(
            chunks[i]
            for i in self._chunk_ids(start, end)
            if chunks[i].num_records
            and chunks[i].first_record < end
            and chunks[i].first_record + chunks[i].num_records > start
        )


# --------------------------------------------------------------------------- filesystem glue


def _resolve(
    path_or_url: str | os.PathLike[str],
    fs: fsspec.AbstractFileSystem | None,
    storage_options: dict[str, Any] | None,
) -> tuple[fsspec.AbstractFileSystem, str]:
    """(filesystem, path on it) for a URL/path, or the path as given on an explicit `fs`."""
    path = os.fspath(path_or_url)
    if fs is not None:
        if storage_options:
            raise ValueError("pass either fs or storage_options, not both")
        return fs, path
    return fsspec.core.url_to_fs(path, **(storage_options or {}))


def _open_for_read(fs: fsspec.AbstractFileSystem, path: str) -> BinaryIO:
    # cache_type="none": every read() is exactly one ranged fetch on remote stores (a 20-byte
    # header while indexing, one whole chunk while reading); local files ignore it.
    return fs.open(path, "rb", cache_type="none")


def _file_size(f: BinaryIO) -> int:
    f.seek(0, os.SEEK_END)
    return f.tell()


def _build_index(f: BinaryIO, path: str) -> RecordIOIndex:
    size = _file_size(f)
    chunks: list[ChunkInfo] = []
    offset = 0
    first = 0
    while offset < size:
        i = len(chunks)
        f.seek(offset)
        head = f.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE:
            raise RecordIOError(
                path,
                f"truncated chunk header: {len(head)} of {HEADER_SIZE} bytes before end of file",
                chunk=i,
                offset=offset,
            )
        magic, crc, comp, csize, n = _HEADER.unpack(head)
        if magic != MAGIC:
            raise RecordIOError(
                path,
                f"bad magic number 0x{magic:08x} (expected 0x{MAGIC:08x})",
                chunk=i,
                offset=offset,
            )
        try:
            compressor = Compressor(comp)
        except ValueError:
            raise RecordIOError(
                path,
                f"unknown compressor id {comp} (known: 0 none, 1 snappy, 2 gzip)",
                chunk=i,
                offset=offset,
            ) from None
        end = offset + HEADER_SIZE + csize
        if end > size:
            raise RecordIOError(
                path,
                f"truncated payload: header says {csize} bytes but the file ends "
                f"{size - offset - HEADER_SIZE} bytes after the header",
                chunk=i,
                offset=offset,
            )
        if 4 * n > csize * _MAX_EXPANSION[compressor] + 64:
            raise RecordIOError(
                path,
                f"header claims {n} records, more than a {csize}-byte {compressor.name} "
                "payload can hold",
                chunk=i,
                offset=offset,
            )
        chunks.append(ChunkInfo(offset, first, n, compressor, csize, crc))
        first += n
        offset = end
    return RecordIOIndex(path=path, chunks=tuple(chunks), file_size=size)


def read_index(
    path_or_url: str | os.PathLike[str],
    *,
    fs: fsspec.AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RecordIOIndex:
    """Index a RecordIO file by reading its chunk headers only (no payload read, no decompress).

    Raises `RecordIOError` for a bad magic, unknown compressor, truncated header, or a payload
    that runs past the end of the file. An empty file is a valid file of zero records.
    """
    name = os.fspath(path_or_url)
    fs, path = _resolve(name, fs, storage_options)
    with _open_for_read(fs, path) as f:
        return _build_index(f, name)


def count_records(path_or_url: str | os.PathLike[str], **kw: Any) -> int:
    """Number of records in a file, from its headers (`read_index` keyword arguments)."""
    return read_index(path_or_url, **kw).num_records


# --------------------------------------------------------------------------- reading


# Buffers up to this size are kept by a reader and reused for every chunk it loads: no fresh
# megabyte allocations (and page faults) per chunk. Larger chunks get one-off buffers.
_KEEP_SCRATCH_BYTES = 64 << 20


class _Scratch:
    """A reader's reusable input (compressed) and output (decompressed) buffers."""

    __slots__ = ("_bufs",)

    def __init__(self) -> None:
        self._bufs: list[bytearray] = [bytearray(), bytearray()]

    def view(self, which: int, size: int) -> memoryview:
        """A writable view of `size` bytes of buffer `which` (0 input, 1 output)."""
        buf = self._bufs[which]
        if len(buf) < size:
            buf = bytearray(size)
            if size <= _KEEP_SCRATCH_BYTES:
                self._bufs[which] = buf
        return memoryview(buf)[:size]


_SNAPPY_MAX_FRAME = 65536  # the framing format's limit of uncompressed bytes per frame


def _snappy_framed_len(payload: memoryview) -> int:
    """Decompressed size of a snappy framed stream, from its frame headers (no decompression).

    Raises ValueError if the frames do not tile the payload or use a reserved frame type.
    """
    size = len(payload)
    pos = 0
    total = 0
    while pos < size:
        if pos + 4 > size:
            raise ValueError(f"truncated snappy frame header at payload byte {pos}")
        kind = payload[pos]
        length = payload[pos + 1] | payload[pos + 2] << 8 | payload[pos + 3] << 16
        body = pos + 4
        pos = body + length
        if pos > size:
            raise ValueError(f"snappy frame at payload byte {body - 4} runs past the payload")
        if kind == 0x00:  # compressed: masked CRC-32C, then raw snappy led by a varint length
            p = body + 4
            value = shift = 0
            while True:
                if p >= pos or shift > 28:
                    raise ValueError(f"bad snappy length varint at payload byte {body + 4}")
                b = payload[p]
                value |= (b & 0x7F) << shift
                p += 1
                shift += 7
                if b < 0x80:
                    break
            if value > _SNAPPY_MAX_FRAME:
                raise ValueError(f"snappy frame at payload byte {body - 4} claims {value} bytes")
            total += value
        elif kind == 0x01:  # uncompressed: masked CRC-32C, then the data
            if not 4 <= length <= _SNAPPY_MAX_FRAME + 4:
                raise ValueError(f"bad uncompressed snappy frame at payload byte {body - 4}")
            total += length - 4
        elif kind < 0x80:  # 0x02-0x7f are reserved and unskippable
            raise ValueError(f"reserved snappy frame type 0x{kind:02x} at payload byte {body - 4}")
        # 0x80-0xfd skippable, 0xfe padding, 0xff stream identifier: no data
    return total


def _decompress_snappy(payload: memoryview, scratch: _Scratch) -> memoryview:
    size = _snappy_framed_len(payload)
    out = scratch.view(1, size)
    written = cramjam.snappy.decompress_into(payload, out)  # verifies each frame's CRC-32C
    if written != size:
        raise ValueError(f"snappy stream decompressed to {written} bytes, frames say {size}")
    return out


def _decompress_gzip(payload: memoryview, scratch: _Scratch) -> bytes:
    return gzip.decompress(payload)


def _decompress_none(payload: memoryview, scratch: _Scratch) -> memoryview:
    return payload


# Each returns the decompressed chunk (possibly a view of the reader's scratch buffers, valid
# until the reader loads its next chunk) or raises on a malformed payload.
_DECOMPRESS: dict[Compressor, Callable[[memoryview, _Scratch], bytes | memoryview]] = {
    Compressor.NONE: _decompress_none,
    Compressor.SNAPPY: _decompress_snappy,
    Compressor.GZIP: _decompress_gzip,
}


def _record_offsets(raw: bytes, n: int) -> array | str:
    """Where each of a decompressed chunk's `n` records starts (its length prefix), then the
    chunk's end: record k is ``raw[offsets[k] + 4 : offsets[k + 1]]``. Or what is wrong: the
    lengths must tile the chunk exactly, `n` of them."""
    unpack = _U32.unpack_from
    offsets = [0] * (n + 1)
    pos = 0
    try:
        for k in range(n):
            offsets[k] = pos
            pos += 4 + unpack(raw, pos)[0]
    except struct.error:
        return (
            f"record length overruns payload: fewer than the {n} records the header claims "
            f"fit in the {len(raw)} decompressed bytes"
        )
    if pos > len(raw):
        return (
            f"record length overruns payload: the {n} records need {pos} bytes, "
            f"the chunk decompresses to {len(raw)}"
        )
    if pos < len(raw):
        return (
            f"record count mismatch: {len(raw) - pos} bytes left over after the {n} records "
            "the header claims"
        )
    offsets[n] = pos
    return array("q", offsets)


@dataclass(frozen=True)
class _Chunk:
    """A chunk's decompressed bytes and its records' offsets (see `_record_offsets`)."""

    raw: bytes
    offsets: array

    def records(self, skip: int, take: int) -> list[bytes]:
        """Records [skip, skip + take), each a copy of its own."""
        raw, end = self.raw, skip + take
        starts, ends = self.offsets[skip:end], self.offsets[skip + 1 : end + 1]
        return [raw[a + 4 : b] for a, b in zip(starts, ends, strict=True)]


# A reader keeps the chunks it decompressed last, up to this many bytes of them: a worker's
# consecutive tasks of one file share the chunk at their boundary, and reading it again (fetch,
# CRC, decompress, walk every length prefix) cost about as much as the task's own records.
CACHED_CHUNK_BYTES = 4 << 20


class RecordIOReader:
    """Random-access reader of one RecordIO file: holds one open fsspec file and its index.

    Not thread-safe; use one reader per thread. Several `read` iterators of the same reader may
    be interleaved in one thread (each chunk is fetched with a seek and a single read).
    """

    def __init__(
        self,
        path_or_url: str | os.PathLike[str],
        *,
        index: RecordIOIndex | None = None,
        fs: fsspec.AbstractFileSystem | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.path = os.fspath(path_or_url)
        fs, path = _resolve(self.path, fs, storage_options)
        self._file: BinaryIO | None = _open_for_read(fs, path)
        self._scratch = _Scratch()
        self._cached: OrderedDict[int, _Chunk] = OrderedDict()
        try:
            if index is None:
                index = _build_index(self._file, self.path)
            else:
                size = _file_size(self._file)
                if size != index.file_size:
                    raise RecordIOError(
                        self.path,
                        f"file is {size} bytes but its index was built for "
                        f"{index.file_size} bytes (file changed since it was indexed)",
                    )
        except BaseException:
            self.close()
            raise
        self.index: RecordIOIndex = index

    @property
    def num_records(self) -> int:
        """Total number of records in the file."""
        return self.index.num_records

    def __enter__(self) -> RecordIOReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the underlying file (idempotent)."""
        f, self._file = self._file, None
        self._cached.clear()
        if f is not None:
            f.close()

    def __iter__(self) -> Iterator[bytes]:
        return self.read()

    def read(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Records [start, end) in order; `end` defaults to, and is clipped to, num_records.

        Arguments are checked now (ValueError if negative, start > num_records or
        start > end); chunks are fetched, CRC-checked and decompressed lazily, one at a time.
        """
        total = self.num_records
        if end is None:
            end = total
        if start < 0 or end < 0:
            raise ValueError(f"record range [{start}, {end}) must not be negative")
        if start > total:
            raise ValueError(
                f"start {start} is past the end of {self.path!r}, which has {total} records"
            )
        if start > end:
            raise ValueError(f"empty record range: start {start} > end {end}")
        if self._file is None:
            raise ValueError(f"reader of {self.path!r} is closed")
        return self._iter(start, min(end, total))

    def _iter(self, start: int, end: int) -> Iterator[bytes]:
        chunks = self.index.chunks
        for i in self.index._chunk_ids(start, end):
            c = chunks[i]
            if not c.num_records:
                continue
            skip = max(start - c.first_record, 0)
            take = min(end - c.first_record, c.num_records) - skip
            yield from self._chunk(i, c).records(skip, take)

    def _chunk(self, i: int, c: ChunkInfo) -> _Chunk:
        """Chunk `i` read, checked and split, or kept from an earlier read (the most recent
        chunks, `CACHED_CHUNK_BYTES` of them at most: the file must not change while read)."""
        chunk = self._cached.pop(i, None)
        if chunk is None:
            raw = bytes(self._load(i, c))  # its own copy: the scratch buffers are reused
            offsets = _record_offsets(raw, c.num_records)
            if isinstance(offsets, str):
                raise RecordIOError(self.path, offsets, chunk=i, offset=c.offset)
            chunk = _Chunk(raw, offsets)
        if len(chunk.raw) <= CACHED_CHUNK_BYTES:
            self._cached[i] = chunk
            kept = sum(len(each.raw) for each in self._cached.values())
            while kept > CACHED_CHUNK_BYTES:
                kept -= len(self._cached.popitem(last=False)[1].raw)
        return chunk

    def _fetch(self, offset: int, want: int) -> memoryview:
        """`want` bytes from `offset` in one read call (short only at end of file)."""
        f = self._file
        if f is None:
            raise ValueError(f"reader of {self.path!r} is closed")
        f.seek(offset)
        readinto = getattr(f, "readinto", None)
        if readinto is None:
            return memoryview(f.read(want))
        buf = self._scratch.view(0, want)
        got = 0
        while got < want:
            n = readinto(buf[got:])
            if not n:
                break
            got += n
        return buf[:got]

    def _load(self, i: int, c: ChunkInfo) -> bytes | memoryview:
        """Fetch chunk `i` in one read, verify header and CRC, return it decompressed.

        The result may be a view of this reader's scratch buffers: split it before the next
        `_load`.
        """
        want = HEADER_SIZE + c.compressed_size
        data = self._fetch(c.offset, want)
        if len(data) != want:
            raise RecordIOError(
                self.path,
                f"truncated chunk: read {len(data)} of {want} bytes",
                chunk=i,
                offset=c.offset,
            )
        header = _HEADER.unpack_from(data)
        if header != (MAGIC, c.crc, c.compressor, c.compressed_size, c.num_records):
            raise RecordIOError(
                self.path,
                f"chunk header {header} differs from the index (file changed since indexing?)",
                chunk=i,
                offset=c.offset,
            )
        payload = data[HEADER_SIZE:]
        crc = zlib.crc32(payload)
        if crc != c.crc:
            raise RecordIOError(
                self.path,
                f"CRC mismatch: header says 0x{c.crc:08x}, payload has 0x{crc:08x}",
                chunk=i,
                offset=c.offset,
            )
        try:
            return _DECOMPRESS[c.compressor](payload, self._scratch)
        except Exception as e:  # ValueError, cramjam.DecompressionError, zlib.error, OSError
            raise RecordIOError(
                self.path,
                f"{c.compressor.name} payload does not decompress ({type(e).__name__}: {e})",
                chunk=i,
                offset=c.offset,
            ) from e


def read_records(
    path_or_url: str | os.PathLike[str],
    start: int = 0,
    end: int | None = None,
    **kw: Any,
) -> Iterator[bytes]:
    """Records [start, end) of a file (see `RecordIOReader.read`); the file is closed when the
    iterator is exhausted or closed. `kw` go to `RecordIOReader` (index, fs, storage_options).
    """
    reader = RecordIOReader(path_or_url, **kw)
    try:
        it = reader.read(start, end)
    except BaseException:
        reader.close()
        raise
    return _closing(reader, it)


def _closing(reader: RecordIOReader, it: Iterator[bytes]) -> Iterator[bytes]:
    try:
        yield from it
    finally:
        reader.close()


# --------------------------------------------------------------------------- writing


def _compress_snappy(raw: bytes) -> Any:
    return cramjam.snappy.compress(raw)  # a cramjam.Buffer: buffer protocol, no extra copy


def _compress_gzip(raw: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: gzip container, as Go's gzip.Writer
    return z.compress(raw) + z.flush()


_COMPRESS: dict[Compressor, Callable[[bytes], Any]] = {
    Compressor.NONE: lambda raw: raw,
    Compressor.SNAPPY: _compress_snappy,
    Compressor.GZIP: _compress_gzip,
}


class RecordIOWriter:
    """Writes records to a new RecordIO file (fsspec path/URL) or to a binary file object.

    Records are buffered until the next one would take the chunk past `max_chunk_bytes` of
    uncompressed data (length prefixes included); then the chunk is compressed and written
    (header, then payload). A record larger than `max_chunk_bytes` gets a chunk
    of its own. With one chunk of snappy the output is byte-identical to pyrecordio's.

    Guarantees: `close()` (or leaving the `with` block normally) writes the last chunk and
    closes a file the writer opened; a file object passed in is flushed, never closed. If the
    `with` block raises, buffered records are dropped and a file the writer opened is closed
    and deleted (best effort). A process that dies before `close()` leaves the chunks written
    so far: a file cut inside a chunk is detected by readers (RecordIOError), but one cut
    between chunks reads as a valid, shorter file. Publish atomically (write a temporary name,
    then rename) if readers must never see a partial file.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | BinaryIO,
        *,
        compressor: Compressor = Compressor.SNAPPY,
        max_chunk_bytes: int = 1 << 20,
        fs: fsspec.AbstractFileSystem | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self._compressor = Compressor(compressor)
        self._compress = _COMPRESS[self._compressor]
        if max_chunk_bytes < 1:
            raise ValueError(f"max_chunk_bytes must be positive, got {max_chunk_bytes}")
        self._max = max_chunk_bytes
        self._fs: fsspec.AbstractFileSystem | None = None
        self._fs_path = ""
        if hasattr(target, "write"):
            if fs is not None or storage_options:
                raise ValueError("fs/storage_options apply to paths, not to file objects")
            self.path = str(getattr(target, "name", repr(target)))
            self._file: BinaryIO | None = target  # type: ignore[assignment]
            self._owns = False
        else:
            self.path = os.fspath(target)  # type: ignore[arg-type]
            self._fs, self._fs_path = _resolve(self.path, fs, storage_options)
            self._file = self._fs.open(self._fs_path, "wb")
            self._owns = True
        self._parts: list[bytes] = []
        self._buffered = 0
        self._chunk_records = 0
        self._num_records = 0

    @property
    def num_records(self) -> int:
        """Records written so far (including those still buffered)."""
        return self._num_records

    def write(self, record: bytes) -> None:
        """Append one record (bytes-like; may be empty)."""
        if self._file is None:
            raise ValueError(f"RecordIO writer of {self.path!r} is closed")
        if not isinstance(record, bytes):
            if not isinstance(record, bytearray | memoryview):
                raise TypeError(f"a record must be bytes, not {type(record).__name__}")
            record = bytes(record)
        n = len(record)
        if n > _U32_MAX:
            raise ValueError(f"record of {n} bytes is too large for RecordIO (max 4 GiB - 1)")
        if self._chunk_records and self._buffered + 4 + n > self._max:
            self._flush()
        self._parts.append(_U32.pack(n))
        self._parts.append(record)
        self._buffered += 4 + n
        self._chunk_records += 1
        self._num_records += 1

    def _flush(self) -> None:
        if not self._chunk_records:
            return
        assert self._file is not None
        payload = self._compress(b"".join(self._parts))
        if len(payload) > _U32_MAX:
            raise ValueError(f"chunk of {len(payload)} bytes does not fit RecordIO's 32-bit size")
        header = _HEADER.pack(
            MAGIC, zlib.crc32(payload), self._compressor, len(payload), self._chunk_records
        )
        self._file.write(header)
        self._file.write(payload)
        self._parts = []
        self._buffered = 0
        self._chunk_records = 0

    def close(self) -> None:
        """Write the buffered chunk, then close the file if the writer opened it (idempotent)."""
        f = self._file
        if f is None:
            return
        try:
            self._flush()
        finally:
            self._file = None
            if self._owns:
                f.close()
            else:
                f.flush()

    def abort(self) -> None:
        """Drop buffered records; close and delete the file if the writer opened it."""
        f, self._file = self._file, None
        self._parts = []
        self._buffered = self._chunk_records = 0
        if f is None or not self._owns:
            return
        try:
            f.close()
        finally:
            assert self._fs is not None
            try:
                if self._fs.exists(self._fs_path):
                    self._fs.rm(self._fs_path)
            except Exception:  # best effort; the original error matters more
                logger.warning(
                    "could not remove partial RecordIO file %s", self.path, exc_info=True
                )

    def __enter__(self) -> RecordIOWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            try:
                self.abort()
            except Exception:
                logger.warning(
                    "error while aborting RecordIO writer of %s", self.path, exc_info=True
                )


def write_records(
    path_or_url: str | os.PathLike[str] | BinaryIO,
    records: Iterable[bytes],
    **kw: Any,
) -> int:
    """Write all `records` to a new file (`RecordIOWriter` keyword arguments); return the count.

    If iterating `records` raises, the partial file is removed (see `RecordIOWriter`).
    """
    with RecordIOWriter(path_or_url, **kw) as w:
        write = w.write
        for r in records:
            write(r)
        return w.num_records
