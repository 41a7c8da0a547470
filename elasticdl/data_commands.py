"""`elasticdl data ...`: generate, inspect and plan RecordIO data sets."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from elasticdl.runtime.data import recordio
from elasticdl.runtime.data.files import expand_data_urls
from elasticdl.runtime.data.metadata import DatasetMetadata
from elasticdl.runtime.data.planner import plan_tasks


def _preview(values: list[Any], limit: int = 8) -> str:
    shown = ", ".join(f"{v:.4g}" if isinstance(v, float) else repr(v) for v in values[:limit])
    more = f", ... ({len(values)} values)" if len(values) > limit else ""
    return f"[{shown}{more}]"


def describe_example(serialized: bytes) -> dict[str, str]:
    """Feature name -> 'kind[length] preview' for one serialized tf.train.Example."""
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example.FromString(serialized)
    described: dict[str, str] = {}
    for name, info in DatasetMetadata.from_example(serialized).columns.items():
        feature = example.features.feature[name]
        values = list(getattr(feature, f"{info.kind}_list").value)
        described[name] = f"{info.kind}[{info.length}] {_preview(values)}"
    return described


def inspect_data(location: str, out: TextIO, as_json: bool = False) -> list[dict[str, Any]]:
    """Print, per file: records, chunks, compressors, bytes; then the first record decoded."""
    summaries: list[dict[str, Any]] = []
    first: bytes | None = None
    for url in expand_data_urls(location):
        with recordio.RecordIOReader(url) as reader:
            index = reader.index
            if first is None and index.num_records:
                first = next(reader.read(0, 1))
        summaries.append(
            {
                "file": url,
                "records": index.num_records,
                "chunks": len(index.chunks),
                "compressors": sorted({c.compressor.name.lower() for c in index.chunks}),
                "bytes": index.file_size,
            }
        )
    total = sum(s["records"] for s in summaries)
    first_example: dict[str, str] | str | None = None
    if first is not None:
        try:
            first_example = describe_example(first)
        except Exception as err:  # noqa: BLE001 - records need not be tf.Example
            first_example = f"not a tf.train.Example ({type(err).__name__}): {first[:64]!r}"
    if as_json:
        out.write(
            json.dumps({"files": summaries, "records": total, "first_record": first_example}) + "\n"
        )
        return summaries
    width = max(len(s["file"]) for s in summaries)
    out.write(f"{'file':<{width}}  {'records':>9}  {'chunks':>6}  {'bytes':>11}  compressor\n")
    for s in summaries:
        out.write(
            f"{s['file']:<{width}}  {s['records']:>9}  {s['chunks']:>6}  {s['bytes']:>11}  "
            f"{','.join(s['compressors']) or '-'}\n"
        )
    out.write(f"{len(summaries)} file(s), {total} record(s)\n")
    if isinstance(first_example, dict):
        out.write("first record (tf.train.Example):\n")
        for name, text in first_example.items():
            out.write(f"  {name}: {text}\n")
    elif first_example:
        out.write(f"first record: {first_example}\n")
    return summaries


def plan_data(location: str, records_per_task: int, out: TextIO) -> None:
    """Print the training tasks `(file, start, end)` that the master would hand out."""
    shards = plan_tasks(location, records_per_task)
    for i, shard in enumerate(shards):
        out.write(f"task {i}: {shard.file} [{shard.start}, {shard.end})\n")
    out.write(f"{len(shards)} task(s), {sum(s.num_records for s in shards)} record(s)\n")


def generate_data(args: argparse.Namespace) -> None:
    """`elasticdl data gen`: write the data set, print its files (and ctr's teacher AUC)."""
    from elasticdl.runtime.data.generate import generate
    from elasticdl.runtime.data.recordio import Compressor

    options: dict[str, Any] = {}
    observer = None
    if args.vocab_scale is not None:
        if args.name != "ctr":
            raise SystemExit(f"--vocab_scale applies to the ctr data set only, not {args.name!r}")
        if not args.vocab_scale > 0:
            raise SystemExit(f"--vocab_scale must be positive, got {args.vocab_scale}")
        options["vocab_scale"] = args.vocab_scale
    if args.name == "ctr":
        from elasticdl.runtime.data.ctr import TeacherAUC

        observer = TeacherAUC()
    paths = generate(
        args.name,
        args.output,
        args.num_records,
        records_per_file=args.records_per_file,
        seed=args.seed,
        compressor=Compressor[args.compressor.upper()],
        observer=observer,
        **options,
    )
    for path in paths:
        print(path)
    print(f"wrote {args.num_records} {args.name} record(s) in {len(paths)} file(s)")
    if observer is not None:
        print(
            f"teacher AUC {observer.value():.4f} (the best any model can reach on this data); "
            f"click rate {observer.click_rate:.3f}"
        )


CONVERT_SOURCES = ("sql", "csv", "parquet", "tfrecord")


def add_convert_source_arguments(convert: argparse.ArgumentParser) -> None:
    """`--from` and `--input` on `data convert`, whose SQL flags (steps/sql_to_recordio.py)
    become required only with `--from sql`."""
    convert.add_argument(
        "--from",
        dest="source",
        choices=CONVERT_SOURCES,
        default="sql",
        help="what to convert: a SQL query (--db, --sql; the default) or files (--input)",
    )
    convert.add_argument(
        "--input",
        default="",
        help="with --from csv|parquet|tfrecord: a file, directory or glob (path or URL)",
    )
    for action in convert._actions:
        if action.dest in ("db", "sql"):
            action.required = False
            action.default = ""


def convert_data(args: argparse.Namespace) -> Any:
    """Run `data convert`: the SQL step's conversion, or files through the same writer."""
    if args.source == "sql":
        if not args.db or not args.sql:
            raise ValueError("data convert --from sql needs --db and --sql (or --from csv ...)")
        if args.input:
            raise ValueError("--input is for --from csv|parquet|tfrecord; --from sql uses --sql")
        from elasticdl.steps.sql_to_recordio import run_from_args

        return run_from_args(args)
    if not args.input:
        raise ValueError(f"data convert --from {args.source} needs --input FILE_DIR_OR_GLOB")
    if args.db or args.sql:
        raise ValueError(f"--db/--sql are for --from sql, not --from {args.source}")
    return convert_files(
        args.source,
        args.input,
        args.output,
        records_per_file=args.records_per_file,
        label=args.label,
        on_null=args.on_null,
        label_last=args.label_last == "true",
    )


def convert_files(fmt: str, location: str, output: str, **options: Any) -> Any:
    """CSV, Parquet or TFRecord files -> RecordIO + schema.json at `output`, streaming."""
    from elasticdl.runtime.data.file_rows import describe, read_rows
    from elasticdl.runtime.sql.convert import check_output, convert_rows

    if options.get("records_per_file", 1) < 1:
        raise ValueError(f"--records_per_file must be >= 1, got {options['records_per_file']}")
    check_output(output)
    names, batches, close, where = read_rows(fmt, location)
    return convert_rows(
        names, batches, close, output, describe(fmt, location), where=where, **options
    )
