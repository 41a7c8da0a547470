"""`elasticdl train` flags and `elasticdl.train(...)`: one parser, so both accept the same.

The flags come from the train option spec (runtime/job_options.py). The Python API takes the
same arguments as strings (what a CLI or a SQL front end holds) or as typed values and parses
them with that parser: no second set of conversions to drift from the first. Both run the
train pipeline on the local engine (elasticdl/local_engine.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from elasticdl.runtime import job_options
from elasticdl.runtime.master.options import options_from_kwargs

__all__ = ["add_train_arguments", "namespace_from_kwargs", "options_from_kwargs", "run_training"]


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    job_options.add_arguments(parser, job_options.TRAIN, job_options.CLI)


def namespace_from_kwargs(**kwargs: Any) -> argparse.Namespace:
    """The parsed flags for keyword arguments named like the CLI flags (strings or values)."""
    return job_options.parse_kwargs("elasticdl.train", job_options.TRAIN, job_options.CLI, kwargs)


def run_training(args: argparse.Namespace) -> Any:
    """Run `elasticdl train` for parsed flags (the train pipeline, locally); a JobResult."""
    from elasticdl.local_engine import run_pipeline
    from elasticdl.runtime.master.options import TrainOptions

    return run_pipeline("train", args, TrainOptions(**job_options.copy_fields(TrainOptions, args)))
