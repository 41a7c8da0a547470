"""`elasticdl status`: how a running training job is doing.

    elasticdl status --master HOST:PORT --secret_file LOG_DIR [--json]
    elasticdl status JOB [--namespace NS] [--kubeconfig PATH] [--context CTX] [--json]

The master answers with the live report (runtime/master/live_status.py): progress, workers and
their states, recent failures, the latest evaluation metrics. Locally (the engine logs "master
on HOST:PORT, logs in LOG_DIR") through its `status` call (runtime/master/status_service.py),
authenticated like every call to a job with the job's secret that `--secret_file` reads
(LOG_DIR/job.secret, or LOG_DIR), as `elasticdl scale --master` does. On Kubernetes (JOB: the
job name, on Argo the workflow's) through an annotation on the job's ConfigMap
(runtime/k8s/status_channel.py), as `elasticdl scale JOB` does. Exit status 0 with the report,
2 when no master answered.
"""

from __future__ import annotations

import argparse
import json

from elasticdl.cluster_args import add_cluster_arguments, core_api


def add_status_command(commands: argparse._SubParsersAction) -> None:
    status = commands.add_parser(
        "status",
        help="print the live report of a running training job",
        description="Ask a running training job's master for its live report: progress, "
        "workers and their states, recent failures, metrics.",
    )
    status.add_argument(
        "job", nargs="?", default="", help="the job's name (Kubernetes; on Argo: the workflow)"
    )
    status.add_argument(
        "--master", default="", help="HOST:PORT of the job's master (it logs 'master on')"
    )
    status.add_argument(
        "--secret_file",
        default="",
        help="with --master: the job's secret, LOG_DIR/job.secret, or LOG_DIR itself",
    )
    status.add_argument("--json", action="store_true", help="print the report as JSON")
    status.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to wait for the answer (default: 10 with --master, 30 on Kubernetes)",
    )
    add_cluster_arguments(status)


def fetch(address: str, secret_file: str, timeout_s: float = 10.0) -> dict:
    """The live report of the job whose master is at `address`; ValueError (one line) when
    the secret cannot be read or no master answered."""
    import grpc

    from elasticdl.runtime import auth
    from elasticdl.runtime.master.status_service import fetch_status

    credentials = auth.secret_from_flag(secret_file)
    with auth.channel(address, credentials) as channel:
        try:
            return fetch_status(channel, timeout_s)
        except grpc.RpcError as err:
            raise ValueError(
                f"--master {address}: no status ({err.code().name}: {err.details()}); check the "
                "address the job logged as 'master on HOST:PORT' and that the job still runs"
            ) from None


def fetch_on_kubernetes(args: argparse.Namespace, timeout_s: float = 30.0) -> dict:
    """The live report of job `args.job` on Kubernetes; ValueError (one line) otherwise."""
    from elasticdl.runtime.k8s.status_channel import StatusRequestError, request_status

    api, namespace = core_api(args)
    try:
        return request_status(api, namespace, args.job, wait_s=timeout_s)
    except StatusRequestError as err:
        raise ValueError(str(err)) from None


def run_status(args: argparse.Namespace) -> int:
    from elasticdl.runtime.master.live_status import format_status

    if bool(args.job) == bool(args.master):
        raise ValueError("give the job's name (Kubernetes) or --master HOST:PORT, one of them")
    if args.master:
        if not args.secret_file:
            raise ValueError(
                "--master needs --secret_file: the job's log directory (it logged 'master on "
                "HOST:PORT, logs in LOG_DIR') or the job.secret file in it"
            )
        report = fetch(args.master, args.secret_file, args.timeout or 10.0)
    else:
        report = fetch_on_kubernetes(args, args.timeout or 30.0)
    print(json.dumps(report, indent=1) if args.json else format_status(report))
    return 0
