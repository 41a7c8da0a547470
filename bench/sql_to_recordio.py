"""Benchmark SQL -> RecordIO conversion (`elasticdl.runtime.sql.convert`) against the naive path.

    python -P bench/sql_to_recordio.py [--quick] [--dir DIR] [--dbs sqlite,postgresql]
                                       [--rows 1000000] [--naive-rows 200000]
                                       [--text-rows 200000]

Two generated tables (same seeded values in every database):

  * numeric: 14 columns: 4 integer (i0..i3) and 10 real (f0..f8, label);
  * text:    11 columns: 4 text (a color of 8, a city of 5,000, a 16-hex-digit id, a sentence of
             3-8 words) and 7 numeric (2 integer, 5 real with the label).

Databases: SQLite (a file in the benchmark directory) and PostgreSQL (a throwaway server on
127.0.0.1 from tests/support/db_servers.py, `postgresql_server()`: fsync off, in memory when
/dev/shm has room). Tables are filled with executemany (SQLite) or COPY (PostgreSQL); not timed.

Two paths, each run in a fresh subprocess (so its peak RSS, VmHWM, is its own; imports,
the SQLAlchemy dialect and driver included, are done before the clock starts):

  * **ours**: `convert(db_url, "SELECT <columns> FROM <table> [LIMIT n]", output,
    records_per_file=100_000, label="label")`: server-side cursor, 4,096-row batches, rows
    encoded straight to tf.train.Example bytes, snappy RecordIO shards, column statistics and
    schema.json, published by rename;
  * **naive**: `pandas.read_sql(sql, engine)` (everything in memory), then per row
    (`itertuples`) one `tf.train.Example` built with the protobuf API (Int64List / FloatList /
    BytesList per column), `SerializeToString()`, `tf.io.TFRecordWriter` (uncompressed; a new
    file every 100,000 records). No statistics, no schema, no NULL checks.

Figures: rows/s (rows / time of the conversion call), peak RSS of the child, and ours/naive
ratios at the same row count. Ours runs on `--rows` rows of the numeric table (1,000,000; its
peak RSS is the 500 MB target) and on 100,000 (RSS must stay flat); the ratios are taken at
`--naive-rows` (200,000: pandas holds every row, so the naive path is run on fewer rows and its
RSS grows with them). The text table has `--text-rows` rows (200,000).

Profile of our path (separate runs, `--naive-rows` rows): (a) wall-time breakdown from timers
wrapped around convert's stages -- fetch (`fetchmany` through SQLAlchemy), clean (row copy, NULL
check), normalize (kind checks, float coercion), statistics, encode (ExampleEncoder), RecordIO
write (buffering), compression (snappy), chunk flush (CRC + file write), publish, and the rest
(the per-row loop itself); the timers' own cost is calibrated and taken out of "rest"; plus the
raw driver fetch rate (DB-API `fetchmany(4096)` on the same query, no SQLAlchemy) for contrast;
(b) on SQLite, cProfile's top functions by own time.

The machine has 2 shared cores: the load average is printed before each run.

`--quick`: SQLite only, 100,000 numeric rows and 30,000 text rows (naive on the same counts), the
timer profile of the numeric table, no cProfile (30-40 s). The full run takes ~5-6 minutes.

Prints one `RESULT <name> <value> target=<target>` line per figure at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import loadavg  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO = Path(__file__).resolve().parent.parent
RECORDS_PER_FILE = 100_000
FILL_BATCH = 50_000
SQL_TYPES = {
    "int": {"sqlite": "INTEGER", "postgresql": "BIGINT"},
    "real": {"sqlite": "REAL", "postgresql": "DOUBLE PRECISION"},
    "text": {"sqlite": "TEXT", "postgresql": "TEXT"},
}


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, int | real | text)
    label: str = "label"

    def select(self, limit: int | None = None) -> str:
        cols = ", ".join(name for name, _ in self.columns)
        return f"SELECT {cols} FROM {self.name}" + (f" LIMIT {limit}" if limit else "")


NUMERIC = Table(
    "numeric14",
    tuple([(f"i{k}", "int") for k in range(4)] + [(f"f{k}", "real") for k in range(9)])
    + (("label", "real"),),
)
TEXT = Table(
    "text11",
    (
        ("color", "text"),
        ("n0", "int"),
        ("city", "text"),
        ("f0", "real"),
        ("uid", "text"),
        ("f1", "real"),
        ("n1", "int"),
        ("note", "text"),
        ("f2", "real"),
        ("f3", "real"),
        ("label", "real"),
    ),
)
COLORS = ["red", "green", "blue", "yellow", "black", "white", "orange", "purple"]
WORDS = (
    "the a quick slow brown lazy dog cat fox jumps runs over under table chair data model "
    "train test value row column query server client fast small large green blue red river "
    "stone cloud rain sun moon star tree leaf root branch seed field city road car train"
).split()


def generate(table: Table, start: int, n: int) -> list[tuple[Any, ...]]:
    """Rows start..start+n of `table` (seeded by position: the same in every database)."""
    import numpy as np

    rng = np.random.default_rng([7, start])
    if table is NUMERIC:
        ints = [
            rng.integers(18, 91, n),
            rng.integers(0, 1_000_000, n),
            rng.integers(-500, 501, n),
            rng.integers(0, 2, n),
        ]
        scales = np.array([1, 10, 100, 0.01, 1000, 5, 50, 0.5, 3], dtype=np.float64)
        reals = rng.normal(size=(9, n)) * scales[:, None]
        label = reals[0] + 0.1 * reals[1] - 0.02 * ints[0] + rng.normal(scale=0.1, size=n)
        columns = [c.tolist() for c in ints] + [c.tolist() for c in reals] + [label.tolist()]
        return list(zip(*columns, strict=True))
    reals = rng.normal(size=(4, n)) * np.array([1.0, 20.0, 0.1, 300.0])[:, None]
    label = reals[0] - 0.05 * reals[1] + rng.normal(scale=0.1, size=n)
    color = [COLORS[k] for k in rng.integers(0, len(COLORS), n).tolist()]
    city = [f"city_{k:04d}" for k in rng.integers(0, 5000, n).tolist()]
    uid = [f"{k:016x}" for k in rng.integers(0, 1 << 62, n).tolist()]
    lengths = rng.integers(3, 9, n).tolist()
    words = rng.integers(0, len(WORDS), (n, 8)).tolist()
    note = [" ".join(WORDS[w] for w in ws[:m]) for ws, m in zip(words, lengths, strict=True)]
    return list(
        zip(
            color,
            rng.integers(0, 100, n).tolist(),
            city,
            reals[0].tolist(),
            uid,
            reals[1].tolist(),
            rng.integers(0, 1_000_000, n).tolist(),
            note,
            reals[2].tolist(),
            reals[3].tolist(),
            label.tolist(),
            strict=True,
        )
    )


def batches(table: Table, rows: int) -> Iterator[list[tuple[Any, ...]]]:
    for start in range(0, rows, FILL_BATCH):
        yield generate(table, start, min(FILL_BATCH, rows - start))


def create_sql(table: Table, kind: str) -> str:
    cols = ", ".join(f"{name} {SQL_TYPES[t][kind]} NOT NULL" for name, t in table.columns)
    return f"CREATE TABLE {table.name} ({cols})"


def fill_sqlite(path: Path, table: Table, rows: int) -> None:
    import sqlite3

    con = sqlite3.connect(path)
    try:
        con.execute(create_sql(table, "sqlite"))
        marks = ", ".join("?" * len(table.columns))
        for batch in batches(table, rows):
            con.executemany(f"INSERT INTO {table.name} VALUES ({marks})", batch)
        con.commit()
    finally:
        con.close()


def fill_postgresql(db: Any, table: Table, rows: int) -> None:
    import psycopg

    with psycopg.connect(
        host=db.host, port=db.port, user=db.user, password=db.password, dbname=db.name
    ) as con:
        con.execute(create_sql(table, "postgresql"))
        cols = ", ".join(name for name, _ in table.columns)
        with con.cursor() as cur:
            for batch in batches(table, rows):
                with cur.copy(f"COPY {table.name} ({cols}) FROM STDIN") as copy:
                    for row in batch:
                        copy.write_row(row)
        con.execute(f"ANALYZE {table.name}")


def rows_label(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


# --------------------------------------------------------------------------- child processes


def proc_status_mb(field: str) -> float | None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return None


def peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM, not ru_maxrss (Linux carries the parent's peak across
    fork + exec into ru_maxrss, so a child would report at least its parent's RSS)."""
    hwm = proc_status_mb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    return proc_status_mb("VmRSS") or 0.0


def warm_driver(url: str) -> None:
    """Import SQLAlchemy, the dialect and its driver before the clock starts."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1").fetchall()
    engine.dispose()


def run_ours(spec: dict[str, Any]) -> dict[str, Any]:
    from elasticdl.runtime.sql.convert import convert

    warm_driver(spec["url"])
    rss0 = current_rss_mb()
    t0 = time.perf_counter()
    result = convert(
        spec["url"],
        spec["sql"],
        spec["output"],
        records_per_file=RECORDS_PER_FILE,
        label=spec["label"],
    )
    seconds = time.perf_counter() - t0
    return {"rows": result.rows, "seconds": seconds, "rss_start_mb": rss0}


def run_naive(spec: dict[str, Any]) -> dict[str, Any]:
    import pandas as pd
    import sqlalchemy as sa
    import tensorflow as tf

    warm_driver(spec["url"])
    engine = sa.create_engine(spec["url"])
    out = Path(spec["output"])
    out.mkdir(parents=True)
    rss0 = current_rss_mb()
    t0 = time.perf_counter()
    df = pd.read_sql(spec["sql"], engine)
    t_read = time.perf_counter()
    names = [str(c) for c in df.columns]
    kinds = [
        "int64"
        if pd.api.types.is_integer_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c])
        else "float"
        if pd.api.types.is_float_dtype(df[c])
        else "bytes"
        for c in df.columns
    ]
    feature_type = tf.train.Feature
    writer = None
    count = 0
    for row in df.itertuples(index=False, name=None):
        if count % RECORDS_PER_FILE == 0:
            if writer is not None:
                writer.close()
            writer = tf.io.TFRecordWriter(str(out / f"data-{count // RECORDS_PER_FILE:05d}.tfrec"))
        feature = {}
        for name, kind, value in zip(names, kinds, row, strict=True):
            if kind == "int64":
                feature[name] = feature_type(int64_list=tf.train.Int64List(value=[value]))
            elif kind == "float":
                feature[name] = feature_type(float_list=tf.train.FloatList(value=[value]))
            else:
                feature[name] = feature_type(bytes_list=tf.train.BytesList(value=[value.encode()]))
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        writer.write(example.SerializeToString())
        count += 1
    if writer is not None:
        writer.close()
    seconds = time.perf_counter() - t0
    engine.dispose()
    from google.protobuf.internal import api_implementation

    return {
        "rows": count,
        "seconds": seconds,
        "read_sql_s": t_read - t0,
        "rss_start_mb": rss0,
        "protobuf": api_implementation.Type(),
    }


class Timers:
    """Wall-time accumulators for wrapped functions (nested ones are split out later)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        seconds, calls, clock = self.seconds, self.calls, time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[name] += clock() - t0
                calls[name] += 1

        return timed

    def wrap_iter(self, name: str, it: Iterator[Any]) -> Iterator[Any]:
        clock = time.perf_counter
        while True:
            t0 = clock()
            try:
                item = next(it)
            except StopIteration:
                self.seconds[name] += clock() - t0
                return
            self.seconds[name] += clock() - t0
            self.calls[name] += 1
            yield item


def timer_overhead_s(calls: int = 200_000) -> float:
    """Seconds a Timers wrapper adds per call (wrapped no-op minus bare no-op)."""

    def noop(x: Any) -> Any:
        return x

    wrapped = Timers().wrap("noop", noop)
    t0 = time.perf_counter()
    for i in range(calls):
        noop(i)
    t1 = time.perf_counter()
    for i in range(calls):
        wrapped(i)
    t2 = time.perf_counter()
    return max(0.0, ((t2 - t1) - (t1 - t0)) / calls)


def raw_fetch(url: str, sql: str, batch_rows: int = 4096) -> tuple[int, float]:
    """Rows and seconds of DB-API fetchmany(batch_rows) over `sql` (server-side cursor on PG)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    raw = engine.raw_connection()
    try:
        dbapi = raw.driver_connection
        if engine.dialect.name == "postgresql":
            cur = dbapi.cursor(name="bench_raw_fetch")
        else:
            cur = dbapi.cursor()
        t0 = time.perf_counter()
        cur.execute(sql)
        rows = 0
        while True:
            got = cur.fetchmany(batch_rows)
            if not got:
                break
            rows += len(got)
        seconds = time.perf_counter() - t0
        cur.close()
    finally:
        raw.close()
        engine.dispose()
    return rows, seconds


def run_profile(spec: dict[str, Any]) -> dict[str, Any]:
    """Our path with timers around each stage (see the module docstring)."""
    from elasticdl.runtime.data import recordio
    from elasticdl.runtime.sql import column_stats, convert, example_encoder

    warm_driver(spec["url"])
    timers = Timers()
    wrap = timers.wrap
    stream = convert._stream

    def timed_stream(db: str, sql: str, batch_rows: int) -> Any:
        names, batches, close = wrap("connect+execute", stream)(db, sql, batch_rows)
        return names, timers.wrap_iter("fetch", batches), close

    convert._stream = timed_stream
    convert._Columns.clean = wrap("clean", convert._Columns.clean)
    convert._Columns._normalize = wrap("normalize", convert._Columns._normalize)
    column_stats.NumericStats.update = wrap("stats", column_stats.NumericStats.update)
    column_stats.TextStats.update = wrap("stats", column_stats.TextStats.update)
    example_encoder.ExampleEncoder.encode = wrap("encode", example_encoder.ExampleEncoder.encode)
    convert._Shards.write = wrap("write", convert._Shards.write)
    recordio.RecordIOWriter._flush = wrap("flush", recordio.RecordIOWriter._flush)
    snappy = recordio.Compressor.SNAPPY
    recordio._COMPRESS[snappy] = wrap("compress", recordio._COMPRESS[snappy])
    convert._publish = wrap("publish", convert._publish)

    overhead = timer_overhead_s()
    t0 = time.perf_counter()
    result = convert.convert(
        spec["url"],
        spec["sql"],
        spec["output"],
        records_per_file=RECORDS_PER_FILE,
        label=spec["label"],
    )
    total = time.perf_counter() - t0
    s = timers.seconds
    n = timers.calls
    parts = {
        "connect+execute": s["connect+execute"],
        "fetch (driver cursor fetchmany)": s["fetch"],
        "clean (row copy, NULL check)": s["clean"] - s["normalize"] - n["normalize"] * overhead,
        "normalize (kind checks, float coercion)": s["normalize"]
        - s["stats"]
        - n["stats"] * overhead,
        "statistics (NumericStats/TextStats)": s["stats"],
        "encode (ExampleEncoder.encode)": s["encode"],
        "RecordIO write (buffering)": s["write"] - s["flush"] - n["flush"] * overhead,
        "snappy compress": s["compress"],
        "chunk flush (CRC32 + file write)": s["flush"] - s["compress"] - n["compress"] * overhead,
        "publish (rename)": s["publish"],
    }
    # Nested wrappers' cost was taken out of their callers above; top-level ones' out of "rest".
    top_calls = sum(n[k] for k in ("connect+execute", "clean", "encode", "write", "publish"))
    wrapped_calls = sum(n.values()) - n["fetch"]  # wrap_iter's cost is inside "fetch"
    parts["rest (per-row loop, progress, schema)"] = (
        total - sum(parts.values()) - top_calls * overhead
    )
    raw_rows, raw_s = raw_fetch(spec["url"], spec["sql"])
    return {
        "rows": result.rows,
        "seconds": total,
        "parts": parts,
        "timer_overhead_us": overhead * 1e6,
        "timer_overhead_s": wrapped_calls * overhead,
        "raw_fetch_rows": raw_rows,
        "raw_fetch_s": raw_s,
    }


def run_cprofile(spec: dict[str, Any]) -> dict[str, Any]:
    from elasticdl.runtime.sql.convert import convert

    warm_driver(spec["url"])
    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.enable()
    result = convert(
        spec["url"],
        spec["sql"],
        spec["output"],
        records_per_file=RECORDS_PER_FILE,
        label=spec["label"],
    )
    profiler.disable()
    seconds = time.perf_counter() - t0
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(spec.get("top", 16))
    lines = text.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    cut = [line.replace(str(REPO) + "/", "") for line in lines[start:] if line.strip()]
    return {"rows": result.rows, "seconds": seconds, "top": cut}


CHILDREN = {"ours": run_ours, "naive": run_naive, "profile": run_profile, "cprofile": run_cprofile}


def child_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    figures = CHILDREN[spec["path"]](spec)
    figures["peak_rss_mb"] = peak_rss_mb()
    print("CHILD " + json.dumps(figures), flush=True)
    return 0


def in_child(spec: dict[str, Any]) -> dict[str, Any]:
    argv = [sys.executable, "-P", str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    load = loadavg()
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"{spec['path']} subprocess failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("CHILD ")][-1]
    figures = json.loads(line[len("CHILD ") :])
    figures["process_s"] = time.perf_counter() - t0
    figures["load"] = load
    return figures


# --------------------------------------------------------------------------- parent


@contextlib.contextmanager
def database(kind: str, root: Path) -> Iterator[tuple[str, Callable[[Table, int], None]]]:
    """(SQLAlchemy URL, fill(table, rows)) of a fresh database of `kind`."""
    if kind == "sqlite":
        path = root / "bench.sqlite"
        yield f"sqlite:///{path}", lambda table, rows: fill_sqlite(path, table, rows)
        path.unlink(missing_ok=True)
        return
    sys.path.insert(0, str(REPO / "tests" / "support"))
    import db_servers

    with db_servers.postgresql_server() as server:
        db = server.database
        yield db.url, lambda table, rows: fill_postgresql(db, table, rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="SQLite, 100k/30k rows (< 1 min)")
    ap.add_argument("--dir", help="where to write databases and outputs (default: a temp dir)")
    ap.add_argument("--dbs", help="comma-separated: sqlite, postgresql (quick: sqlite)")
    ap.add_argument("--rows", type=int, help="numeric rows for our path (1,000,000; quick 100k)")
    ap.add_argument("--naive-rows", type=int, help="rows for the ratios (200,000; quick 100k)")
    ap.add_argument("--text-rows", type=int, help="text table rows (200,000; quick 30k)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child_main(args.child)

    import importlib.util

    if importlib.util.find_spec("pandas") is None:
        print("the naive baseline is pandas.read_sql: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    t_main = time.perf_counter()
    dbs = (args.dbs or ("sqlite" if args.quick else "sqlite,postgresql")).split(",")
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    naive_rows = min(args.naive_rows or (100_000 if args.quick else 200_000), rows)
    text_rows = args.text_rows or (30_000 if args.quick else 200_000)
    flat_rows = min(100_000, rows)
    tmp = tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-sql-")
    root = Path(tmp.name)
    print(
        f"numeric rows {rows:,} (naive and ratios {naive_rows:,}), text rows {text_rows:,}; "
        f"dbs {','.join(dbs)}; load average {loadavg()}; files in {root}",
        flush=True,
    )

    results: list[tuple[str, float, str]] = []
    table_rows: list[tuple[str, ...]] = []
    profiles: list[tuple[str, dict[str, Any]]] = []
    counter = iter(range(1_000_000))

    def result(name: str, value: float, target: str = "none") -> None:
        results.append((name, value, target))
        print(f"  {name} = {value:.4g}", flush=True)

    def run(kind: str, url: str, table: Table, path: str, n: int, total: int) -> dict[str, Any]:
        output = root / f"out-{next(counter)}"
        spec = {
            "path": path,
            "url": url,
            "sql": table.select(None if n >= total else n),
            "output": str(output),
            "label": table.label,
        }
        figures = in_child(spec)
        if figures["rows"] != n:
            raise RuntimeError(f"{path} wrote {figures['rows']} rows, expected {n}")
        figures["output_mb"] = dir_mb(output) if output.exists() else 0.0
        shutil.rmtree(output, ignore_errors=True)
        rate = n / figures["seconds"]
        figures["rows_per_s"] = rate
        extra = f"read_sql {figures['read_sql_s']:.1f} s" if "read_sql_s" in figures else ""
        table_rows.append(
            (
                kind,
                table.name,
                path,
                f"{n:,}",
                f"{figures['seconds']:.2f}",
                f"{rate:,.0f}",
                f"{figures['peak_rss_mb']:.0f}",
                f"{figures['rss_start_mb']:.0f}" if "rss_start_mb" in figures else "-",
                f"{figures['output_mb']:.0f}",
                figures["load"],
                extra,
            )
        )
        print(
            f"[{kind} {table.name} {path} {n:,} rows] {figures['seconds']:.2f} s, {rate:,.0f} "
            f"rows/s, peak RSS {figures['peak_rss_mb']:.0f} MB (before the call "
            f"{figures.get('rss_start_mb', 0):.0f}), output {figures['output_mb']:.0f} MB, "
            f"load {figures['load']} {extra}",
            flush=True,
        )
        return figures

    peak_1m: list[float] = []
    for kind in dbs:
        with database(kind, root) as (url, fill):
            t0 = time.perf_counter()
            fill(NUMERIC, rows)
            fill(TEXT, text_rows)
            print(f"[{kind}] filled tables in {time.perf_counter() - t0:.1f} s", flush=True)

            big = run(kind, url, NUMERIC, "ours", rows, rows)
            result(f"{kind}_numeric_rows_per_s", big["rows_per_s"], ">=60000")
            result(f"{kind}_peak_rss_mb_{rows_label(rows)}_rows", big["peak_rss_mb"], "<500")
            peak_1m.append(big["peak_rss_mb"])
            if flat_rows != rows:
                small = run(kind, url, NUMERIC, "ours", flat_rows, rows)
                result(f"{kind}_peak_rss_mb_{rows_label(flat_rows)}_rows", small["peak_rss_mb"])
            same = big if naive_rows == rows else run(kind, url, NUMERIC, "ours", naive_rows, rows)
            naive = run(kind, url, NUMERIC, "naive", naive_rows, rows)
            result(f"{kind}_numeric_naive_rows_per_s", naive["rows_per_s"])
            result(
                f"{kind}_numeric_naive_peak_rss_mb_{rows_label(naive_rows)}_rows",
                naive["peak_rss_mb"],
            )
            result(
                f"{kind}_numeric_ratio_vs_naive", same["rows_per_s"] / naive["rows_per_s"], ">=3"
            )

            ours_text = run(kind, url, TEXT, "ours", text_rows, text_rows)
            naive_text = run(kind, url, TEXT, "naive", text_rows, text_rows)
            result(f"{kind}_text_rows_per_s", ours_text["rows_per_s"])
            result(f"{kind}_text_naive_rows_per_s", naive_text["rows_per_s"])
            result(
                f"{kind}_text_ratio_vs_naive",
                ours_text["rows_per_s"] / naive_text["rows_per_s"],
                ">=3",
            )

            for table, n, total in ((NUMERIC, naive_rows, rows), (TEXT, text_rows, text_rows)):
                if args.quick and table is TEXT:
                    continue
                prof = run(kind, url, table, "profile", n, total)
                profiles.append((f"{kind} {table.name} {n:,} rows (timers)", prof))
                if kind == "sqlite" and not args.quick:
                    cprof = run(kind, url, table, "cprofile", n, total)
                    profiles.append((f"{kind} {table.name} {n:,} rows (cProfile)", cprof))
    if peak_1m:
        result(f"peak_rss_mb_{rows_label(rows)}_rows", max(peak_1m), "<500")

    tmp.cleanup()
    print(
        "\n| db | table | path | rows | s | rows/s | peak RSS MB | RSS before MB | output MB "
        "| load 1/5/15 min | notes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in table_rows:
        print("| " + " | ".join(row) + " |")
    for title, prof in profiles:
        n = prof["rows"]
        print(f"\nprofile: {title}: {prof['seconds']:.2f} s, {n / prof['seconds']:,.0f} rows/s")
        if "parts" in prof:
            total = prof["seconds"]
            print(
                f"  (timer overhead {prof['timer_overhead_us']:.2f} us/call, "
                f"{prof['timer_overhead_s']:.2f} s in all, excluded below)"
            )
            for name, seconds in prof["parts"].items():
                print(
                    f"  {name:42s} {seconds:7.2f} s {seconds / n * 1e6:7.2f} us/row "
                    f"{100 * seconds / (total - prof['timer_overhead_s']):5.1f} %"
                )
            raw_rate = prof["raw_fetch_rows"] / prof["raw_fetch_s"]
            print(
                f"  raw DB-API fetchmany(4096), no SQLAlchemy: {prof['raw_fetch_s']:.2f} s "
                f"({prof['raw_fetch_s'] / n * 1e6:.2f} us/row, {raw_rate:,.0f} rows/s)"
            )
        else:
            for line in prof["top"]:
                print("  " + line)
    print(f"\nwall {time.perf_counter() - t_main:.0f} s; load average at the end {loadavg()}")
    for name, value, target in results:
        print(f"RESULT {name} {value:.4g} target={target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
