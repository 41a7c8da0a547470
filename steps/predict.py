"""Pipeline step `predict`: the elastic prediction job's master.

    python -m elasticdl.steps.predict --data=gs://b/test --trained_model=gs://b/models/m1 \\
        --output=gs://b/predictions [--keep_columns '*'] [--instance_manager local|kubernetes]
        [every `elasticdl predict` flag]

The flags are `elasticdl predict`'s plus `--instance_manager` (as for the train step) and one
extension: `--keep_columns '*'` keeps every column of the input, as the SQL conversion's
`schema.json` in the `--data` directory lists them (what the write-back step needs to write
the selected rows with their predictions).

Exit status 0 when the predictions are complete, 1 when the job failed, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from elasticdl.runtime.master.inference_job import InferenceOptions, InferenceResult

log = logging.getLogger("elasticdl.steps.predict")

ALL_COLUMNS = "*"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elasticdl.predict_command import add_inference_arguments
    from elasticdl.steps.train import INSTANCE_MANAGERS

    add_inference_arguments(parser, "predict")
    parser.add_argument(
        "--instance_manager",
        default="local",
        choices=INSTANCE_MANAGERS,
        help="local: worker processes beside the master; kubernetes: one pod each",
    )


def schema_columns(data: str) -> list[str]:
    """The column names in `<data>/schema.json` (written by the SQL conversion step)."""
    import fsspec

    from elasticdl.runtime.sql.convert import SCHEMA_FILE

    url = f"{data.rstrip('/')}/{SCHEMA_FILE}"
    try:
        with fsspec.open(url, "rb") as f:
            schema = json.loads(f.read())
    except FileNotFoundError:
        raise ValueError(
            f"--keep_columns '*' needs --data to be a directory with {SCHEMA_FILE} (the output "
            f"of the SQL conversion step); {url} does not exist"
        ) from None
    return [column["name"] for column in schema.get("columns", [])]


def run(options: InferenceOptions, instance_manager: str = "local") -> InferenceResult:
    """Run the prediction job; ValueError (one clear message) for bad input."""
    from elasticdl.steps.train import INSTANCE_MANAGERS

    if instance_manager == "kubernetes":
        raise ValueError(
            "--instance_manager kubernetes is not available yet: the Kubernetes instance "
            "manager comes in a later release; use --instance_manager local"
        )
    if instance_manager not in INSTANCE_MANAGERS:
        raise ValueError(f"--instance_manager {instance_manager!r}: expected local or kubernetes")
    if options.keep_columns.strip() == ALL_COLUMNS:
        options.keep_columns = ",".join(schema_columns(options.data))
    from elasticdl.runtime.master.inference_job import InferenceJob

    return InferenceJob(options).run()


def run_from_args(args: argparse.Namespace) -> InferenceResult:
    from elasticdl.predict_command import options_from_namespace

    return run(options_from_namespace(args, "predict"), args.instance_manager)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="elasticdl.steps.predict")
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s: %(message)s")
    try:
        result = run_from_args(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"predict: error: {err}", file=sys.stderr)
        return 2
    if not result.succeeded:
        print(f"predict: the job failed: {result.error}", file=sys.stderr)
        return 1
    written = result.report.get("records", {}).get("written")
    print(f"{written} prediction row(s) written to {result.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
