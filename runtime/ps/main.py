"""Parameter server process: `python -P -m elasticdl.runtime.ps.main --config JOB_JSON --ps_id I
--port P [--host 127.0.0.1] [--log_level info] [--local_job]`.

Logs "parameter server I listening on HOST:PORT" (stderr) once it accepts connections. SIGTERM or
SIGINT stops it gracefully (in-flight rpcs get 2 s, queued checkpoint writes up to 30 s) and it
exits 0. A startup error (unreadable config, bad model definition, busy port, no valid or a
mismatched checkpoint to restore from) prints one line and exits 1 (2 for bad arguments); a
port another process holds, `PORT_TAKEN_EXIT` (75: the master relaunches it on another port).

With `checkpoint_dir`/`checkpoint_steps` in the job config it writes checkpoints of its shard;
at start it restores from `checkpoint_dir` (a relaunch) or `checkpoint_dir_for_init`, logging
what it restored (see `elasticdl.runtime.ps.servicer.servicer_of`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from elasticdl.runtime.devices import LOCAL_JOB_FLAG, LOCAL_JOB_HELP

GRACE_S = 2.0
CHECKPOINT_GRACE_S = 30.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="elasticdl.runtime.ps.main", description=__doc__)
    parser.add_argument("--config", required=True, help="job config JSON written by the master")
    parser.add_argument("--ps_id", type=int, required=True, help="this shard's index")
    parser.add_argument("--port", type=int, required=True, help="port to listen on (0: any)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument(
        "--log_level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument(LOCAL_JOB_FLAG, action="store_true", help=LOCAL_JOB_HELP)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one parameter server until SIGTERM/SIGINT; returns the exit code."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.basicConfig(
        level=args.log_level.upper(),
        format=f"%(asctime)s ps{args.ps_id} %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    log = logging.getLogger("elasticdl.ps")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    from elasticdl.runtime.process_guard import exit_when_orphaned

    exit_when_orphaned()

    from elasticdl.runtime.devices import ProcessRole, use_devices
    from elasticdl.runtime.job_config import JobConfig, configure_tensorflow

    try:
        config = JobConfig.read(args.config)
    except (OSError, ValueError, TypeError) as error:
        print(
            f"parameter server {args.ps_id}: cannot read job config {args.config}: {error}",
            file=sys.stderr,
        )
        return 1
    if not 0 <= args.ps_id < config.num_ps:
        print(
            f"parameter server {args.ps_id}: --ps_id must be in [0, {config.num_ps}) "
            f"(num_ps in {args.config})",
            file=sys.stderr,
        )
        return 1
    try:
        configure_tensorflow(config)
        use_devices(ProcessRole.PS, args.local_job)
        from elasticdl.runtime import auth
        from elasticdl.runtime.master.exits import PORT_TAKEN_EXIT
        from elasticdl.runtime.ps.servicer import PortTakenError, servicer_of, start_server

        credentials = auth.for_process(args.config, config.secret_file, config.tls_dir)
        servicer = servicer_of(config, args.ps_id)
        try:
            server, port = start_server(servicer, args.port, args.host, credentials)
        except BaseException:
            servicer.close(0)
            raise
    except Exception as error:  # noqa: BLE001 - any startup failure is one line and exit 1
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if not message.startswith("parameter server"):
            message = f"parameter server {args.ps_id}: {message}"
        print(message, file=sys.stderr)
        return PORT_TAKEN_EXIT if isinstance(error, PortTakenError) else 1
    log.info("parameter server %d listening on %s:%d", args.ps_id, args.host, port)
    for handler in logging.getLogger().handlers:
        handler.flush()
    while not stop.wait(0.5):
        pass
    log.info("parameter server %d stopping", args.ps_id)
    server.stop(GRACE_S).wait()
    servicer.close(CHECKPOINT_GRACE_S)
    return 0


if __name__ == "__main__":
    from elasticdl.runtime.process_guard import exit_process

    exit_process(main())
