"""The master's `status` call: its live report (live_status.py) as JSON, on the job's gRPC
server, behind the same per-job secret as every call (runtime/auth.py).

It is a generic handler (service `elasticdl.MasterStatus`, method `status`, an empty request,
a UTF-8 JSON answer) rather than a proto message: the report's shape is the JSON one that
`job_report.json` readers know, and it can grow without regenerating the protocol.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc

SERVICE = "elasticdl.MasterStatus"
METHOD = f"/{SERVICE}/status"


def status_handler(report: Callable[[], dict[str, Any]]) -> grpc.GenericRpcHandler:
    """A handler that answers `status` with `report()`."""

    def status(request: bytes, context: grpc.ServicerContext) -> bytes:
        return json.dumps(report()).encode()

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "status": grpc.unary_unary_rpc_method_handler(
                status, request_deserializer=None, response_serializer=None
            )
        },
    )


def fetch_status(channel: grpc.Channel, timeout_s: float = 10.0) -> dict[str, Any]:
    """Ask the master on `channel` for its live report; grpc.RpcError if it does not answer."""
    call = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
    return dict(json.loads(call(b"", timeout=timeout_s)))
