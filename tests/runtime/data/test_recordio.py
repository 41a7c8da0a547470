"""RecordIO reader/writer: pyrecordio's golden files, corruption, round trips, ranges, GCS."""

from __future__ import annotations

import hashlib
import io
import json
import random
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cramjam
import fsspec
import pytest
from gcs_emulator import GCSEmulator, gcs_emulator

from elasticdl.runtime.data import recordio as rio
from elasticdl.runtime.data.recordio import (
    HEADER_SIZE,
    Compressor,
    RecordIOError,
    RecordIOReader,
    RecordIOWriter,
    count_records,
    read_index,
    read_records,
    write_records,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "recordio"
GOLDEN = {e["file"]: e for e in json.loads((DATA / "manifest.json").read_text())["files"]}
SNAPPY_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def mixed_records(n: int, seed: int, max_len: int = 50) -> list[bytes]:
    """`n` records: ~10% empty, ~30% repetitive, the rest random; at most max_len + 2 bytes."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        kind = rnd.random()
        if kind < 0.1:
            out.append(b"")
        elif kind < 0.4:
            out.append(b"ab" * rnd.randint(1, max_len // 2))
        else:
            out.append(rnd.randbytes(rnd.randint(1, max_len)))
        out[-1] += i.to_bytes(2, "little") if out[-1] else b""
    return out


def read_url(url: str) -> bytes:
    with fsspec.open(url, "rb") as f:
        return f.read()


def chunk_offsets(path: Path) -> list[int]:
    return [c.offset for c in read_index(str(path)).chunks]


# --------------------------------------------------------------------------- golden files


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_file_reads_exactly(name: str) -> None:
    entry = GOLDEN[name]
    path = DATA / name
    assert path.stat().st_size == entry["bytes"]
    records = list(read_records(str(path)))
    assert len(records) == entry["num_records"] == count_records(str(path))
    assert [sha256(r) for r in records] == entry["sha256_of_records"]


def test_golden_text_records_match_readme() -> None:
    records = list(read_records(str(DATA / "text-1000.recordio")))
    expected = [b"record-%05d" % i for i in range(1000)]
    expected[17] = b""
    assert records == expected


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_header_layout(name: str) -> None:
    """One chunk: magic, CRC32 of the payload, compressor 1, payload size, count; framed snappy."""
    blob = (DATA / name).read_bytes()
    assert blob[:4] == b"\x04\x03\x02\x01"  # 0x01020304 little-endian
    magic, crc, comp, size, n = struct.unpack_from("<5I", blob)
    payload = blob[HEADER_SIZE:]
    assert (magic, comp, size, n) == (0x01020304, 1, len(payload), GOLDEN[name]["num_records"])
    assert crc == zlib.crc32(payload)
    assert payload.startswith(SNAPPY_STREAM_ID)  # snappy *framed* stream, not raw snappy
    index = read_index(str(DATA / name))
    assert index.file_size == len(blob)
    assert index.chunks == (rio.ChunkInfo(0, 0, n, Compressor.SNAPPY, size, crc),)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_writer_reproduces_golden_bytes(name: str) -> None:
    """cramjam's framed snappy equals Go's, so one 32 MiB-limit chunk is byte-identical."""
    golden = (DATA / name).read_bytes()
    out = io.BytesIO()
    n = write_records(out, read_records(str(DATA / name)), max_chunk_bytes=32 << 20)
    assert n == GOLDEN[name]["num_records"]
    assert out.getvalue() == golden


# --------------------------------------------------------------------------- round trips


LARGE = random.Random(7).randbytes(3000)


@pytest.mark.parametrize("compressor", list(Compressor), ids=lambda c: c.name)
@pytest.mark.parametrize("max_chunk_bytes", [64, 1 << 20])
def test_round_trip(tmp_path: Path, compressor: Compressor, max_chunk_bytes: int) -> None:
    big = random.Random(8).randbytes((1 << 20) + 100)  # larger than the default chunk
    compressible = b"abc" * 100_000  # several 64 KiB snappy frames of compressed data
    records = [b"", b""] + mixed_records(300, seed=1) + [LARGE, b"", big, b"x", LARGE, b""]
    records += [compressible, b"", compressible[:70_000]]
    path = tmp_path / "rt.recordio"
    assert write_records(
        str(path), records, compressor=compressor, max_chunk_bytes=max_chunk_bytes
    ) == len(records)
    assert list(read_records(str(path))) == records
    index = read_index(str(path))
    assert index.num_records == len(records)
    assert {c.compressor for c in index.chunks} == {compressor}
    assert sum(c.num_records for c in index.chunks) == len(records)
    # Chunks respect the size limit unless they hold one oversized record.
    blob = path.read_bytes()
    for c in index.chunks:
        payload = blob[c.offset + HEADER_SIZE : c.end_offset]
        raw = rio._DECOMPRESS[compressor](memoryview(payload), rio._Scratch())
        assert len(raw) <= max_chunk_bytes or c.num_records == 1
    if max_chunk_bytes == 64:
        assert len(index.chunks) > 100


def test_round_trip_through_urls_and_file_objects(tmp_path: Path) -> None:
    records = mixed_records(200, seed=2)
    targets = [
        f"memory://{tmp_path.name}/a.recordio",
        f"file://{tmp_path}/b.recordio",
        str(tmp_path / "c"),
    ]
    for url in targets:
        write_records(url, records, max_chunk_bytes=200)
        assert list(read_records(url)) == records
    blobs = {read_url(u) for u in targets}
    assert len(blobs) == 1  # same bytes whatever the destination

    buf = io.BytesIO()
    with RecordIOWriter(buf, max_chunk_bytes=200) as w:
        for r in records:
            w.write(bytearray(r))
        assert w.num_records == len(records)
    assert not buf.closed  # a caller's file object is left open
    assert buf.getvalue() == blobs.pop()


def test_empty_file_has_no_records(tmp_path: Path) -> None:
    path = tmp_path / "empty.recordio"
    assert write_records(str(path), []) == 0
    assert path.read_bytes() == b""
    assert count_records(str(path)) == 0
    with RecordIOReader(str(path)) as r:
        assert list(r) == []
        assert list(r.read(0, 10)) == []
        with pytest.raises(ValueError):
            r.read(1)


def test_writer_rejects_bad_input(tmp_path: Path) -> None:
    w = RecordIOWriter(str(tmp_path / "w.recordio"))
    with pytest.raises(TypeError):
        w.write("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        w.write(5)  # type: ignore[arg-type]
    w.close()
    with pytest.raises(ValueError):
        w.write(b"late")
    with pytest.raises(ValueError):
        RecordIOWriter(io.BytesIO(), max_chunk_bytes=0)


@pytest.mark.parametrize("url_kind", ["local", "memory"])
def test_writer_removes_its_file_when_the_block_raises(tmp_path: Path, url_kind: str) -> None:
    url = str(tmp_path / "partial.recordio") if url_kind == "local" else "memory://p/partial.rio"
    with pytest.raises(RuntimeError, match="boom"):
        with RecordIOWriter(url, max_chunk_bytes=16) as w:
            for r in mixed_records(50, seed=3):
                w.write(r)  # several chunks already written
            raise RuntimeError("boom")
    fs, path = fsspec.core.url_to_fs(url)
    assert not fs.exists(path)

    def failing() -> Iterator[bytes]:
        yield b"one"
        raise OSError("source died")

    with pytest.raises(OSError, match="source died"):
        write_records(url, failing())
    assert not fs.exists(path)


# --------------------------------------------------------------------------- ranges


@pytest.fixture(scope="module")
def many_chunks(tmp_path_factory: pytest.TempPathFactory) -> dict[Compressor, Path]:
    out = {}
    records = mixed_records(400, seed=4)
    for comp in Compressor:
        path = tmp_path_factory.mktemp("rng") / f"{comp.name}.recordio"
        write_records(str(path), records, compressor=comp, max_chunk_bytes=128)
        out[comp] = path
    return out


@pytest.mark.parametrize("compressor", list(Compressor), ids=lambda c: c.name)
def test_range_reads_match_full_read_slices(
    many_chunks: dict[Compressor, Path], compressor: Compressor
) -> None:
    path = str(many_chunks[compressor])
    with RecordIOReader(path) as reader:
        full = list(reader)
        n = reader.num_records
        assert n == 400 and len(reader.index.chunks) > 40
        firsts = [c.first_record for c in reader.index.chunks]
        edges = sorted(
            {0, 1, n - 1, n} | {f + d for f in firsts for d in (-1, 0, 1) if 0 <= f + d <= n}
        )
        pairs = {(s, e) for s in edges for e in edges if s <= e and e - s < 12}
        rnd = random.Random(5)
        pairs |= {tuple(sorted((rnd.randint(0, n), rnd.randint(0, n)))) for _ in range(600)}
        pairs |= {(s, n + 7) for s in (0, 5, n - 1, n)}  # end clipped to num_records
        for s, e in sorted(pairs):
            assert list(reader.read(s, e)) == full[s:e], (s, e)
            expected_chunks = tuple(
                c
                for c in reader.index.chunks
                if s < e and c.first_record < e and c.first_record + c.num_records > s
            )
            assert reader.index.chunk_range(s, e) == expected_chunks, (s, e)
        assert list(reader.read(37)) == full[37:]
    assert list(read_records(path, 100, 133)) == full[100:133]


def test_range_arguments_are_checked_when_read_is_called(
    many_chunks: dict[Compressor, Path],
) -> None:
    with RecordIOReader(str(many_chunks[Compressor.SNAPPY])) as reader:
        n = reader.num_records
        for start, end in [(n + 1, None), (5, 4), (-1, 3), (0, -1)]:
            with pytest.raises(ValueError) as exc:
                reader.read(start, end)  # no iteration needed
            assert not isinstance(exc.value, RecordIOError)
        assert list(reader.read(n)) == [] and list(reader.read(n, n + 3)) == []
    with pytest.raises(ValueError, match="past the end"):
        read_records(str(many_chunks[Compressor.SNAPPY]), n + 1)
    with pytest.raises(ValueError, match="closed"):
        reader.read()


def test_index_reads_headers_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 100 records of 10 bytes = 14 bytes each with the length prefix: 4 per 56-byte chunk.
    path = tmp_path / "hdr.recordio"
    records = [b"%010d" % i for i in range(100)]
    write_records(str(path), records, max_chunk_bytes=56)

    reads: list[int] = []
    real_open = rio._open_for_read

    class Counting:
        def __init__(self, f: Any) -> None:
            self._f = f

        def read(self, n: int = -1) -> bytes:
            data = self._f.read(n)
            reads.append(len(data))
            return data

        def __getattr__(self, name: str) -> Any:
            return getattr(self._f, name)

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self._f.close()

    def broken(payload: memoryview, scratch: Any) -> bytes:
        raise AssertionError("index building must not decompress")

    monkeypatch.setattr(rio, "_open_for_read", lambda fs, p: Counting(real_open(fs, p)))
    monkeypatch.setattr(rio, "_DECOMPRESS", dict.fromkeys(Compressor, broken))
    index = read_index(str(path))
    assert len(index.chunks) == 25
    assert [c.num_records for c in index.chunks] == [4] * 25
    assert [c.first_record for c in index.chunks] == list(range(0, 100, 4))
    assert reads == [HEADER_SIZE] * 25  # one 20-byte read per chunk, payloads skipped
    assert index.chunk_range(10, 13) == (index.chunks[2], index.chunks[3])


@pytest.fixture()
def decompressed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The payload sizes of the snappy chunks decompressed from now on."""
    seen: list[int] = []
    real = rio._DECOMPRESS[Compressor.SNAPPY]

    def spy(payload: memoryview, scratch: Any) -> Any:
        seen.append(len(payload))
        return real(payload, scratch)

    monkeypatch.setitem(rio._DECOMPRESS, Compressor.SNAPPY, spy)
    return seen


def test_range_read_fetches_only_overlapping_chunks(
    tmp_path: Path, decompressed: list[int]
) -> None:
    path = tmp_path / "few.recordio"
    write_records(str(path), [b"%010d" % i for i in range(100)], max_chunk_bytes=56)
    index = read_index(str(path))
    seen = decompressed
    with RecordIOReader(str(path), index=index) as r:
        assert list(r.read(10, 13)) == [b"%010d" % i for i in range(10, 13)]
    assert len(seen) == 2  # chunks 2 (records 8..11) and 3 (12..15)


def test_a_reader_keeps_its_latest_chunks_for_the_next_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decompressed: list[int]
) -> None:
    """Consecutive tasks share the chunk at their boundary: it is decompressed once, and the
    kept chunks stay within CACHED_CHUNK_BYTES."""
    path = tmp_path / "kept.recordio"
    records = [b"%010d" % i for i in range(100)]
    write_records(str(path), records, max_chunk_bytes=56)  # 4 records (56 bytes) a chunk
    monkeypatch.setattr(rio, "CACHED_CHUNK_BYTES", 2 * 56)
    with RecordIOReader(str(path)) as r:
        assert list(r.read(0, 6)) == records[0:6]  # chunks 0 and 1
        assert list(r.read(6, 10)) == records[6:10]  # chunk 1 kept, chunk 2 read
        assert len(decompressed) == 3
        assert list(r.read(0, 2)) == records[0:2]  # chunk 0 was dropped for chunk 2
        assert len(decompressed) == 4
        assert list(r.read(9, 11)) == records[9:11]  # chunk 2 kept
        assert len(decompressed) == 4
        assert list(r) == records  # every read takes its own copies, kept chunks or not
        monkeypatch.setattr(rio, "CACHED_CHUNK_BYTES", 55)  # a chunk too large to keep
        before = len(decompressed)
        assert list(r.read(40, 44)) == records[40:44]
        assert list(r.read(40, 44)) == records[40:44]
        assert len(decompressed) == before + 2
    assert r._cached == {}  # closing drops them


def test_a_kept_chunk_is_checked_when_read_first(tmp_path: Path) -> None:
    """A chunk that fails its checks is never kept: every read of it raises."""
    path = tmp_path / "bad.recordio"
    payload = struct.pack("<I", 3) + b"abc" + struct.pack("<I", 9) + b"de"  # overruns
    header = struct.pack("<IIIII", rio.MAGIC, zlib.crc32(payload), 0, len(payload), 2)
    path.write_bytes(header + payload)
    with RecordIOReader(str(path)) as r:
        for _ in range(2):
            with pytest.raises(RecordIOError, match="overruns"):
                list(r.read(0, 1))
        assert r._cached == {}


def test_files_without_readinto_are_read_too(
    many_chunks: dict[Compressor, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(many_chunks[Compressor.SNAPPY])
    expected = list(read_records(path, 10, 300))

    class ReadOnly:
        def __init__(self, f: Any) -> None:
            self.read, self.seek, self.tell, self.close = f.read, f.seek, f.tell, f.close

    real_open = rio._open_for_read
    monkeypatch.setattr(rio, "_open_for_read", lambda fs, p: ReadOnly(real_open(fs, p)))
    with RecordIOReader(path) as r:
        assert not hasattr(r._file, "readinto")
        assert list(r.read(10, 300)) == expected


# --------------------------------------------------------------------------- corruption


def assert_recordio_error(path: Path, *words: str) -> RecordIOError:
    with pytest.raises(RecordIOError) as exc:
        list(read_records(str(path)))
    msg = str(exc.value)
    assert str(path) in msg and "re-generate" in msg, msg
    for w in words:
        assert w in msg, msg
    return exc.value


@pytest.fixture()
def small_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.recordio"
    write_records(str(path), mixed_records(30, seed=6, max_len=20), max_chunk_bytes=60)
    assert len(chunk_offsets(path)) >= 5
    return path


def test_truncation_is_detected_except_at_chunk_boundaries(
    small_file: Path, tmp_path: Path
) -> None:
    blob = small_file.read_bytes()
    full = list(read_records(str(small_file)))
    offsets = chunk_offsets(small_file)
    cut = tmp_path / "cut.recordio"
    for size in range(1, len(blob)):
        cut.write_bytes(blob[:size])
        if size in offsets:
            # The format has no footer: a file cut exactly between chunks is a valid, shorter
            # file. Callers publish files atomically so readers never see one.
            got = list(read_records(str(cut)))
            assert got == full[: len(got)] and len(got) < len(full)
        else:
            err = assert_recordio_error(cut, "truncated")
            assert err.chunk is not None and err.offset is not None


def test_truncated_golden_file(tmp_path: Path) -> None:
    blob = (DATA / "text-1000.recordio").read_bytes()
    cut = tmp_path / "text-cut.recordio"
    for size in (3, 19, 20, 21, 1000, len(blob) - 1):
        cut.write_bytes(blob[:size])
        assert_recordio_error(cut, "truncated", "chunk 0 at byte offset 0")
        with pytest.raises(RecordIOError):
            count_records(str(cut))  # detected from the headers alone


def test_flipped_payload_byte_fails_crc(small_file: Path, tmp_path: Path) -> None:
    blob = small_file.read_bytes()
    headers = {o + k for o in chunk_offsets(small_file) for k in range(HEADER_SIZE)}
    bad = tmp_path / "flip.recordio"
    for pos in range(len(blob)):
        if pos in headers:
            continue
        bad.write_bytes(blob[:pos] + bytes([blob[pos] ^ 0xFF]) + blob[pos + 1 :])
        assert_recordio_error(bad, "CRC mismatch")


@pytest.mark.parametrize("compressor", list(Compressor), ids=lambda c: c.name)
def test_flipped_header_byte_is_detected(compressor: Compressor, tmp_path: Path) -> None:
    good = tmp_path / "good.recordio"
    write_records(
        str(good), mixed_records(30, seed=6, max_len=20), compressor=compressor, max_chunk_bytes=60
    )
    blob = good.read_bytes()
    bad = tmp_path / "flip.recordio"
    for o in chunk_offsets(good):
        for k in range(HEADER_SIZE):
            for mask in (0xFF, 0x01):
                pos = o + k
                bad.write_bytes(blob[:pos] + bytes([blob[pos] ^ mask]) + blob[pos + 1 :])
                assert_recordio_error(bad)


def test_wrong_magic(tmp_path: Path) -> None:
    notrio = tmp_path / "notes.txt"
    notrio.write_bytes(b"this is a text file, definitely not RecordIO\n")
    assert_recordio_error(notrio, "bad magic", "chunk 0 at byte offset 0")
    blob = bytearray((DATA / "text-1000.recordio").read_bytes())
    blob[0:4] = struct.pack("<I", 0x04030201)  # big-endian magic
    bad = tmp_path / "be.recordio"
    bad.write_bytes(bytes(blob))
    assert_recordio_error(bad, "bad magic number 0x04030201")


def chunk(payload: bytes, n: int, compressor: int = 0, crc: int | None = None) -> bytes:
    crc = zlib.crc32(payload) if crc is None else crc
    return struct.pack("<5I", 0x01020304, crc, compressor, len(payload), n) + payload


def framed(*records: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(r)) + r for r in records)


@pytest.mark.parametrize(
    ("blob", "words"),
    [
        (framed(b"abc", b"de") + struct.pack("<I", 99) + b"xyz", ["chunk 1", "overruns"]),
        (framed(b"abc", b"de"), ["chunk 1", "fewer than the 3 records"]),
        (framed(b"abc", b"de", b"f") + b"\x00", ["chunk 1", "count mismatch"]),
        (framed(b"abc", b"de", b"f")[:-1], ["chunk 1", "overruns"]),
    ],
)
def test_bad_record_framing_with_valid_crc(tmp_path: Path, blob: bytes, words: list[str]) -> None:
    path = tmp_path / "frame.recordio"
    path.write_bytes(chunk(framed(b"ok"), 1) + chunk(blob, 3))
    assert_recordio_error(path, *words)
    with RecordIOReader(str(path)) as r:  # the intact first chunk still reads
        assert list(r.read(0, 1)) == [b"ok"]


def test_bad_compressed_payloads(tmp_path: Path) -> None:
    path = tmp_path / "comp.recordio"
    path.write_bytes(chunk(b"not snappy at all", 1, compressor=1))
    assert_recordio_error(path, "SNAPPY payload does not decompress")
    path.write_bytes(chunk(b"not gzip", 1, compressor=2))
    assert_recordio_error(path, "GZIP payload does not decompress")
    path.write_bytes(chunk(framed(b"x"), 1, compressor=7))
    assert_recordio_error(path, "unknown compressor id 7")
    path.write_bytes(chunk(framed(b"x"), 1_000_000))
    assert_recordio_error(path, "header claims 1000000 records")
    raw = bytes(cramjam.snappy.compress_raw(framed(b"x")))  # raw snappy is not what Go writes
    path.write_bytes(chunk(raw, 1, compressor=1))
    assert_recordio_error(path, "does not decompress")


def test_snappy_padding_and_skippable_frames_are_accepted(tmp_path: Path) -> None:
    """The framing spec allows padding (0xfe), skippable (0x80-0xfd) and repeated stream ids."""
    records = [b"hello", b"", b"world" * 50]
    stream = bytes(cramjam.snappy.compress(framed(*records)))
    sid, frames = stream[:10], stream[10:]
    assert sid == SNAPPY_STREAM_ID
    odd = sid + b"\xfe\x03\x00\x00pad" + b"\x80\x02\x00\x00zz" + frames + sid
    path = tmp_path / "odd.recordio"
    path.write_bytes(chunk(framed(b"first"), 1) + chunk(odd, 3, compressor=1))
    assert list(read_records(str(path))) == [b"first", *records]
    path.write_bytes(chunk(sid + b"\x05\x01\x00\x00x" + frames, 3, compressor=1))
    assert_recordio_error(path, "reserved snappy frame type 0x05")


def test_stale_index_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "stale.recordio"
    write_records(str(path), [b"a", b"b"], max_chunk_bytes=5)
    index = read_index(str(path))
    with path.open("ab") as f:
        f.write(chunk(framed(b"c"), 1))
    with pytest.raises(RecordIOError, match="index was built"):
        RecordIOReader(str(path), index=index)
    same_size = tmp_path / "same.recordio"
    write_records(str(same_size), [b"c", b"d"], max_chunk_bytes=5)  # same sizes, other CRCs
    assert same_size.stat().st_size == index.file_size
    with (
        RecordIOReader(str(same_size), index=index) as r,
        pytest.raises(RecordIOError, match="differs"),
    ):
        list(r)


# --------------------------------------------------------------------------- memory:// and gs://


@pytest.fixture(scope="module")
def gcs() -> Iterator[GCSEmulator]:
    with gcs_emulator(bucket="recordio-test") as emulator:
        yield emulator


def test_memory_and_gcs_urls_read_identical_ranges(gcs: GCSEmulator, tmp_path: Path) -> None:
    records = mixed_records(500, seed=9, max_len=300)
    mem_url = "memory://rio-gcs/src.recordio"
    write_records(mem_url, records, max_chunk_bytes=1024)
    blob = read_url(mem_url)

    uploaded = gcs.url("uploaded.recordio")
    gcs.fs.pipe(uploaded, blob)
    written = gcs.url("written.recordio")  # written by our writer straight to gs://
    write_records(written, records, max_chunk_bytes=1024, storage_options=gcs.storage_options)
    assert gcs.fs.cat_file(written) == blob

    mem_index = read_index(mem_url)
    gs_index = read_index(uploaded, storage_options=gcs.storage_options)
    assert gs_index.chunks == mem_index.chunks and len(gs_index.chunks) > 20
    with (
        RecordIOReader(mem_url) as mem,
        RecordIOReader(uploaded, storage_options=gcs.storage_options) as gs,
        RecordIOReader(written, fs=gcs.fs, index=gs_index) as gs2,
    ):
        for s, e in [(0, 500), (0, 1), (123, 321), (250, 251), (499, 600), (500, 500)]:
            expected = records[s:e]
            assert list(mem.read(s, e)) == expected
            assert list(gs.read(s, e)) == expected
            assert list(gs2.read(s, e)) == expected

    gcs.fs.pipe(gcs.url("text-1000.recordio"), (DATA / "text-1000.recordio").read_bytes())
    got = list(read_records(gcs.url("text-1000.recordio"), storage_options=gcs.storage_options))
    assert [sha256(r) for r in got] == GOLDEN["text-1000.recordio"]["sha256_of_records"]


def test_gcs_truncated_object_is_detected(gcs: GCSEmulator) -> None:
    blob = (DATA / "random-200.recordio").read_bytes()
    url = gcs.url("cut.recordio")
    gcs.fs.pipe(url, blob[:-10])
    with pytest.raises(RecordIOError, match="cut.recordio.*truncated"):
        count_records(url, storage_options=gcs.storage_options)
