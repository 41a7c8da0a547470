"""Pipeline step `train`: the elastic training job's master.

    python -m elasticdl.steps.train --model_def=regressor.DNN --data=gs://b/train \\
        --output=gs://b/models/m1 [--instance_manager local|kubernetes] \\
        [--init_from_latest gs://b/models/LATEST] [every `elasticdl train` flag] \\
        [the Kubernetes flags: --pod_image, --worker_resource_request, --node_selector, ...]

The flags are `elasticdl train`'s (the same option spec, runtime/job_options.py) plus:

* `--instance_manager`: where the master starts its parameter servers and workers. `local`
  (the default here, and what the local engine passes) starts them as processes next to the
  master; `kubernetes` (what the Argo pipeline passes by default) creates a pod for each
  through the Kubernetes API (`runtime/k8s/`). That needs the master to run in a pod, with
  `MY_POD_IP` from the downward API (the address its pods dial; refused up front without it)
  and `MY_POD_NAME` / `MY_POD_UID` (the owner of the pods it creates), under a service
  account that may manage pods, Services and ConfigMaps (`workflows/rbac.py`). The pods
  read the data and the checkpoints and write checkpoints themselves: each of those must be
  an object-store URL or lie on a shared `--volume` (refused up front otherwise).
* the Kubernetes flags of `runtime/k8s/options.py` (used with `kubernetes` only):
  `--pod_image` (default: the master pod's image; the Argo pipeline passes the job image),
  `--pod_namespace`, `--worker_resource_request` / `--worker_resource_limit`,
  `--ps_resource_request` / `--ps_resource_limit`, `--worker_pod_priority`,
  `--ps_pod_priority`, `--volume`, `--node_selector`, `--tolerations`, `--image_pull_secrets`,
  `--image_pull_policy`, `--pod_service_account`, `--termination_grace_period`, `--ps_port`.
* `--init_from_latest URL`: warm start. URL is a `LATEST` pointer (what the `publish latest`
  step writes): the job starts from the checkpoints of the model it names. No pointer yet (the
  first run of a schedule) means a cold start; a model without checkpoints is an error.
* `--resume true`: when Argo retries the step after its pod was killed, --output holds the
  checkpoints the interrupted attempt wrote (with --checkpoint_steps); continue from them
  instead of refusing the non-empty --output.

Exit status 0 when the model is published, 1 when the job failed, 2 for bad input (one line).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from elasticdl.runtime import job_options

if TYPE_CHECKING:
    from elasticdl.runtime.master.options import TrainOptions
    from elasticdl.runtime.master.training_job import JobResult

log = logging.getLogger("elasticdl.steps.train")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The step's flags: the train options the step takes (runtime/job_options.py), then the
    Kubernetes ones (runtime/k8s/options.py)."""
    from elasticdl.runtime.k8s.options import add_arguments as add_kubernetes_arguments

    job_options.add_arguments(parser, job_options.TRAIN, job_options.STEP)
    add_kubernetes_arguments(parser)


def checkpoint_dir_from_latest(latest_url: str) -> str:
    """The checkpoint directory of the model a LATEST pointer names; "" when there is no
    pointer yet; ValueError when the model has no checkpoints to start from."""
    import fsspec

    from elasticdl.steps.publish import read_latest

    model = read_latest(latest_url)
    if model is None:
        log.info("no %s yet: training from scratch", latest_url)
        return ""
    checkpoints = f"{model.rstrip('/')}/checkpoints"
    fs, path = fsspec.core.url_to_fs(checkpoints)
    if not fs.exists(path) or not fs.ls(path):
        raise ValueError(
            f"--init_from_latest {latest_url!r} names {model!r}, which has no checkpoints; "
            "train with --checkpoint_steps > 0 so the next run can start from them"
        )
    log.info("warm start from %s", checkpoints)
    return checkpoints


def interrupted_checkpoints(output: str) -> str:
    """`<output>/checkpoints` when `output` holds nothing but the checkpoints of a job that
    stopped before it published; "" otherwise."""
    import fsspec

    from elasticdl.runtime.outputs import JOB_OWNED

    fs, path = fsspec.core.url_to_fs(output)
    if not fs.exists(path) or not fs.isdir(path):
        return ""
    names = {p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)}
    checkpoints = f"{path.rstrip('/')}/checkpoints"
    if not names or not names <= JOB_OWNED or not fs.ls(checkpoints, detail=False):
        return ""
    return f"{output.rstrip('/')}/checkpoints"


def run(
    options: TrainOptions,
    instance_manager: str = "local",
    init_from_latest: str = "",
    resume: bool = False,
    kubernetes: Any = None,
) -> JobResult:
    """Run the job; ValueError (one clear message) for bad input, before anything starts.

    `resume`: a retried attempt continues from the checkpoints the interrupted one left in
    --output (before --init_from_latest, which only seeds the first attempt)."""
    if instance_manager not in job_options.INSTANCE_MANAGER.choices:
        raise ValueError(f"--instance_manager {instance_manager!r}: expected local or kubernetes")
    if init_from_latest and options.checkpoint_dir_for_init:
        raise ValueError("give --init_from_latest or --checkpoint_dir_for_init, not both")
    own = interrupted_checkpoints(options.output) if resume else ""
    if own:
        log.info("resuming the interrupted job from %s", own)
        options.checkpoint_dir_for_init = own
    elif init_from_latest:
        options.checkpoint_dir_for_init = checkpoint_dir_from_latest(init_from_latest)
    from elasticdl.runtime.master.training_job import TrainingJob

    if instance_manager != "kubernetes":
        return TrainingJob(options).run()
    from elasticdl.runtime.k8s.options import (
        KubernetesOptions,
        check_reachable_from_pods,
        instance_manager_factory,
    )

    k8s = kubernetes or KubernetesOptions()
    factory = instance_manager_factory(k8s)
    # Workers read the data; PS pods read the initial checkpoints and write new ones.
    check_reachable_from_pods("--training_data", options.training_data, k8s.volume)
    check_reachable_from_pods("--validation_data", options.validation_data, k8s.volume)
    check_reachable_from_pods(
        "--checkpoint_dir_for_init", options.checkpoint_dir_for_init, k8s.volume
    )
    if options.resolved_checkpoint_dir:
        check_reachable_from_pods(
            "--checkpoint_dir", options.resolved_checkpoint_dir, k8s.volume, writable=True
        )
    options.tls_dir = k8s.master_tls_dir() or options.tls_dir
    options.master_host = os.environ["MY_POD_IP"]
    return TrainingJob(options, instance_manager_factory=factory).run()


def run_from_args(args: argparse.Namespace) -> JobResult:
    from elasticdl.runtime.k8s.options import KubernetesOptions
    from elasticdl.runtime.master.options import TrainOptions

    return run(
        TrainOptions(**job_options.copy_fields(TrainOptions, args)),
        args.instance_manager,
        args.init_from_latest,
        resume=args.resume == "true",
        kubernetes=KubernetesOptions.from_namespace(args),
    )


def _finish(args: argparse.Namespace, result: JobResult) -> int:
    if not result.succeeded:
        print(f"train: the job failed: {result.error}", file=sys.stderr)
        return 1
    print(f"trained model written to {result.output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from elasticdl.steps.step_main import run_step

    return run_step("elasticdl.steps.train", "train", add_arguments, run_from_args, _finish, argv)


if __name__ == "__main__":
    sys.exit(main())
