"""`elasticdl scale`: resize a running training job.

    elasticdl scale JOB --workers N [--namespace NS] [--kubeconfig PATH] [--context CTX]
    elasticdl scale --master HOST:PORT --secret_file LOG_DIR --workers N

On Kubernetes (JOB: the job name, on Argo the workflow's name) the request goes through an
annotation on the job's ConfigMap (runtime/k8s/scale.py); anywhere the master can be reached
(the local engine logs "master on HOST:PORT, logs in LOG_DIR"), through its `scale_workers` gRPC
call, from the master's machine only and authenticated like every call to a job: with the
job's secret, which `--secret_file` reads (the job's `job.secret`, mode 0600, or the log
directory that holds it; runtime/auth.py). Either
way the command prints the master's answer: exit status 0 when applied, 1 when the master
refused (e.g. below --min_workers), 2 when the request could not be delivered.
"""

from __future__ import annotations

import argparse
import sys

from elasticdl.cluster_args import add_cluster_arguments, core_api
from elasticdl.runtime.master.scaling import MAX_WORKERS, ScaleRefused

EXIT_REFUSED = 1


def add_scale_command(commands: argparse._SubParsersAction) -> None:
    scale = commands.add_parser(
        "scale",
        help="resize a running training job",
        description="Ask a running training job's master for a number of workers.",
    )
    scale.add_argument(
        "job", nargs="?", default="", help="the job's name (Kubernetes; on Argo: the workflow)"
    )
    scale.add_argument("--master", default="", help="HOST:PORT of the job's master, instead of JOB")
    scale.add_argument(
        "--secret_file",
        default="",
        help="with --master: the job's secret (LOG_DIR/job.secret, or LOG_DIR itself)",
    )
    scale.add_argument("--workers", type=int, required=True, help="the number of workers wanted")
    add_cluster_arguments(scale)
    scale.add_argument(
        "--wait",
        type=float,
        default=60.0,
        help="seconds to wait for the master's answer (Kubernetes; 0: do not wait)",
    )


def run_scale(args: argparse.Namespace) -> int:
    """ValueError (exit 2) for a request that cannot be sent; exit 1 when refused."""
    if bool(args.job) == bool(args.master):
        raise ValueError("give the job's name (Kubernetes) or --master HOST:PORT, one of them")
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.workers > MAX_WORKERS:
        raise ValueError(
            f"--workers {args.workers} is more than {MAX_WORKERS}, the limit for one job (the "
            "master also refuses more than the tasks of an epoch or its machine's memory holds)"
        )
    if args.master and not args.secret_file:
        raise ValueError(
            "--master needs --secret_file: the job's log directory (it logged 'master on "
            "HOST:PORT, logs in LOG_DIR') or the job.secret file in it"
        )
    try:
        if args.master:
            message = scale_via_master(args.master, args.workers, secret_file=args.secret_file)
        else:
            message = _scale_on_kubernetes(args)
    except ScaleRefused as err:
        print(f"elasticdl: scale refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    print(message)
    return 0


def scale_via_master(
    address: str, workers: int, timeout_s: float | None = None, secret_file: str = ""
) -> str:
    """Ask the master at `address` (gRPC) for `workers` workers; its answer. `secret_file`:
    the job's `job.secret` or its directory (none: the call is refused, UNAUTHENTICATED).

    ScaleRefused when it says no; ValueError when it cannot be reached or did not answer."""

    import grpc

    from elasticdl.proto import elasticdl_pb2 as pb
    from elasticdl.proto import elasticdl_pb2_grpc
    from elasticdl.runtime import auth
    from elasticdl.runtime.master.servicer import SCALE_ANSWER_S

    credentials = auth.secret_from_flag(secret_file) if secret_file else None
    with auth.channel(address, credentials) as channel:
        stub = elasticdl_pb2_grpc.MasterStub(channel)
        try:
            response = stub.scale_workers(
                pb.ScaleWorkersRequest(num_workers=workers),
                timeout=timeout_s or SCALE_ANSWER_S + 5,
            )
        except grpc.RpcError as err:
            raise ValueError(
                f"--master {address}: no master answered ({err.code().name}: {err.details()}); "
                "check the address the job logged as 'master on HOST:PORT'"
            ) from None
    if response.pending:
        raise ValueError(response.message)
    if not response.accepted:
        raise ScaleRefused(response.message)
    return str(response.message)


def _scale_on_kubernetes(args: argparse.Namespace) -> str:
    from elasticdl.runtime.k8s.scale import ScaleRequestError, request_scale

    api, namespace = core_api(args)
    try:
        return request_scale(api, namespace, args.job, args.workers, wait_s=args.wait)
    except ScaleRequestError as err:
        raise ValueError(str(err)) from None
