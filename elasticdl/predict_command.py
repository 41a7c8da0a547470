"""`elasticdl predict` / `elasticdl evaluate` flags and `elasticdl.predict(...)` /
`elasticdl.evaluate(...)`: one parser each from the option spec (runtime/job_options.py),
shared by the CLI and the Python API (as for train).

Prediction runs the predict pipeline on the local engine; evaluation has no pipeline and runs
its job directly (converting `--sql` rows first).
"""

from __future__ import annotations

import argparse
from typing import Any

from elasticdl.runtime import job_options
from elasticdl.runtime.master.options import inference_options_from_kwargs

__all__ = [
    "add_inference_arguments",
    "inference_options_from_kwargs",
    "namespace_from_kwargs",
    "options_from_kwargs",
    "run_inference",
]


def add_inference_arguments(parser: argparse.ArgumentParser, job_type: str) -> None:
    job_options.add_arguments(parser, job_options.JOBS[job_type], job_options.CLI)


def namespace_from_kwargs(job_type: str, **kwargs: Any) -> argparse.Namespace:
    """Parsed flags from keyword arguments named like the CLI flags."""
    table = job_options.JOBS[job_type]
    return job_options.parse_kwargs(f"elasticdl.{job_type}", table, job_options.CLI, kwargs)


def options_from_kwargs(job_type: str, **kwargs: Any) -> Any:
    """InferenceOptions from keyword arguments named like the CLI flags."""
    return inference_options_from_kwargs(job_type, **kwargs)


def run_inference(args: argparse.Namespace, job_type: str) -> Any:
    """Run a prediction (the predict pipeline, locally) or an evaluation job for parsed
    flags; an InferenceResult."""
    import dataclasses

    from elasticdl.runtime.master.inference_job import InferenceJob
    from elasticdl.runtime.master.options import InferenceOptions
    from elasticdl.sql_input import check_data_source, converted

    options = InferenceOptions(**job_options.copy_fields(InferenceOptions, args), job_type=job_type)
    if job_type == "predict":
        from elasticdl.local_engine import run_pipeline

        return run_pipeline("predict", args, options)
    check_data_source(args.data, args.sql, args.db)
    if not args.sql:
        return InferenceJob(options).run()
    # Evaluation needs the label (the last column).
    with converted(args.sql, args.db, label="") as data:
        return InferenceJob(dataclasses.replace(options, data=data)).run()
