"""Pipeline step `evaluate`: the elastic evaluation job's master, its metrics into a file.

    python -m elasticdl.steps.evaluate --data=gs://b/test --trained_model=gs://b/models/m1 \\
        --metrics_file=/tmp/metrics.json [--eval_metrics Accuracy,AUC]
        [--instance_manager local|kubernetes] [every `elasticdl evaluate` flag]

The flags are `elasticdl evaluate`'s plus `--instance_manager` and the Kubernetes flags, as for
the predict step (steps/predict.py, which runs the job); the metrics, merged over every record,
are written as one JSON object to `--metrics_file` (an Argo output parameter: the write-metrics
step puts them into a table). Exit status 0 with the metrics written, 1 when the job failed, 2
for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elasticdl.runtime import job_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elasticdl.runtime.k8s.options import add_arguments as add_kubernetes_arguments

    job_options.add_arguments(parser, job_options.EVALUATE, job_options.STEP)
    add_kubernetes_arguments(parser)
    parser.add_argument(
        "--metrics_file", default="", help="write the metrics here, as one JSON object"
    )


def run_from_args(args: argparse.Namespace) -> Any:
    from elasticdl.runtime.k8s.options import KubernetesOptions
    from elasticdl.runtime.master.options import InferenceOptions
    from elasticdl.steps import predict

    options = InferenceOptions(
        **job_options.copy_fields(InferenceOptions, args), job_type="evaluate"
    )
    result = predict.run(
        options, args.instance_manager, kubernetes=KubernetesOptions.from_namespace(args)
    )
    if result.succeeded and args.metrics_file:
        path = Path(args.metrics_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result.metrics, sort_keys=True))
    return result


def _finish(args: argparse.Namespace, result: Any) -> int:
    if not result.succeeded:
        print(f"evaluate: the job failed: {result.error}", file=sys.stderr)
        return 1
    print(json.dumps(result.metrics, sort_keys=True))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from elasticdl.steps.step_main import run_step

    return run_step(
        "elasticdl.steps.evaluate", "evaluate", add_arguments, run_from_args, _finish, argv
    )


if __name__ == "__main__":
    sys.exit(main())
