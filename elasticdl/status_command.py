"""`elasticdl status`: how a running training job is doing.

    elasticdl status --master HOST:PORT --secret_file LOG_DIR [--json]

The local engine logs "master on HOST:PORT, logs in LOG_DIR"; the master answers its `status`
call (runtime/master/status_service.py) with the live report: progress, workers and their
states, recent failures, the latest evaluation metrics. The call is authenticated like every
call to a job, with the job's secret that `--secret_file` reads (LOG_DIR/job.secret, or LOG_DIR),
as `elasticdl scale --master` does. Exit status 0 with the report, 2 when no master answered.
"""

from __future__ import annotations

import argparse
import json


def add_status_command(commands: argparse._SubParsersAction) -> None:
    status = commands.add_parser(
        "status",
        help="print the live report of a running training job",
        description="Ask a running training job's master for its live report: progress, "
        "workers and their states, recent failures, metrics.",
    )
    status.add_argument(
        "--master", required=True, help="HOST:PORT of the job's master (it logs 'master on')"
    )
    status.add_argument(
        "--secret_file",
        required=True,
        help="the job's secret: LOG_DIR/job.secret, or LOG_DIR itself",
    )
    status.add_argument("--json", action="store_true", help="print the report as JSON")
    status.add_argument("--timeout", type=float, default=10.0, help="seconds to wait (10)")


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


def run_status(args: argparse.Namespace) -> int:
    from elasticdl.runtime.master.live_status import format_status

    report = fetch(args.master, args.secret_file, args.timeout)
    print(json.dumps(report, indent=1) if args.json else format_status(report))
    return 0
