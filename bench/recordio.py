"""Benchmark RecordIO (elasticdl.runtime.data.recordio) against TFRecord (tf.io / tf.data).

    python bench/recordio.py [--quick] [--dir DIR]

Figures, all on 1 KiB random (incompressible) records in local files (page cache warm):
  * write throughput: RecordIOWriter (snappy, 1 MiB chunks; also uncompressed) vs
    tf.io.TFRecordWriter (uncompressed);
  * sequential read throughput: RecordIOReader iterated record by record vs
    tf.data.TFRecordDataset(...).batch(256) iterated with .numpy() per batch (with and
    without .prefetch(AUTOTUNE); the ratio is taken against the faster of the two);
  * a 1,000-record range read in a 100,000-record file: with the index already built (median
    of repeats), including the index build, and TFRecordDataset.skip().take() for contrast.

Prints one `RESULT <name> <value> target=<target>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from elasticdl.runtime.data.recordio import Compressor, RecordIOReader, write_records  # noqa: E402

RECORD_BYTES = 1024
RANGE_FILE_RECORDS = 100_000
RANGE_LEN = 1_000


def make_records(n: int, seed: int = 0) -> list[bytes]:
    """`n` random records of RECORD_BYTES bytes each."""
    blob = np.random.default_rng(seed).integers(0, 256, n * RECORD_BYTES, dtype=np.uint8).tobytes()
    return [blob[i * RECORD_BYTES : (i + 1) * RECORD_BYTES] for i in range(n)]


def timed(fn: Callable[[], int], repeats: int) -> tuple[float, int]:
    """Median wall time of `repeats` calls of fn, and the count fn returned."""
    times = []
    count = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        count = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records and repeats (< 1 min)")
    ap.add_argument("--dir", help="where to write the benchmark files (default: a temp dir)")
    args = ap.parse_args(argv)

    n = 30_000 if args.quick else RANGE_FILE_RECORDS
    repeats = 2 if args.quick else 5
    range_repeats = 30 if args.quick else 200

    import tensorflow as tf

    tmp = tempfile.TemporaryDirectory(dir=args.dir)
    d = Path(tmp.name)
    results: list[tuple[str, float, str]] = []

    def result(name: str, value: float, target: str = "none") -> None:
        results.append((name, value, target))
        print(f"  {name} = {value:.4g}", flush=True)

    print(f"records: {n} x {RECORD_BYTES} B; repeats {repeats}; files in {d}", flush=True)
    records = make_records(n)
    mb = n * RECORD_BYTES / 1e6
    rio_path = str(d / "bench.recordio")
    tf_path = str(d / "bench.tfrecord")

    # ---- write
    def write_rio() -> int:
        return write_records(rio_path, records)

    def write_tf() -> int:
        with tf.io.TFRecordWriter(tf_path) as w:
            for r in records:
                w.write(r)
        return n

    t, _ = timed(write_rio, repeats)
    result("write_recordio_records_per_s", n / t)
    result("write_recordio_MB_per_s", mb / t)
    none_path = str(d / "bench-none.recordio")
    t, _ = timed(lambda: write_records(none_path, records, compressor=Compressor.NONE), repeats)
    result("write_recordio_uncompressed_records_per_s", n / t)
    os.remove(none_path)
    t, _ = timed(write_tf, repeats)
    result("write_tfrecord_records_per_s", n / t)
    result("write_tfrecord_MB_per_s", mb / t)

    # ---- sequential read
    def read_rio() -> int:
        count = 0
        with RecordIOReader(rio_path) as r:
            for _rec in r:
                count += 1
        return count

    def read_tf(prefetch: bool) -> Callable[[], int]:
        def run() -> int:
            ds = tf.data.TFRecordDataset(tf_path).batch(256)
            if prefetch:
                ds = ds.prefetch(tf.data.AUTOTUNE)
            count = 0
            for batch in ds:
                count += len(batch.numpy())
            return count

        return run

    t_rio, c = timed(read_rio, repeats)
    assert c == n, c
    result("read_recordio_records_per_s", n / t_rio)
    result("read_recordio_MB_per_s", mb / t_rio)
    t_tf, c = timed(read_tf(False), repeats)
    assert c == n, c
    result("read_tfrecord_batch256_records_per_s", n / t_tf)
    t_tfp, c = timed(read_tf(True), repeats)
    assert c == n, c
    result("read_tfrecord_batch256_prefetch_records_per_s", n / t_tfp)
    result("read_tfrecord_best_MB_per_s", mb / min(t_tf, t_tfp))
    result("read_ratio_recordio_over_tfrecord", min(t_tf, t_tfp) / t_rio, ">=1.0")

    # ---- range read in a 100,000-record file
    if n != RANGE_FILE_RECORDS:
        records = make_records(RANGE_FILE_RECORDS, seed=1)
        write_records(rio_path, records)
        with tf.io.TFRecordWriter(tf_path) as w:
            for r in records:
                w.write(r)
    rnd = random.Random(0)
    starts = [rnd.randrange(0, RANGE_FILE_RECORDS - RANGE_LEN) for _ in range(range_repeats)]

    with RecordIOReader(rio_path) as reader:
        assert reader.num_records == RANGE_FILE_RECORDS
        print(f"  range file: {len(reader.index.chunks)} chunks", flush=True)
        times = []
        for s in starts:
            t0 = time.perf_counter()
            got = list(reader.read(s, s + RANGE_LEN))
            times.append(time.perf_counter() - t0)
            assert got[0] == records[s] and got[-1] == records[s + RANGE_LEN - 1]
    result("range_read_1000_of_100000_ms", statistics.median(times) * 1e3, "<5")
    result("range_read_1000_of_100000_p90_ms", statistics.quantiles(times, n=10)[-1] * 1e3)

    def with_index(s: int) -> int:
        with RecordIOReader(rio_path) as r:
            return len(list(r.read(s, s + RANGE_LEN)))

    times = []
    for s in starts[: max(range_repeats // 4, 10)]:
        t0 = time.perf_counter()
        assert with_index(s) == RANGE_LEN
        times.append(time.perf_counter() - t0)
    result("range_read_1000_incl_index_build_ms", statistics.median(times) * 1e3)

    def tf_skip_take(s: int) -> int:
        ds = tf.data.TFRecordDataset(tf_path).skip(s).take(RANGE_LEN).batch(RANGE_LEN)
        return sum(len(b.numpy()) for b in ds)

    times = []
    for s in starts[:5]:
        t0 = time.perf_counter()
        assert tf_skip_take(s) == RANGE_LEN
        times.append(time.perf_counter() - t0)
    result("range_read_1000_tfrecord_skip_take_ms", statistics.median(times) * 1e3)

    tmp.cleanup()
    print()
    for name, value, target in results:
        print(f"RESULT {name} {value:.4g} target={target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
