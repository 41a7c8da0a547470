"""Client of N parameter-server shards, used by workers and the master.

Each variable lives on shard `ps_of(name, N)`. Every call goes to all shards in parallel (gRPC
futures) and waits for all of them. Versions are per shard: a worker keeps the `versions` list
of its last pull and sends it back with the next pull (a shard whose version is unchanged
answers with no tensors) and with its gradients.

Pushes go to *every* shard, even one with no variables in the push: each shard then counts the
push (versions advance together, and `applied_progress` is the minimum over shards). A push is
not atomic across shards: if one shard refuses it (an error, or a stale push in sync mode) the
others may still have applied their part.

Pulled values are read-only NumPy views of the response bytes: assign them to variables (which
copies) or copy them before mutating. Errors: `PSUnavailableError` when a shard cannot be
reached (UNAVAILABLE or past the deadline), `PSError` for any other refusal; both name the
shard and its address.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime import auth
from elasticdl.runtime.job_config import GRPC_OPTIONS
from elasticdl.runtime.ps.partition import ps_of
from elasticdl.runtime.tensor_codec import decode_all, encode

DEFAULT_TIMEOUT_S = 60.0
# A restarted parameter server should be reachable again within about a second, not after
# gRPC's default reconnect backoff (which grows to two minutes).
CHANNEL_OPTIONS = [
    *GRPC_OPTIONS,
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


class PSError(RuntimeError):
    """A parameter server refused a request (bad names, shapes, no model yet, ...)."""

    def __init__(self, shard: int, address: str, message: str, code: Any = None) -> None:
        super().__init__(f"parameter server {shard} ({address}): {message}")
        self.shard = shard
        self.address = address
        self.code = code


class PSUnavailableError(PSError):
    """A parameter server could not be reached (down, not started yet, or too slow)."""


@dataclass(frozen=True)
class PullResult:
    """What `PSClient.pull` gathered.

    `versions[i]`: shard i's version (-1 when it has no model yet). `values`: merged values
    (stable name -> read-only array) from the shards in `updated`, i.e. those whose version
    differed from the one the caller sent; the caller's copy of the other shards is current.
    """

    initialized: bool
    versions: list[int]
    values: dict[str, np.ndarray]
    updated: list[int]

    @property
    def version(self) -> int:
        """A model version every shard has reached (the minimum; -1 if any is uninitialized)."""
        return min(self.versions) if self.initialized else -1


@dataclass(frozen=True)
class PushResult:
    """What `PSClient.push_gradients` got: `accepted` is True only when every shard accepted;
    `shard_accepted[i]` and `versions[i]` are per shard."""

    accepted: bool
    shard_accepted: list[bool]
    versions: list[int]

    @property
    def accepted_all(self) -> bool:
        return self.accepted


class PSClient:
    """Talks to the parameter-server shards at `addresses` ("host:port", shard order)."""

    def __init__(
        self,
        addresses: Sequence[str],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        credentials: auth.JobAuth | None = None,
    ) -> None:
        """`credentials`: the job's (runtime/auth.py); every call then carries its secret."""
        if not addresses:
            raise ValueError("PSClient needs at least one parameter server address")
        self.addresses = list(addresses)
        self.timeout_s = timeout_s
        self._channels = [auth.channel(a, credentials, CHANNEL_OPTIONS) for a in self.addresses]
        self._stubs = [elasticdl_pb2_grpc.ParameterServerStub(c) for c in self._channels]

    @property
    def num_ps(self) -> int:
        return len(self.addresses)

    def shard_of(self, name: str) -> int:
        """Index of the shard holding variable `name`."""
        return ps_of(name, self.num_ps)

    def split(self, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """`values` divided by shard (a list of num_ps dicts, possibly empty)."""
        parts: list[dict[str, Any]] = [{} for _ in self.addresses]
        for name, value in values.items():
            parts[ps_of(name, self.num_ps)][name] = value
        return parts

    # -- calls ----------------------------------------------------------------------------
    def wait_ready(self, timeout_s: float) -> None:
        """Block until every shard's channel connects; PSUnavailableError names the first
        shard that did not within `timeout_s` (all shards wait concurrently)."""
        ready = [grpc.channel_ready_future(c) for c in self._channels]
        deadline = time.monotonic() + timeout_s
        try:
            for shard, future in enumerate(ready):
                try:
                    future.result(timeout=max(0.0, deadline - time.monotonic()))
                except grpc.FutureTimeoutError:
                    raise PSUnavailableError(
                        shard,
                        self.addresses[shard],
                        f"not reachable within {timeout_s:g} s",
                    ) from None
        finally:
            for future in ready:
                future.cancel()

    def pull_all(self) -> PullResult:
        """Every value from every shard, whatever the caller holds (`pull(None)`)."""
        return self.pull(None)

    def push_model(
        self, values: Mapping[str, np.ndarray], non_trainable: Iterable[str] = (), version: int = 0
    ) -> None:
        """Initialize every shard with its part of `values` (a shard keeps the first model it
        gets). `non_trainable` names take no gradients."""
        fixed = set(non_trainable)
        requests = [
            pb.Model(
                version=version,
                dense_parameters=[encode(n, v) for n, v in part.items()],
                non_trainable=[n for n in part if n in fixed],
            )
            for part in self.split(values)
        ]
        self._gather("push_model", requests)

    def pull(self, versions: Sequence[int] | int | None = None) -> PullResult:
        """Values from every shard whose version differs from `versions` (per shard, or one
        for all; None or -1: everything)."""
        known = self._per_shard(-1 if versions is None else versions)
        requests = [pb.PullDenseParametersRequest(version=v) for v in known]
        responses = self._gather("pull_dense_parameters", requests)
        values: dict[str, np.ndarray] = {}
        updated = []
        for shard, response in enumerate(responses):
            if response.dense_parameters:
                values.update(decode_all(response.dense_parameters))
                updated.append(shard)
        return PullResult(
            initialized=all(r.initialized for r in responses),
            versions=[r.version if r.initialized else -1 for r in responses],
            values=values,
            updated=updated,
        )

    def push_gradients(
        self,
        gradients: Mapping[str, np.ndarray],
        versions: Sequence[int] | int,
        *,
        task_id: int = 0,
        records_end: int = 0,
        non_trainable: Mapping[str, np.ndarray] | None = None,
        lr_scale: float = 1.0,
        worker_id: int = 0,
    ) -> PushResult:
        """Send each shard its gradients (computed on `versions`, per shard or one for all)
        and its non-trainable values; `records_end` of `task_id` counts once applied."""
        known = self._per_shard(versions)
        grad_parts = self.split(gradients)
        state_parts = self.split(non_trainable or {})
        requests = [
            pb.PushGradientsRequest(
                worker_id=worker_id,
                version=known[shard],
                gradients=[encode(n, g) for n, g in grad_parts[shard].items()],
                learning_rate_scale=lr_scale,
                task_id=task_id,
                records_end=records_end,
                non_trainable=[encode(n, v) for n, v in state_parts[shard].items()],
            )
            for shard in range(self.num_ps)
        ]
        responses = self._gather("push_gradients", requests)
        accepted = [r.accepted for r in responses]
        return PushResult(all(accepted), accepted, [r.version for r in responses])

    def applied_progress(self, task_ids: Iterable[int]) -> dict[int, int]:
        """For each task: records whose gradients reached every shard (minimum over shards)."""
        ids = [int(t) for t in task_ids]
        request = pb.AppliedProgressRequest(task_ids=ids)
        responses = self._gather("get_applied_progress", [request] * self.num_ps)
        return {t: min(r.records_end.get(t, 0) for r in responses) for t in ids}

    def close(self) -> None:
        for channel in self._channels:
            channel.close()

    def __enter__(self) -> PSClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers --------------------------------------------------------------------------
    def _per_shard(self, versions: Sequence[int] | int) -> list[int]:
        if isinstance(versions, int | np.integer):
            return [int(versions)] * self.num_ps
        versions = [int(v) for v in versions]
        if len(versions) != self.num_ps:
            raise ValueError(f"{len(versions)} versions given for {self.num_ps} shards")
        return versions

    def _gather(self, method: str, requests: list[Any]) -> list[Any]:
        calls = [
            getattr(stub, method).future(request, timeout=self.timeout_s)
            for stub, request in zip(self._stubs, requests, strict=True)
        ]
        responses = []
        failure: PSError | None = None
        for shard, call in enumerate(calls):
            try:
                responses.append(call.result())
            except grpc.RpcError as error:
                code = error.code()
                kind = PSUnavailableError if code in _UNREACHABLE else PSError
                if failure is None:
                    failure = kind(
                        shard,
                        self.addresses[shard],
                        f"{method} failed: {code.name}: {error.details()}",
                        code,
                    )
        if failure is not None:
            raise failure
        return responses
