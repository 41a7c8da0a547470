"""`elasticdl predict` / `elasticdl evaluate` flags and `elasticdl.predict(...)` /
`elasticdl.evaluate(...)`: one parser each, shared by the CLI and the Python API (as for train).
"""

from __future__ import annotations

import argparse
from typing import Any

from elasticdl.runtime.master.inference_job import InferenceOptions


def add_inference_arguments(parser: argparse.ArgumentParser, job_type: str) -> None:
    parser.add_argument("--data", default=None, help="RecordIO files: path, glob, directory or URL")
    from elasticdl.sql_input import add_sql_arguments

    add_sql_arguments(parser, label=False)
    parser.add_argument(
        "--trained_model", required=True, help="the --output of a training job (URL)"
    )
    if job_type == "predict":
        parser.add_argument(
            "--output", default="", help="new directory (URL) for the prediction parts"
        )
        parser.add_argument("--output_format", default="recordio", choices=["recordio", "csv"])
        parser.add_argument(
            "--keep_columns",
            default="",
            help="input columns copied into each output row (default: id and *_id columns)",
        )
    parser.add_argument(
        "--model_zoo", default=None, help="zoo to rebuild the model from (default: the model's)"
    )
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--minibatch_size", type=int, default=256)
    parser.add_argument("--records_per_task", type=int, default=1024)
    parser.add_argument("--max_worker_relaunches", type=int, default=3)
    parser.add_argument("--max_task_retries", type=int, default=3)
    parser.add_argument(
        "--task_timeout_floor",
        dest="task_timeout_floor_s",
        type=float,
        default=300.0,
        help="seconds a task may take before its worker counts as hung",
    )
    parser.add_argument("--master_port", type=int, default=0, help="0: any free port")
    parser.add_argument("--chaos", default="", help="scripted failures, e.g. worker1:kill@tasks=2")
    parser.add_argument("--intra_op_threads", type=int, default=0)
    parser.add_argument("--job_name", default="")
    parser.add_argument("--log_dir", default="", help="job logs (default: a new temp directory)")


def options_from_namespace(args: argparse.Namespace, job_type: str) -> InferenceOptions:
    return InferenceOptions(
        data=args.data,
        trained_model=args.trained_model,
        job_type=job_type,
        output=getattr(args, "output", ""),
        output_format=getattr(args, "output_format", "recordio"),
        keep_columns=getattr(args, "keep_columns", ""),
        model_zoo=args.model_zoo,
        num_workers=args.num_workers,
        minibatch_size=args.minibatch_size,
        records_per_task=args.records_per_task,
        max_worker_relaunches=args.max_worker_relaunches,
        max_task_retries=args.max_task_retries,
        task_timeout_floor_s=args.task_timeout_floor_s,
        master_port=args.master_port,
        chaos=args.chaos,
        intra_op_threads=args.intra_op_threads,
        job_name=args.job_name,
        log_dir=args.log_dir,
    )


def namespace_from_kwargs(job_type: str, **kwargs: Any) -> argparse.Namespace:
    """Parsed flags from keyword arguments named like the CLI flags."""

    class _RaisingParser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise ValueError(f"elasticdl.{job_type}: {message}")

    parser = _RaisingParser(prog=f"elasticdl.{job_type}")
    add_inference_arguments(parser, job_type)
    argv: list[str] = []
    for name, value in kwargs.items():
        if value is not None:
            argv += [f"--{name}", str(value)]
    return parser.parse_args(argv)


def options_from_kwargs(job_type: str, **kwargs: Any) -> InferenceOptions:
    """InferenceOptions from keyword arguments named like the CLI flags."""
    return options_from_namespace(namespace_from_kwargs(job_type, **kwargs), job_type)


def run_inference(args: argparse.Namespace, job_type: str) -> Any:
    """Run a prediction or evaluation job for parsed flags, converting `--sql` rows first."""
    import dataclasses

    from elasticdl.runtime.master.inference_job import InferenceJob
    from elasticdl.sql_input import check_data_source, converted

    check_data_source(args.data, args.sql, args.db)
    if not args.sql:
        return InferenceJob(options_from_namespace(args, job_type)).run()
    # Evaluation needs the label (the last column); prediction data has none.
    label = "" if job_type == "evaluate" else None
    with converted(args.sql, args.db, label=label) as data:
        options = dataclasses.replace(options_from_namespace(args, job_type), data=data)
        return InferenceJob(options).run()
