"""Client of N parameter-server shards, used by workers and the master.

Each variable lives on shard `ps_of(name, N)`. Every call goes to all shards in parallel (on
the client's call threads, runtime/rpc_calls.py) and waits for all of them. Versions are per
shard: a worker keeps the `versions` list of its last pull and sends it back with the next
pull (a shard whose version is unchanged answers with no tensors) and with its gradients.

Pushes go to *every* shard, even one with no variables in the push: each shard then counts the
push (versions advance together, and `applied_progress` is the minimum over shards). A push is
not atomic across shards: if one shard refuses it (an error, or a stale push in sync mode) the
others may still have applied their part.

Embedding tables: `push_model(..., embedding_tables=[...])` declares them on every shard (specs
with `name`, `dim`, `initializer` and optionally `seed`: `TableSpec`, proto `EmbeddingTableInfo`,
any object with those attributes, or a (name, dim[, initializer[, seed]]) tuple). A row lives
on shard `embedding_shard(id, N)`. `pull_embedding_vectors(name, ids)` dedupes the ids, sends
each shard one batched call for its ids (all shards in parallel) and returns float32 rows
(len(ids), dim) in the order of `ids`; `pull_embeddings({name: ids})` does several tables with
one call per shard. `push_gradients(..., embedding_grads={name: (ids, values)})` sends each
shard the rows it owns in the same request as its dense gradients, so they share its
accept/reject decision. Duplicate ids need not be reduced by the caller: the parameter server
sums them (reducing first only saves bytes). `describe_embedding_tables()` and
`read_embedding_table(name)` give every table's spec, row counts and all rows (for exports);
`pull_all()` adds every table's rows to the dense values as `embedding:<table>:ids`/`:rows`.

Relaunched shards: a parameter server relaunched after a failure may listen on a new address
(its old port may have been taken). With `resolve` (a callable giving the shards' current
addresses; a worker asks the master, `Master.get_ps_addresses`), `wait_ready` re-points shards
whose address changed and waits until every shard answers a call at its current address;
`set_address` re-points one shard.

`push_gradients(..., return_parameters=True)` makes the push also the pull: shards whose
version moved answer with their values (`PushResult.values`); `encode_push` and `send_push`
split it, to encode a push while another is in flight and send it without waiting
(`PendingPush.result()`). Gradients go on the wire straight from the arrays'
buffers and answers are parsed without copying their tensors (runtime/ps/wire.py).

Pulled values are read-only NumPy views of the response bytes: assign them to variables (which
copies) or copy them before mutating. Errors: `PSUnavailableError` when a shard cannot be
reached (UNAVAILABLE or past the deadline), `PSError` for any other refusal; both name the
shard and its address.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime import auth
from elasticdl.runtime.job_config import GRPC_OPTIONS
from elasticdl.runtime.ps.embedding_table import TableSpec, take_rows
from elasticdl.runtime.ps.partition import embedding_shard, ps_of
from elasticdl.runtime.ps.wire import parse_with_tensors, serialize_with_tensors
from elasticdl.runtime.rpc_calls import CallThreads
from elasticdl.runtime.tensor_codec import decode, encode

DEFAULT_TIMEOUT_S = 60.0
EMBEDDING_PREFIX = "embedding:"  # pull_all's keys of table rows: embedding:<table>:ids / :rows
# A restarted parameter server should be reachable again within about a second, not after
# gRPC's default reconnect backoff (which grows to two minutes); a starting one within a few
# tens of milliseconds of listening: a worker's first connection attempt usually comes before
# (its TensorFlow import is as long as the PS's), and with 200 ms here and between probes
# it waited 0.2-0.45 s for a PS that was up.
CHANNEL_OPTIONS = [
    *GRPC_OPTIONS,
    ("grpc.initial_reconnect_backoff_ms", 40),
    ("grpc.min_reconnect_backoff_ms", 40),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
PROBE_PAUSES_S = (0.04, 0.2)
"""`wait_ready`: the pause between rounds of probes while a shard does not answer, in the
first second (a PS starting with the job) and after it (each round also asks the master for
addresses: many workers waiting for a relaunched PS must not flood it)."""
RESOLVE_PROBE_S = 2.0
"""With `resolve`, how long `wait_ready` gives a shard to answer before asking again."""
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
_SERVICE = "/elasticdl.ParameterServer"
_GRADIENTS_FIELD = pb.PushGradientsRequest.DESCRIPTOR.fields_by_name["gradients"].number
_PARAMETERS_FIELD = pb.PushGradientsResponse.DESCRIPTOR.fields_by_name["dense_parameters"].number
assert _PARAMETERS_FIELD == (
    pb.PullDenseParametersResponse.DESCRIPTOR.fields_by_name["dense_parameters"].number
)


class PSError(RuntimeError):
    """A parameter server refused a request (bad names, shapes, no model yet, ...)."""

    def __init__(self, shard: int, address: str, message: str, code: Any = None) -> None:
        super().__init__(f"parameter server {shard} ({address}): {message}")
        self.detail = message
        self.shard = shard
        self.address = address
        self.code = code


class PSUnavailableError(PSError):
    """A parameter server could not be reached (down, not started yet, or too slow)."""


class PSNeverReadyError(PSUnavailableError):
    """`wait_ready_behind` gave up: a shard did not answer within its time after start-up."""


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
    `shard_accepted[i]` and `versions[i]` are per shard. With `return_parameters`: `values`
    (merged, read-only arrays) from the shards in `updated`, those whose version after the push
    differs from the one the gradients were computed on (a pull's answer, see `PullResult`).
    `staleness[i]`: how many versions behind shard i applied the push (async)."""

    accepted: bool
    shard_accepted: list[bool]
    versions: list[int]
    values: dict[str, np.ndarray] = field(default_factory=dict)
    updated: list[int] = field(default_factory=list)
    staleness: list[int] = field(default_factory=list)

    @property
    def accepted_all(self) -> bool:
        return self.accepted


class _ShardCalls:
    """One shard's channel and its calls. The tensor-heavy calls skip protobuf's copies of
    tensor bytes (runtime/ps/wire.py); the others go through the generated stub."""

    def __init__(self, address: str, credentials: Any) -> None:
        self.channel = auth.channel(address, credentials, CHANNEL_OPTIONS)
        self._stub = elasticdl_pb2_grpc.ParameterServerStub(self.channel)
        self._fast = {
            "push_gradients": self.channel.unary_unary(
                f"{_SERVICE}/push_gradients",
                request_serializer=None,
                response_deserializer=_push_answer,
            ),
            "pull_dense_parameters": self.channel.unary_unary(
                f"{_SERVICE}/pull_dense_parameters",
                request_serializer=pb.PullDenseParametersRequest.SerializeToString,
                response_deserializer=_pull_answer,
            ),
        }

    def method(self, name: str) -> Any:
        return self._fast.get(name) or getattr(self._stub, name)


class PSClient:
    """Talks to the parameter-server shards at `addresses` ("host:port", shard order)."""

    def __init__(
        self,
        addresses: Sequence[str],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        credentials: auth.JobAuth | None = None,
        resolve: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        """`credentials`: the job's (runtime/auth.py); every call then carries its secret.
        `resolve`: the shards' current addresses (see the module docstring)."""
        if not addresses:
            raise ValueError("PSClient needs at least one parameter server address")
        self.addresses = list(addresses)
        self.timeout_s = timeout_s
        self._credentials = credentials
        self._resolve = resolve
        self._shards = [_ShardCalls(a, credentials) for a in self.addresses]
        # Per shard a push in flight, a pull beside it (sparse models) and a probe.
        self._calls = CallThreads(threads=3 * len(self.addresses), name="ps-calls")
        self._becoming_ready: Future[None] | None = None

    def set_address(self, shard: int, address: str) -> None:
        """Shard `shard` now listens at `address` (a relaunch): later calls go there."""
        if address == self.addresses[shard]:
            return
        old = self._shards[shard]
        self._shards[shard] = _ShardCalls(address, self._credentials)
        self.addresses[shard] = address
        old.channel.close()

    @property
    def num_ps(self) -> int:
        return len(self.addresses)

    def split(self, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """`values` divided by shard (a list of num_ps dicts, possibly empty)."""
        parts: list[dict[str, Any]] = [{} for _ in self.addresses]
        for name, value in values.items():
            parts[ps_of(name, self.num_ps)][name] = value
        return parts

    # -- calls ----------------------------------------------------------------------------
    def wait_ready_behind(self, timeout_s: float) -> None:
        """`wait_ready` on a thread of its own, and return: the next call waits for it, and
        raises PSNeverReadyError when it gave up. Why: a worker's TensorFlow import takes as
        long as a PS's, and the PS then still builds its servicer (0.2-0.3 s); the worker
        builds its model meanwhile instead of waiting first."""
        becoming_ready: Future[None] = Future()

        def wait() -> None:
            try:
                self.wait_ready(timeout_s)
                becoming_ready.set_result(None)
            except PSUnavailableError as error:
                never = PSNeverReadyError(error.shard, error.address, error.detail)
                becoming_ready.set_exception(never)
            except BaseException as error:  # noqa: BLE001 - the next call raises it
                becoming_ready.set_exception(error)

        self._becoming_ready = becoming_ready
        threading.Thread(target=wait, name="ps-ready", daemon=True).start()

    def wait_ready(self, timeout_s: float) -> None:
        """Block until every shard's channel connects; PSUnavailableError names the first
        shard that did not within `timeout_s` (all shards wait concurrently). With `resolve`,
        until every shard answers at its current address (see the module docstring)."""
        if self._resolve is not None:
            self._wait_resolved(timeout_s)
            return
        ready = [grpc.channel_ready_future(s.channel) for s in self._shards]
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

    def _wait_resolved(self, timeout_s: float) -> None:
        """Ask for the shards' addresses, re-point those that moved, and probe every shard
        (a short call); again until all answer or `timeout_s` passes."""
        started = time.monotonic()
        deadline = started + timeout_s
        while True:
            self._re_resolve()
            left = deadline - time.monotonic()
            calls = [
                self._calls.submit(
                    shard.method("get_applied_progress"),
                    pb.AppliedProgressRequest(),
                    timeout=max(0.01, min(RESOLVE_PROBE_S, left)),
                )
                for shard in self._shards
            ]
            silent = []
            for shard, call in enumerate(calls):
                try:
                    call.result()
                except grpc.RpcError:
                    silent.append(shard)
            if not silent:
                return
            if time.monotonic() >= deadline:
                shard = silent[0]
                raise PSUnavailableError(
                    shard, self.addresses[shard], f"not reachable within {timeout_s:g} s"
                )
            now = time.monotonic()
            pause = PROBE_PAUSES_S[0] if now - started < 1.0 else PROBE_PAUSES_S[1]
            time.sleep(min(pause, max(0.0, deadline - now)))

    def _re_resolve(self) -> None:
        assert self._resolve is not None
        try:
            current = list(self._resolve())
        except Exception:  # noqa: BLE001 - the master is busy or gone: keep the known addresses
            return
        if len(current) != self.num_ps:
            return
        for shard, address in enumerate(current):
            self.set_address(shard, address)

    def pull_all(self, embeddings: bool = True) -> PullResult:
        """Every value from every shard, whatever the caller holds (`pull(None)`), and (with
        `embeddings`) every embedding table's rows as `embedding:<table>:ids` (n,) int64 and
        `embedding:<table>:rows` (n, dim) float32 (the final pull of a job: params.npz)."""
        result = self.pull(None)
        if not embeddings or not result.initialized:
            return result
        values = dict(result.values)
        for name in self.describe_embedding_tables():
            ids, rows = self.read_embedding_table(name)
            values[f"{EMBEDDING_PREFIX}{name}:ids"] = ids
            values[f"{EMBEDDING_PREFIX}{name}:rows"] = rows
        return PullResult(result.initialized, result.versions, values, result.updated)

    def push_model(
        self,
        values: Mapping[str, np.ndarray],
        non_trainable: Iterable[str] = (),
        version: int = 0,
        embedding_tables: Iterable[Any] = (),
    ) -> None:
        """Initialize every shard with its part of `values` (a shard keeps the first model it
        gets). `non_trainable` names take no gradients. `embedding_tables` (specs, see the
        module docstring) are declared on every shard."""
        fixed = set(non_trainable)
        infos = [table_info(spec) for spec in embedding_tables]
        requests = [
            pb.Model(
                version=version,
                dense_parameters=[encode(n, v) for n, v in part.items()],
                non_trainable=[n for n in part if n in fixed],
                embedding_table_infos=infos,
            )
            for part in self.split(values)
        ]
        self._gather("push_model", requests)

    def pull(self, versions: Sequence[int] | int | None = None) -> PullResult:
        """Values from every shard whose version differs from `versions` (per shard, or one
        for all; None or -1: everything)."""
        known = _per_shard(-1 if versions is None else versions, self.num_ps)
        requests = [pb.PullDenseParametersRequest(version=v) for v in known]
        answers = self._gather("pull_dense_parameters", requests)
        values: dict[str, np.ndarray] = {}
        updated = []
        responses = []
        for shard, (response, tensors) in enumerate(answers):
            responses.append(response)
            if tensors:
                values.update(tensors)
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
        embedding_grads: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
        return_parameters: bool = False,
    ) -> PushResult:
        """Send each shard its gradients (computed on `versions`, per shard or one for all),
        its rows of `embedding_grads` (table -> (ids, values)) and its non-trainable values;
        `records_end` of `task_id` counts once applied. `return_parameters`: shards whose
        version moved answer with their values (the push is also a pull)."""
        encoded = self.encode_push(
            gradients,
            versions,
            task_id=task_id,
            records_end=records_end,
            non_trainable=non_trainable,
            lr_scale=lr_scale,
            worker_id=worker_id,
            embedding_grads=embedding_grads,
            return_parameters=return_parameters,
        )
        return self.send_push(encoded).result()

    def send_push(self, requests: list[bytes]) -> PendingPush:
        """Send a push `encode_push` made, without waiting: the answers are gathered by
        `PendingPush.result()` (which raises the call's PSError)."""
        return PendingPush(self, self._send("push_gradients", requests))

    def encode_push(
        self,
        gradients: Mapping[str, np.ndarray],
        versions: Sequence[int] | int,
        *,
        task_id: int = 0,
        records_end: int = 0,
        non_trainable: Mapping[str, np.ndarray] | None = None,
        lr_scale: float = 1.0,
        worker_id: int = 0,
        embedding_grads: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
        return_parameters: bool = False,
    ) -> list[bytes]:
        """The requests of a `push_gradients` (one per shard; the gradients copied once),
        to send later with `send_push`: a worker encodes a push while the one before it is
        still in flight."""
        known = _per_shard(versions, self.num_ps)
        grad_parts = self.split(gradients)
        state_parts = self.split(non_trainable or {})
        sparse_parts = _split_sparse(embedding_grads or {}, self.num_ps)
        return [
            serialize_with_tensors(
                pb.PushGradientsRequest(
                    worker_id=worker_id,
                    version=known[shard],
                    learning_rate_scale=lr_scale,
                    task_id=task_id,
                    records_end=records_end,
                    non_trainable=[encode(n, v) for n, v in state_parts[shard].items()],
                    embedding_gradients=sparse_parts[shard],
                    return_parameters=return_parameters,
                ),
                _GRADIENTS_FIELD,
                grad_parts[shard],
            )
            for shard in range(self.num_ps)
        ]

    def pull_embedding_vectors(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows (float32, (len(ids), dim)) of table `name` in the order of `ids` (int64,
        duplicates allowed): one batched call per shard holding some of them, in parallel."""
        return self.pull_embeddings({name: ids})[name]

    def pull_embeddings(self, ids_by_table: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`pull_embedding_vectors` for several tables with one call per shard."""
        plans = {name: _plan(ids, self.num_ps) for name, ids in ids_by_table.items()}
        shards = sorted({s for plan in plans.values() for s, _ in plan.parts})
        requests = [
            pb.PullEmbeddingTablesRequest(
                ids=[
                    encode(name, part)
                    for name, plan in plans.items()
                    for s, part in plan.parts
                    if s == shard
                ]
            )
            for shard in shards
        ]
        responses = self._gather("pull_embedding_tables", requests, shards)
        rows: dict[str, list[np.ndarray]] = {name: [] for name in plans}
        for response in responses:
            for tensor in response.vectors:
                rows[tensor.name].append(decode(tensor))
        return {name: plan.assemble(rows[name]) for name, plan in plans.items()}

    def describe_embedding_tables(self) -> dict[str, tuple[TableSpec, int]]:
        """Every table the shards hold: its spec and its rows over all shards."""
        responses = self._gather("describe_embedding_tables", [pb.Empty()] * self.num_ps)
        out: dict[str, tuple[TableSpec, int]] = {}
        for response in responses:
            for info, rows in zip(response.infos, response.rows, strict=True):
                spec = TableSpec(info.name, int(info.dim), info.initializer, int(info.seed))
                out[info.name] = (spec, out.get(info.name, (spec, 0))[1] + int(rows))
        return out

    def restored_embedding_rows(
        self, shards: Sequence[int] | None = None
    ) -> list[tuple[int, dict[str, int]]]:
        """Per shard (`shards`, default all): (checkpoint version it restored at start, rows per
        table it restored); (-1, {}) for a shard that started without a checkpoint."""
        shards = list(range(self.num_ps)) if shards is None else list(shards)
        responses = self._gather("describe_embedding_tables", [pb.Empty()] * len(shards), shards)
        return [(int(r.restored_version), dict(r.restored_rows)) for r in responses]

    def read_embedding_table(
        self, name: str, page_rows: int = 1 << 18
    ) -> tuple[np.ndarray, np.ndarray]:
        """(ids, rows) of every row of table `name` on every shard (shard by shard, pages of
        `page_rows` rows, the shards in parallel). Rows created meanwhile may be included."""
        starts = [0] * self.num_ps
        done = [False] * self.num_ps
        ids: list[np.ndarray] = []
        rows: list[np.ndarray] = []
        while not all(done):
            shards = [s for s in range(self.num_ps) if not done[s]]
            requests = [
                pb.ReadEmbeddingRowsRequest(name=name, start=starts[s], limit=page_rows)
                for s in shards
            ]
            for shard, response in zip(
                shards, self._gather("read_embedding_rows", requests, shards), strict=True
            ):
                page_ids, page_rows_ = decode(response.rows.ids), decode(response.rows.values)
                ids.append(page_ids)
                rows.append(page_rows_)
                starts[shard] += page_ids.size
                done[shard] = page_ids.size == 0 or starts[shard] >= response.total
        return np.concatenate(ids), np.concatenate(rows)

    def applied_progress(self, task_ids: Iterable[int]) -> dict[int, int]:
        """For each task: records whose gradients reached every shard (minimum over shards)."""
        ids = [int(t) for t in task_ids]
        request = pb.AppliedProgressRequest(task_ids=ids)
        responses = self._gather("get_applied_progress", [request] * self.num_ps)
        return {t: min(r.records_end.get(t, 0) for r in responses) for t in ids}

    def checkpoint_health(self, flush_s: float = 0.0) -> list[pb.CheckpointHealth]:
        """Each shard's checkpoint writes so far, after it waited up to `flush_s` seconds for
        its queued ones (shard order)."""
        request = pb.AppliedProgressRequest(flush_checkpoints_s=flush_s)
        responses = self._gather("get_applied_progress", [request] * self.num_ps)
        return [r.checkpoints for r in responses]

    def close(self) -> None:
        for shard in self._shards:
            shard.channel.close()

    def __enter__(self) -> PSClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers --------------------------------------------------------------------------
    def _gather(
        self, method: str, requests: list[Any], shards: Sequence[int] | None = None
    ) -> list[Any]:
        """Call `method` on `shards` (default: all, in order) with `requests`, in parallel."""
        return self._collect(self._send(method, requests, shards))

    def _send(
        self, method: str, requests: list[Any], shards: Sequence[int] | None = None
    ) -> tuple[str, list[int], list[Any]]:
        if self._becoming_ready is not None:
            self._becoming_ready.result()
            self._becoming_ready = None
        shards = list(range(self.num_ps)) if shards is None else list(shards)
        calls = [
            self._calls.submit(self._shards[shard].method(method), request, timeout=self.timeout_s)
            for shard, request in zip(shards, requests, strict=True)
        ]
        return method, shards, calls

    def _collect(self, sent: tuple[str, list[int], list[Any]]) -> list[Any]:
        method, shards, calls = sent
        responses = []
        failure: PSError | None = None
        for shard, call in zip(shards, calls, strict=True):
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


class PendingPush:
    """A push on its way (`PSClient.send_push`); `result()` waits for it once."""

    def __init__(self, client: PSClient, sent: tuple[str, list[int], list[Any]]) -> None:
        self._client = client
        self._sent = sent
        self._result: PushResult | None = None

    def done(self) -> bool:
        return self._result is not None or all(call.done() for call in self._sent[2])

    def result(self) -> PushResult:
        if self._result is None:
            answers = self._client._collect(self._sent)
            values: dict[str, np.ndarray] = {}
            updated = []
            responses = []
            for shard, (response, tensors) in enumerate(answers):
                responses.append(response)
                if tensors:
                    values.update(tensors)
                    updated.append(shard)
            accepted = [r.accepted for r in responses]
            self._result = PushResult(
                all(accepted),
                accepted,
                [r.version for r in responses],
                values,
                updated,
                [int(r.staleness) for r in responses],
            )
        return self._result


def _push_answer(data: bytes) -> tuple[pb.PushGradientsResponse, dict[str, np.ndarray]]:
    return parse_with_tensors(data, pb.PushGradientsResponse, _PARAMETERS_FIELD)


def _pull_answer(data: bytes) -> tuple[pb.PullDenseParametersResponse, dict[str, np.ndarray]]:
    return parse_with_tensors(data, pb.PullDenseParametersResponse, _PARAMETERS_FIELD)


def _per_shard(versions: Sequence[int] | int, num_ps: int) -> list[int]:
    """One version per shard: `versions` repeated, or checked to have one for each."""
    if isinstance(versions, int | np.integer):
        return [int(versions)] * num_ps
    versions = [int(v) for v in versions]
    if len(versions) != num_ps:
        raise ValueError(f"{len(versions)} versions given for {num_ps} shards")
    return versions


def _split_sparse(
    grads: Mapping[str, tuple[np.ndarray, np.ndarray]], num_ps: int
) -> list[list[pb.EmbeddingSlices]]:
    """Embedding gradients (table -> (ids, rows)) divided by the shard that owns each id."""
    parts: list[list[pb.EmbeddingSlices]] = [[] for _ in range(num_ps)]
    for name, (ids, values) in grads.items():
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        values = np.asarray(values, dtype=np.float32)
        if values.ndim != 2 or values.shape[0] != ids.size:
            raise ValueError(
                f"embedding gradient {name!r}: values of shape {values.shape} for "
                f"{ids.size} ids (expected ({ids.size}, dim))"
            )
        owner = embedding_shard(ids, num_ps)
        for shard in range(num_ps):
            mine = owner == shard if num_ps > 1 else slice(None)
            parts[shard].append(
                pb.EmbeddingSlices(
                    name=name,
                    ids=encode(name, ids[mine]),
                    values=encode(name, values[mine]),
                )
            )
    return parts


def table_info(spec: Any) -> pb.EmbeddingTableInfo:
    """A proto `EmbeddingTableInfo` from a table spec (see the module docstring)."""
    if isinstance(spec, pb.EmbeddingTableInfo):
        return spec
    if isinstance(spec, tuple | list):
        spec = TableSpec(*spec)
    try:
        name, dim = str(spec.name), int(spec.dim)
    except (AttributeError, TypeError, ValueError):
        raise ValueError(f"embedding table spec {spec!r} needs a name and an integer dim") from None
    if not name or dim <= 0:
        raise ValueError(f"embedding table spec {spec!r}: name must be set and dim >= 1")
    initializer = getattr(spec, "initializer", None) or "uniform"
    seed = int(getattr(spec, "seed", 0) or 0)
    return pb.EmbeddingTableInfo(
        name=name, dim=dim, initializer=str(initializer), dtype=pb.DT_FLOAT32, seed=seed
    )


@dataclass(frozen=True)
class _Plan:
    """How the ids of one table are split over shards and the rows put back in order."""

    parts: list[tuple[int, np.ndarray]]
    order: np.ndarray | None  # position in the concatenated answers of each unique id
    inverse: np.ndarray  # unique id of each asked id
    count: int

    def assemble(self, answers: list[np.ndarray]) -> np.ndarray:
        if not answers:
            return np.zeros((self.count, 0), dtype=np.float32)
        rows = answers[0] if len(answers) == 1 else np.concatenate(answers)
        where = self.inverse if self.order is None else self.order[self.inverse]
        return take_rows(rows, where)


def _plan(ids: np.ndarray, num_ps: int) -> _Plan:
    ids = np.asarray(ids)
    if ids.size and ids.dtype.kind not in "iu":
        raise ValueError(f"embedding ids must be integers, got dtype {ids.dtype}")
    ids = ids.astype(np.int64, copy=False).reshape(-1)
    unique, inverse = np.unique(ids, return_inverse=True)
    if num_ps == 1 or unique.size == 0:  # an empty pull still learns the table's dim
        return _Plan([(0, unique)], None, inverse, ids.size)
    owner = embedding_shard(unique, num_ps)
    by_shard = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[by_shard], np.arange(num_ps + 1))
    parts = [
        (shard, unique[by_shard[bounds[shard] : bounds[shard + 1]]])
        for shard in range(num_ps)
        if bounds[shard + 1] > bounds[shard]
    ]
    order = np.empty(unique.size, dtype=np.int64)
    order[by_shard] = np.arange(unique.size)
    return _Plan(parts, order, inverse, ids.size)
