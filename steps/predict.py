"""Pipeline step `predict`: the elastic prediction job's master.

    python -m elasticdl.steps.predict --data=gs://b/test --trained_model=gs://b/models/m1 \\
        --output=gs://b/predictions [--keep_columns '*'] [--instance_manager local|kubernetes]
        [every `elasticdl predict` flag]

The flags are `elasticdl predict`'s plus `--instance_manager` (as for the train step) with the
Kubernetes flags (runtime/k8s/options.py), and one extension: `--keep_columns '*'` keeps every
column of the input, as the SQL conversion's `schema.json` in the `--data` directory lists them
(what the write-back step needs to write the selected rows with their predictions).

`--instance_manager kubernetes`: this process (the master, in its pod) runs each worker as a pod
through `KubernetesInstanceManager`. Checked before anything starts, as the train step does:
MY_POD_IP from the downward API (the master binds to it; the pods reach it there) and every
Kubernetes flag. The workers read --data and --trained_model and write their parts under
--output themselves, so each must be reachable from every pod: an object-store URL (gs://, s3://,
...), or a local path under the mount_path of a shared --volume (a PersistentVolumeClaim or a
hostPath; the master pod mounts it at the same path). A local path outside every such volume
would be the pod's own disk: the parts would vanish with the pod and the job fail at its end,
so it is refused up front, as is memory:// (this process's memory only). A local --output must
lie strictly below the mount_path on a writable volume: the job stages the parts beside it and
renames the staging directory into place when it succeeds.

Exit status 0 when the predictions are complete, 1 when the job failed, 2 for bad input.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from elasticdl.runtime import job_options

if TYPE_CHECKING:
    from elasticdl.runtime.k8s.options import KubernetesOptions, ManagerFactory
    from elasticdl.runtime.master.inference_job import InferenceResult
    from elasticdl.runtime.master.options import InferenceOptions

log = logging.getLogger("elasticdl.steps.predict")

ALL_COLUMNS = "*"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The step's flags: the predict options the step takes (runtime/job_options.py), then
    the Kubernetes ones (runtime/k8s/options.py)."""
    from elasticdl.runtime.k8s.options import add_arguments as add_kubernetes_arguments

    job_options.add_arguments(parser, job_options.PREDICT, job_options.STEP)
    add_kubernetes_arguments(parser)


def schema_columns(data: str) -> list[str]:
    """The column names in `<data>/schema.json` (written by the SQL conversion step)."""
    from elasticdl.runtime.data.metadata import SCHEMA_FILE, schema_in

    url = f"{data.rstrip('/')}/{SCHEMA_FILE}"
    schema = schema_in(data.rstrip("/"))
    if schema is None:
        raise ValueError(
            f"--keep_columns '*' needs --data to be a directory with {SCHEMA_FILE} (the output "
            f"of the SQL conversion step); {url} does not exist"
        )
    return [column["name"] for column in schema.get("columns", [])]


def run(
    options: InferenceOptions,
    instance_manager: str = "local",
    kubernetes: KubernetesOptions | None = None,
) -> InferenceResult:
    """Run the prediction job; ValueError (one clear message) for bad input, before anything
    starts. `kubernetes`: the Kubernetes flags (with --instance_manager kubernetes)."""
    if instance_manager not in job_options.INSTANCE_MANAGER.choices:
        raise ValueError(f"--instance_manager {instance_manager!r}: expected local or kubernetes")
    factory: ManagerFactory | None = None  # None: local worker processes
    if instance_manager == "kubernetes":
        from elasticdl.runtime.k8s.options import (
            KubernetesOptions,
            check_reachable_from_pods,
            instance_manager_factory,
        )

        k8s = kubernetes or KubernetesOptions()
        factory = instance_manager_factory(k8s)
        check_reachable_from_pods("--data", options.data or "", k8s.volume)
        check_reachable_from_pods("--trained_model", options.trained_model, k8s.volume)
        if options.job_type == "predict":
            check_reachable_from_pods("--output", options.output, k8s.volume, writable=True)
        options.tls_dir = k8s.master_tls_dir() or options.tls_dir
        options.master_host = os.environ["MY_POD_IP"]
    if options.keep_columns.strip() == ALL_COLUMNS:
        options.keep_columns = ",".join(schema_columns(options.data))
    from elasticdl.runtime.master.inference_job import InferenceJob

    return InferenceJob(options, instance_manager_factory=factory).run()


def run_from_args(args: argparse.Namespace) -> InferenceResult:
    from elasticdl.runtime.k8s.options import KubernetesOptions
    from elasticdl.runtime.master.options import InferenceOptions

    return run(
        InferenceOptions(**job_options.copy_fields(InferenceOptions, args)),
        args.instance_manager,
        kubernetes=KubernetesOptions.from_namespace(args),
    )


def _finish(args: argparse.Namespace, result: InferenceResult) -> int:
    if not result.succeeded:
        print(f"predict: the job failed: {result.error}", file=sys.stderr)
        return 1
    written = result.report.get("records", {}).get("written")
    print(f"{written} prediction row(s) written to {result.output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from elasticdl.steps.step_main import run_step

    return run_step(
        "elasticdl.steps.predict", "predict", add_arguments, run_from_args, _finish, argv
    )


if __name__ == "__main__":
    sys.exit(main())
