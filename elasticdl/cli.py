"""The `elasticdl` command line.

Subcommands parse strings into the same arguments the Python API takes and report user
errors as one line on stderr (exit status 2), never a traceback; `--log_level debug` shows
the traceback too. A job that fails exits 1; one stopped by a signal exits 128 + its number
(130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from elasticdl import __version__
from elasticdl.runtime import job_options

log = logging.getLogger("elasticdl")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _add_data_commands(commands: argparse._SubParsersAction) -> None:
    from elasticdl.runtime.data.generate import DATASETS
    from elasticdl.runtime.data.recordio import Compressor

    data = commands.add_parser("data", help="generate, inspect and plan RecordIO data")
    sub = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")

    inspect = sub.add_parser("inspect", help="files, record counts, chunks, first record")
    inspect.add_argument("location", metavar="PATH_OR_GLOB", help="file, directory, glob or URL")
    inspect.add_argument("--json", action="store_true", help="print one JSON object")

    gen = sub.add_parser("gen", help="write a built-in data set as sharded RecordIO")
    gen.add_argument("name", choices=sorted(DATASETS), metavar="NAME", help=", ".join(DATASETS))
    gen.add_argument("--output", required=True, help="output directory (path or fsspec URL)")
    gen.add_argument("--num_records", type=_positive_int, required=True, help="records to write")
    gen.add_argument(
        "--records_per_file",
        type=_positive_int,
        default=None,
        help="records per file (default: all in one file)",
    )
    gen.add_argument(
        "--seed", type=int, default=0, help="random seed: the same seed writes the same records"
    )
    gen.add_argument(
        "--vocab_scale",
        type=float,
        default=None,
        help="ctr only: distinct categorical values as a fraction of Criteo's (default 0.01, "
        "about 340k values over C1..C26; 1 = Criteo's 34 million)",
    )
    gen.add_argument(
        "--compressor",
        choices=[c.name.lower() for c in Compressor],
        default="snappy",
        help="chunk compression (default snappy, as pyrecordio)",
    )

    from elasticdl.steps.sql_to_recordio import add_arguments as add_convert_arguments

    convert = sub.add_parser(
        "convert",
        help="stream a SQL query's rows, or CSV/Parquet/TFRecord files, into RecordIO files "
        "plus schema.json",
        description="Convert the rows of a SELECT (or of CSV, Parquet or TFRecord files: "
        "--from, --input) into sharded RecordIO of tf.train.Example "
        "(integers -> int64, reals -> float, text -> bytes) with schema.json: columns, "
        "statistics, label, row count, the SQL and the database URL without its password.",
    )
    add_convert_arguments(convert)
    from elasticdl.data_commands import add_convert_source_arguments

    add_convert_source_arguments(convert)

    sample = sub.add_parser(
        "sample_db",
        help="create the demo HR tables `employee` and `testdata` in a database",
    )
    sample.add_argument("--db", required=True, help="SQLAlchemy URL, e.g. sqlite:///hr.db")
    sample.add_argument(
        "--employees", type=_positive_int, default=4000, help="rows of the training table"
    )
    sample.add_argument(
        "--testdata", type=_positive_int, default=500, help="rows of the table to predict on"
    )

    plan = sub.add_parser("plan", help="print the (file, start, end) tasks of a data set")
    plan.add_argument("location", metavar="PATH_OR_GLOB", help="file, directory, glob or URL")
    plan.add_argument(
        "--records_per_task",
        type=_positive_int,
        default=1024,
        help="records per task, as the job's flag of that name",
    )


def _add_zoo_commands(commands: argparse._SubParsersAction) -> None:
    from elasticdl.runtime import job_options
    from elasticdl.zoo_commands import add_zoo_init_and_package

    zoo = commands.add_parser(
        "zoo", help="model zoos: show a model's pieces, write its Dockerfile, package it"
    )
    sub = zoo.add_subparsers(dest="zoo_command", required=True, metavar="ZOO_COMMAND")
    show = sub.add_parser("show", help="resolve a model definition and show its pieces")
    model = ("model_zoo", "model_def", "params", "dataset_fn", "loss", "optimizer")
    model_options = job_options.pick(job_options.TRAIN, *model, "eval_metrics_fn")
    job_options.add_arguments(show, model_options, job_options.CLI)
    add_zoo_init_and_package(sub)


def _add_train_command(commands: argparse._SubParsersAction, argo: bool = True) -> None:
    from elasticdl.train_command import add_train_arguments

    train = commands.add_parser(
        "train",
        help="train a model-zoo model as an elastic job",
        usage="%(prog)s --model_def MODEL_DEF --output OUTPUT (--data DATA | --sql SQL --db DB) "
        "[options]",
        description="Train a model as an elastic job: a master hands data shards to workers "
        "that push gradients to parameter servers; workers may die or join at any time.",
    )
    add_train_arguments(train)
    train.set_defaults(argo_flags=argo)
    if argo:
        from elasticdl.argo_engine import add_argo_arguments

        add_argo_arguments(train, "train")
        _tuck_away_argo(train, job_options.TRAIN)


_ARGO_GROUP = "Argo Workflows (with --engine argo)"


def _tuck_away_argo(parser: argparse.ArgumentParser, table: tuple[Any, ...]) -> None:
    """The Argo and Kubernetes flags, and those only ElasticDL's command lines use, behind
    --help-all (see help_format.py)."""
    from elasticdl.help_format import tuck_away

    argo_only = {o.dest for o in table if o.engines == job_options.ARGO_ONLY}
    tucked = (_ARGO_GROUP, job_options.ELASTICDL_COMPAT_GROUP)
    compat = any(o.group == job_options.ELASTICDL_COMPAT_GROUP for o in table)
    tuck_away(
        parser,
        lambda action, group: group in tucked or action.dest in argo_only,
        "Argo and Kubernetes for --engine argo" + ("; ElasticDL's" if compat else ""),
    )


def _add_inference_commands(commands: argparse._SubParsersAction, argo: bool = True) -> None:
    from elasticdl.predict_command import add_inference_arguments

    predict = commands.add_parser(
        "predict",
        help="predict with a trained model over RecordIO data, elastically",
        usage="%(prog)s --trained_model MODEL (--data DATA | --sql SQL --db DB) "
        "[--output OUTPUT] [options]",
        description="Predict with a trained model: workers take record ranges, each writes "
        "one output part per range; every input record yields exactly one output row.",
    )
    add_inference_arguments(predict, "predict")
    predict.set_defaults(argo_flags=argo)
    if argo:
        from elasticdl.argo_engine import add_argo_arguments

        add_argo_arguments(predict, "predict")
        _tuck_away_argo(predict, job_options.PREDICT)
    evaluate = commands.add_parser(
        "evaluate",
        help="compute a trained model's evaluation metrics on labelled data",
        usage="%(prog)s --trained_model MODEL (--data DATA | --sql SQL --db DB) [options]",
        description="Evaluate a trained model: workers send additive metric state per record "
        "range; the master merges it into the metrics over all the data.",
    )
    add_inference_arguments(evaluate, "evaluate")


def _add_sql_command(commands: argparse._SubParsersAction) -> None:
    from elasticdl.sql_command import add_sql_command

    add_sql_command(commands)


def _add_render_commands(commands: argparse._SubParsersAction) -> None:
    from elasticdl.render_command import add_lint_command, add_render_command

    add_render_command(commands)
    add_lint_command(commands)


def _add_scale_command(commands: argparse._SubParsersAction) -> None:
    from elasticdl.scale_command import add_scale_command

    add_scale_command(commands)


def _add_status_command(commands: argparse._SubParsersAction) -> None:
    from elasticdl.status_command import add_status_command

    add_status_command(commands)


_COMMANDS: dict[str, Any] = {
    "train": _add_train_command,
    "predict": _add_inference_commands,
    "evaluate": _add_inference_commands,
    "sql": _add_sql_command,
    "render": _add_render_commands,
    "lint": _add_render_commands,
    "scale": _add_scale_command,
    "status": _add_status_command,
    "data": _add_data_commands,
    "zoo": _add_zoo_commands,
}
"""Each command and what adds its parser (one may add two)."""
_TAKES_ARGO = frozenset({_add_train_command, _add_inference_commands})


def build_parser(command: str | None = None, argo: bool = True) -> argparse.ArgumentParser:
    """The `elasticdl` parser: every command, or only `command` (the others' imports cost
    ~0.6 s: hera, the Kubernetes models); `argo=False` leaves out train's and predict's Argo
    flags (`argo_flags` False in what it parses)."""
    parser = argparse.ArgumentParser(
        prog="elasticdl",
        description="Elastic, fault-tolerant training and prediction for Keras models.",
    )
    parser.add_argument("--version", action="version", version=f"elasticdl {__version__}")
    parser.add_argument(
        "--log_level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="logging verbosity (debug also prints tracebacks of errors)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    adders = (
        [_COMMANDS[command]] if command in _COMMANDS else list(dict.fromkeys(_COMMANDS.values()))
    )
    for add in adders:
        if add in _TAKES_ARGO:
            add(commands, argo)
        else:
            add(commands)
    from elasticdl.help_format import use_defaults_formatter

    use_defaults_formatter(parser)
    return parser


def _parse(argv: Sequence[str] | None) -> tuple[argparse.ArgumentParser, Any, list[str]]:
    """(parser, args, extra): with the lean parser of the command the arguments name when
    they ask for no help and nothing of Argo, else (or when it leaves arguments unknown) with
    the whole one, which also says what is wrong."""
    tokens = list(sys.argv[1:] if argv is None else argv)
    command = next((t for t in tokens if t in _COMMANDS), None)
    wants_all = any(t.startswith(("-h", "--help")) or "argo" in t for t in tokens)
    if command is not None and not wants_all:
        parser = build_parser(command, argo=False)
        args, extra = parser.parse_known_args(tokens)
        if not extra:
            return parser, args, extra
    parser = build_parser()
    args, extra = parser.parse_known_args(tokens)
    return parser, args, extra


def _run_data(args: argparse.Namespace) -> None:
    from elasticdl.data_commands import inspect_data, plan_data

    if args.data_command == "inspect":
        inspect_data(args.location, sys.stdout, as_json=args.json)
    elif args.data_command == "plan":
        plan_data(args.location, args.records_per_task, sys.stdout)
    elif args.data_command == "sample_db":
        from elasticdl.runtime.data.employees import create_sample_database
        from elasticdl.runtime.sql.convert import redact_url

        create_sample_database(args.db, args.employees, args.testdata)
        print(
            f"created tables employee ({args.employees} rows) and testdata ({args.testdata} "
            f"rows) in {redact_url(args.db)}"
        )
    elif args.data_command == "convert":
        from elasticdl.data_commands import convert_data

        result = convert_data(args)
        print(f"{result.rows} row(s) in {len(result.files)} file(s) at {result.output}")
    elif args.data_command == "gen":
        from elasticdl.data_commands import generate_data

        generate_data(args)


def _run_zoo(args: argparse.Namespace) -> None:
    from elasticdl.runtime.model_spec import load_model_spec

    spec = load_model_spec(
        args.model_def,
        args.model_zoo,
        args.params,
        dataset_fn=args.dataset_fn,
        loss=args.loss,
        optimizer=args.optimizer,
        eval_metrics_fn=args.eval_metrics_fn,
    )
    print(f"model_def:       {spec.model_def}")
    commit = f" @ {spec.zoo.commit}" if spec.zoo.commit else ""
    print(f"zoo:             {spec.zoo.url} ({spec.zoo.root}){commit}")
    print(f"file:            {spec.module_file}")
    print(f"style:           {spec.style}")
    print(f"params:          {spec.params}")
    for role, source in sorted(spec.sources.items()):
        print(f"{role + ':':<17}{source}")


def failed_status(result: Any) -> int:
    """The exit status of a job that did not succeed: 128 + the signal that stopped it (130
    for Ctrl-C, 143 for SIGTERM, as a shell reports a process the signal ended), else 1."""
    import signal

    if getattr(result, "status", "") == "stopped":
        for event in (getattr(result, "report", None) or {}).get("events", []):
            name = event.get("signal", "") if event.get("kind") == "job_stopped" else ""
            if name in signal.Signals.__members__:
                return 128 + int(signal.Signals[name])
    return 1


def _run_train(args: argparse.Namespace) -> int:
    from elasticdl.argo_engine import argo_only_flags, submit_train
    from elasticdl.train_command import run_training

    if args.engine == "argo":
        return submit_train(args)
    extra = argo_only_flags(args, "train") if args.argo_flags else []
    if extra:
        raise ValueError(f"{', '.join(extra)}: only with --engine argo")
    result = run_training(args)
    if not result.succeeded:
        print(f"elasticdl: training failed: {result.error}", file=sys.stderr)
        return failed_status(result)
    from elasticdl.job_summary import ended_lines

    print(f"trained model written to {result.output}")
    for line in ended_lines(result.report, result.output):
        print(line)
    return 0


def _run_inference(args: argparse.Namespace) -> int:
    import json

    from elasticdl.predict_command import run_inference

    if args.command == "predict":
        from elasticdl.argo_engine import argo_only_flags, submit_predict

        if args.engine == "argo":
            return submit_predict(args)
        extra = argo_only_flags(args, "predict") if args.argo_flags else []
        if extra:
            raise ValueError(f"{', '.join(extra)}: only with --engine argo")
    result = run_inference(args, args.command)
    if not result.succeeded:
        print(f"elasticdl: {args.command} failed: {result.error}", file=sys.stderr)
        return failed_status(result)
    if args.command == "evaluate":
        print(json.dumps(result.metrics, sort_keys=True))
    else:
        print(f"{result.report['records']['written']} prediction row(s) written to {result.output}")
    return 0


def _run_sql(args: argparse.Namespace, extra: Sequence[str] = ()) -> int:
    from elasticdl.sql_command import run_sql

    return run_sql(args, extra)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `elasticdl` console script; returns the exit status."""
    from elasticdl.runtime import keras_mode
    from elasticdl.runtime.distribution import conflict_message, conflicts

    keras_mode.mark_own_process()
    found = conflicts()
    if found:
        print(f"elasticdl: warning: {conflict_message(found)}", file=sys.stderr)
    parser, args, extra = _parse(argv)
    if extra and not (args.command == "sql" and args.engine == "argo"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "train":
            return _run_train(args)
        if args.command in ("predict", "evaluate"):
            return _run_inference(args)
        if args.command == "sql":
            return _run_sql(args, extra)
        if args.command == "scale":
            from elasticdl.scale_command import run_scale

            return run_scale(args)
        if args.command == "status":
            from elasticdl.status_command import run_status

            return run_status(args)
        if args.command in ("render", "lint"):
            from elasticdl.render_command import run as run_render

            return run_render(args)
        if args.command == "data":
            _run_data(args)
        elif args.command == "zoo":
            if args.zoo_command != "show":
                return int(args.zoo_run(args))
            _run_zoo(args)
    except (ValueError, FileNotFoundError) as err:
        if args.log_level == "debug":
            log.exception("failed")
        print(f"elasticdl: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("elasticdl: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
