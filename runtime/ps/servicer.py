"""The gRPC `ParameterServer` service of one shard, around a `Parameters` store.

All state and locking live in `Parameters` (thread-safe); the servicer only decodes, checks that
names belong to this shard, maps errors to gRPC status codes and encodes replies, so the gRPC
thread pool runs decoding/encoding of different requests in parallel.

Status codes: FAILED_PRECONDITION for gradients or embedding lookups before the model was
pushed; INVALID_ARGUMENT for names that do not belong to this shard, unknown variables, wrong
shapes or a corrupt tensor (or a pushed model that differs from the one held), for unknown
embedding tables and for embedding ids that hash to another shard (`embedding_shard`).

One round trip per minibatch: a push with `return_parameters` answers with the shard's values
when its version moved past the push's (read atomically with the application). The two rpcs
that carry a model's worth of tensors (`push_gradients`, `pull_dense_parameters`) are served
with fewer copies (runtime/ps/wire.py): gradients are read as views of the request bytes and
values are written into the answer with one copy.

Embedding tables: declared by push_model (`Model.embedding_table_infos`, every shard gets all of
them); `pull_embedding_vectors` (one table) and `pull_embedding_tables` (several) answer rows in
the order of the ids asked for, creating missing rows; sparse gradients come with
`push_gradients` (`embedding_gradients`) and follow the dense push's accept/reject decision.

Checkpoints (`servicer_of`): with `checkpoint_dir` and `checkpoint_steps` set, the shard's state
is captured under the store's lock when the model is pushed and whenever the version reaches a
multiple of `checkpoint_steps`, and written by a background `CheckpointWriter` (then pruned to
`keep_checkpoint_max` valid versions). At start a shard restores, re-sharding as needed, from
the latest valid checkpoint in `checkpoint_dir` (a relaunched PS of a running job), else from
`checkpoint_dir_for_init` (which must then hold one).
"""

from __future__ import annotations

import errno
import logging
import time
from concurrent import futures
from typing import Any

import grpc
import numpy as np

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime import auth
from elasticdl.runtime.job_config import GRPC_OPTIONS, JobConfig, host_port
from elasticdl.runtime.ps import checkpoint
from elasticdl.runtime.ps.checkpoint import CheckpointWriter
from elasticdl.runtime.ps.embedding_table import TableSpec
from elasticdl.runtime.ps.parameters import GradientPolicy, NotInitializedError, Parameters
from elasticdl.runtime.ps.partition import embedding_shard, ps_of
from elasticdl.runtime.ps.wire import parse_with_tensors, serialize_with_tensors
from elasticdl.runtime.tensor_codec import decode, encode

_GRADIENTS_FIELD = pb.PushGradientsRequest.DESCRIPTOR.fields_by_name["gradients"].number
_PARAMETERS_FIELD = pb.PushGradientsResponse.DESCRIPTOR.fields_by_name["dense_parameters"].number

_log = logging.getLogger(__name__)

MAX_WORKERS = 8
# gRPC turns SO_REUSEPORT on by default: a second server on a busy port would then bind
# successfully and silently share the port's connections. Off, binding a busy port fails.
SERVER_OPTIONS = [*GRPC_OPTIONS, ("grpc.so_reuseport", 0)]


class ParameterServerServicer(elasticdl_pb2_grpc.ParameterServerServicer):
    """Shard `ps_id` of `num_ps`: serves and updates the variables that hash to it."""

    def __init__(
        self,
        parameters: Parameters,
        ps_id: int = 0,
        num_ps: int = 1,
        writer: CheckpointWriter | None = None,
    ) -> None:
        if not 0 <= ps_id < num_ps:
            raise ValueError(f"ps_id must be in [0, {num_ps}), got {ps_id}")
        self.parameters = parameters
        self.ps_id = ps_id
        self.num_ps = num_ps
        self.writer = writer

    def close(self, timeout: float | None = None) -> bool:
        """Finish queued checkpoint writes (up to `timeout` seconds) and stop the writer;
        False when writes were still going on at the timeout."""
        return self.writer is None or self.writer.close(timeout)

    # -- rpcs -----------------------------------------------------------------------------
    def push_model(self, request: pb.Model, context: grpc.ServicerContext) -> pb.Empty:
        """Initialize the shard from the first model pushed; later pushes are ignored."""
        values = self._decode(request.dense_parameters, context, "model")
        self._check_shard(values, context, "model")
        try:
            tables = [table_spec_of(info) for info in request.embedding_table_infos]
            created = self.parameters.initialize(
                values,
                set(request.non_trainable),
                version=request.version,
                embedding_tables=tables,
            )
        except (ValueError, TypeError) as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self._who()}: {error}")
        if created:
            params = sum(int(np.size(v)) for v in values.values())
            _log.info(
                "%s initialized: %d variables (%d values), %d embedding tables, version %d",
                self._who(),
                len(values),
                params,
                len(tables),
                request.version,
            )
        return pb.Empty()

    def pull_dense_parameters(
        self, request: pb.PullDenseParametersRequest, context: grpc.ServicerContext
    ) -> pb.PullDenseParametersResponse:
        """Values only when the caller's version differs from this shard's."""
        raw = self.pull_dense_parameters_bytes(request, context)
        return pb.PullDenseParametersResponse.FromString(raw)

    def pull_dense_parameters_bytes(
        self, request: pb.PullDenseParametersRequest, context: grpc.ServicerContext
    ) -> bytes:
        """`pull_dense_parameters`, serialized with one copy of the values (wire.py)."""
        snapshot = self.parameters.snapshot(known_version=request.version)
        head = pb.PullDenseParametersResponse(
            initialized=snapshot.initialized, version=snapshot.version
        )
        return serialize_with_tensors(head, _PARAMETERS_FIELD, snapshot.values or {})

    def push_gradients(
        self, request: pb.PushGradientsRequest, context: grpc.ServicerContext
    ) -> pb.PushGradientsResponse:
        """Gradients through the sync/async policy; non-trainable values of accepted pushes;
        with `return_parameters`, the values after the push when the version moved."""
        return pb.PushGradientsResponse.FromString(self.push_gradients_bytes(request, context))

    def push_gradients_bytes(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """`push_gradients` for a request as a message or as `wire.parse_with_tensors` gives
        it (message, gradients viewing the received bytes); the answer serialized with one
        copy of the values."""
        if isinstance(request, tuple):
            request, gradients = request
        else:
            gradients = self._decode(request.gradients, context, "gradients")
        if not self.parameters.initialized:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{self._who()} has no model yet: push_model must come before push_gradients",
            )
        self._check_shard(gradients, context, "gradients")
        non_trainable = self._decode(request.non_trainable, context, "non-trainable values")
        self._check_shard(non_trainable, context, "non-trainable values")
        sparse = {}
        for part in request.embedding_gradients:
            ids = self._decode_ids(part.ids, context, part.name)
            try:
                sparse[part.name] = (ids, decode(part.values))
            except ValueError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self._who()}: {error}")
        try:
            result = self.parameters.push_gradients(
                gradients,
                request.version,
                task_id=request.task_id,
                records_end=request.records_end,
                non_trainable=non_trainable,
                lr_scale=request.learning_rate_scale or 1.0,
                embedding_grads=sparse,
                with_values=request.return_parameters,
            )
        except NotInitializedError as error:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{self._who()}: {error}")
        except ValueError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self._who()}: {error}")
        if not result.accepted:
            _log.debug(
                "%s rejected a push of worker %d: %s", self._who(), request.worker_id, result.reason
            )
        head = pb.PushGradientsResponse(
            accepted=result.accepted,
            version=result.version,
            staleness=result.staleness,
            applied_lr_scale=result.lr_scale,
        )
        return serialize_with_tensors(head, _PARAMETERS_FIELD, result.values or {})

    def pull_embedding_vectors(
        self, request: pb.PullEmbeddingVectorsRequest, context: grpc.ServicerContext
    ) -> pb.Tensor:
        """Rows of one table, in the order of the ids (`id_tensor`, else `ids`)."""
        if request.HasField("id_tensor"):
            ids = self._decode_ids(request.id_tensor, context, request.name)
        else:
            ids = np.asarray(request.ids, dtype=np.int64)
        return encode(request.name, self._lookup(request.name, ids, context))

    def pull_embedding_tables(
        self, request: pb.PullEmbeddingTablesRequest, context: grpc.ServicerContext
    ) -> pb.PullEmbeddingTablesResponse:
        """Rows of several tables: one answer tensor per ids tensor, same names and order."""
        vectors = []
        for tensor in request.ids:
            ids = self._decode_ids(tensor, context, tensor.name)
            vectors.append(encode(tensor.name, self._lookup(tensor.name, ids, context)))
        return pb.PullEmbeddingTablesResponse(vectors=vectors)

    def describe_embedding_tables(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> pb.EmbeddingTablesDescription:
        """The tables this shard holds and its rows of each."""
        store = self.parameters.embeddings
        rows = store.rows()
        infos = [table_info_of(spec) for spec in store.specs()]
        return pb.EmbeddingTablesDescription(
            infos=infos,
            rows=[rows[i.name] for i in infos],
            restored_version=store.restored_version,
            restored_rows=store.restored_rows,
        )

    def read_embedding_rows(
        self, request: pb.ReadEmbeddingRowsRequest, context: grpc.ServicerContext
    ) -> pb.ReadEmbeddingRowsResponse:
        """A page of a table's rows on this shard, in creation order."""
        try:
            ids, rows, total = self.parameters.embeddings.read(
                request.name, request.start, request.limit
            )
        except ValueError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self._who()}: {error}")
        part = pb.EmbeddingSlices(
            name=request.name, ids=encode(request.name, ids), values=encode(request.name, rows)
        )
        return pb.ReadEmbeddingRowsResponse(rows=part, total=total)

    def get_applied_progress(
        self, request: pb.AppliedProgressRequest, context: grpc.ServicerContext
    ) -> pb.AppliedProgressResponse:
        """Applied records per task, and how this shard's checkpoint writes went (after
        waiting up to `flush_checkpoints_s` for the queued ones)."""
        writer = self.writer
        if writer is not None and request.flush_checkpoints_s > 0:
            writer.flush(request.flush_checkpoints_s)
        progress = self.parameters.applied_progress(request.task_ids)
        health = pb.CheckpointHealth()
        if writer is not None:
            health = pb.CheckpointHealth(
                enabled=True,
                written=len(writer.written),
                failed=writer.failures,
                failed_in_a_row=writer.failed_in_a_row,
                last_error=writer.last_error,
                last_failed_version=writer.last_failed_version,
            )
        return pb.AppliedProgressResponse(records_end=progress, checkpoints=health)

    # -- helpers --------------------------------------------------------------------------
    def _who(self) -> str:
        return f"parameter server {self.ps_id} of {self.num_ps}"

    def _lookup(self, name: str, ids: np.ndarray, context: grpc.ServicerContext) -> np.ndarray:
        if not self.parameters.initialized:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{self._who()} has no model yet: push_model must come before embedding lookups",
            )
        try:
            return self.parameters.lookup(name, ids)
        except ValueError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self._who()}: {error}")

    def _decode_ids(self, tensor: Any, context: grpc.ServicerContext, name: str) -> np.ndarray:
        """int64 ids of table `name` from a Tensor, checked to belong to this shard."""
        try:
            ids = decode(tensor)
        except ValueError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self._who()}: {error}")
        if ids.dtype.kind not in "iu" or ids.ndim != 1:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{self._who()}: ids of table {name!r} must be a 1-D int64 tensor, "
                f"got {ids.dtype} of shape {ids.shape}",
            )
        ids = ids.astype(np.int64, copy=False)
        if self.num_ps > 1 and ids.size:
            foreign = np.flatnonzero(embedding_shard(ids, self.num_ps) != self.ps_id)
            if foreign.size:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{self._who()}: {foreign.size} ids of table {name!r} belong to other shards "
                    f"(e.g. {int(ids[foreign[0]])}); do client and servers agree on the number "
                    "of parameter servers?",
                )
        return ids

    def _decode(
        self, tensors: Any, context: grpc.ServicerContext, what: str
    ) -> dict[str, np.ndarray]:
        values: dict[str, np.ndarray] = {}
        for tensor in tensors:
            try:
                values[tensor.name] = decode(tensor)
            except ValueError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self._who()}, {what}: {error}")
        return values

    def _check_shard(
        self, values: dict[str, np.ndarray], context: grpc.ServicerContext, what: str
    ) -> None:
        foreign = sorted(name for name in values if ps_of(name, self.num_ps) != self.ps_id)
        if foreign:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{what} for variables not on {self._who()}: {foreign} "
                "(do client and servers agree on the number of parameter servers?)",
            )


def _handlers(servicer: ParameterServerServicer) -> grpc.GenericRpcHandler:
    """Every rpc of the service as generated, except the two that carry a model's worth of
    tensors: they read gradients as views of the request and write values with one copy
    (runtime/ps/wire.py)."""
    service = pb.DESCRIPTOR.services_by_name["ParameterServer"]
    handlers = {
        method.name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, method.name),
            request_deserializer=getattr(pb, method.input_type.name).FromString,
            response_serializer=getattr(pb, method.output_type.name).SerializeToString,
        )
        for method in service.methods
    }
    handlers["push_gradients"] = grpc.unary_unary_rpc_method_handler(
        servicer.push_gradients_bytes,
        request_deserializer=_parse_push,
        response_serializer=None,
    )
    handlers["pull_dense_parameters"] = grpc.unary_unary_rpc_method_handler(
        servicer.pull_dense_parameters_bytes,
        request_deserializer=pb.PullDenseParametersRequest.FromString,
        response_serializer=None,
    )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


def _parse_push(data: bytes) -> Any:
    """(request, gradients) of a push; the plain message when a tensor in it is corrupt, so
    that the handler refuses it with INVALID_ARGUMENT naming the tensor."""
    try:
        return parse_with_tensors(data, pb.PushGradientsRequest, _GRADIENTS_FIELD)
    except (ValueError, IndexError):
        return pb.PushGradientsRequest.FromString(data)


def table_spec_of(info: pb.EmbeddingTableInfo) -> TableSpec:
    """The `TableSpec` of a proto `EmbeddingTableInfo` (ValueError unless float32 rows)."""
    if info.dtype not in (pb.DT_INVALID, pb.DT_FLOAT32):
        raise ValueError(
            f"embedding table {info.name!r}: rows of {pb.DataType.Name(info.dtype)} are not "
            "supported; tables hold float32 rows"
        )
    return TableSpec(info.name, int(info.dim), info.initializer or "uniform", int(info.seed))


def table_info_of(spec: TableSpec) -> pb.EmbeddingTableInfo:
    """The proto `EmbeddingTableInfo` of a `TableSpec`."""
    return pb.EmbeddingTableInfo(
        name=spec.name,
        dim=spec.dim,
        initializer=spec.initializer,
        dtype=pb.DT_FLOAT32,
        seed=spec.seed,
    )


def policy_of(config: JobConfig) -> GradientPolicy:
    """The job's gradient policy (async/sync, grads_to_wait, staleness modulation)."""
    return GradientPolicy(
        use_async=config.use_async,
        grads_to_wait=config.grads_to_wait,
        lr_staleness_modulation=config.lr_staleness_modulation,
        staleness_tolerance=config.staleness_tolerance,
    )


def parameters_of(config: JobConfig) -> Parameters:
    """A `Parameters` store whose optimizer is the job's, as the model zoo defines it.

    The model spec is resolved now, so a bad config fails at startup rather than at the first
    push_model; the optimizer itself is created once, when the model arrives.
    """
    from elasticdl.runtime.ps.learning_rate import ScheduledLearningRate

    spec = config.load_spec()
    from elasticdl.runtime.ps.keras2_optimizer import as_keras3

    parameters = Parameters(lambda: as_keras3(spec.build_optimizer()), policy_of(config))
    callbacks = spec.job_callbacks()
    if callbacks.lr_by_version or callbacks.lr_by_epoch:
        per_epoch = config.versions_per_epoch
        parameters.learning_rate_at = ScheduledLearningRate(
            lambda version, initial: callbacks.learning_rate(version, per_epoch, initial)
        )
    return parameters


def model_shapes(config: JobConfig) -> dict[str, tuple[int, ...]] | None:
    """Stable name -> shape of the job's model variables, when the model has variables without
    being called on data (functional and Sequential models with inputs); else None."""
    from elasticdl.runtime.variables import named_variables

    model = config.load_spec().instantiate().model
    if not getattr(model, "built", False) or not model.weights:
        return None
    trainable, non_trainable = named_variables(model)
    return {name: tuple(v.shape) for name, v in {**trainable, **non_trainable}.items()}


def restore_at_start(config: JobConfig, parameters: Parameters, ps_id: int) -> int | None:
    """Restore shard `ps_id` from the job's checkpoints, if any; returns the version restored.

    The log line ("parameter server I of N restored version V from DIR...: ..., R embedding
    rows in T tables {table: rows} (S s)") says what came back; `parameters.embeddings.rows()`
    has the rows per table afterwards.

    `checkpoint_dir` with a valid checkpoint wins (a relaunched PS: the job's own, newest state);
    else `checkpoint_dir_for_init`, which must hold a valid checkpoint. The checkpoint is
    re-sharded to `config.num_ps`, and checked against the model's variables when they can be
    known without data; the applied-records progress is not restored from
    `checkpoint_dir_for_init` (another job's). Raises CheckpointError (one line) for none or a
    mismatch.
    """
    source = ""
    if config.checkpoint_dir and checkpoint.latest_valid_version(config.checkpoint_dir) is not None:
        source = config.checkpoint_dir
    elif config.checkpoint_dir_for_init:
        source = config.checkpoint_dir_for_init
    if not source:
        return None
    start = time.perf_counter()
    loaded = checkpoint.load_all(source, only=(ps_id, config.num_ps))
    expected = model_shapes(config)
    if expected is not None:
        checkpoint.check_model(loaded, expected, config.model_def)
    elif loaded.model_def and loaded.model_def != config.model_def:
        _log.warning(
            "parameter server %d: checkpoint %s was written for model_def %r, this job runs %r; "
            "its variables cannot be checked here (the model has none before it sees data)",
            ps_id,
            source,
            loaded.model_def,
            config.model_def,
        )
    state = checkpoint.shard_state(loaded, ps_id, config.num_ps)
    if source == config.checkpoint_dir_for_init:
        # (Also) another job's checkpoint: its applied-records progress is keyed by that job's
        # task ids, which this job reuses for other records. Only the job's own progress counts
        # (a shard relaunched from a checkpoint this job wrote in the same directory loses it
        # too; pushes after the restart record their progress again).
        state.progress = {}
    parameters.restore(state, source)
    values = sum(int(np.size(v)) for v in state.trainable.values())
    resharded = f", re-sharded from {loaded.num_ps}" if loaded.num_ps != config.num_ps else ""
    rows = {name: int(e.ids.size) for name, e in state.embeddings.items()}
    _log.info(
        "parameter server %d of %d restored version %d from %s%s: %d trainable (%d values) and "
        "%d non-trainable variables, %d optimizer slots, iterations %d, %d embedding rows in %d "
        "tables%s (%.2f s)",
        ps_id,
        config.num_ps,
        loaded.version,
        source,
        resharded,
        len(state.trainable),
        values,
        len(state.non_trainable),
        len(state.slots),
        state.iterations,
        sum(rows.values()),
        len(rows),
        f" {rows}" if rows else "",
        time.perf_counter() - start,
    )
    return loaded.version


def servicer_of(config: JobConfig, ps_id: int) -> ParameterServerServicer:
    """Shard `ps_id` of the job: its store (restored from a checkpoint when there is one) and,
    when the job checkpoints, a background writer fed by the store."""
    parameters = parameters_of(config)
    restore_at_start(config, parameters, ps_id)
    writer = None
    if config.checkpoint_dir and config.checkpoint_steps > 0:
        writer = CheckpointWriter(
            config.checkpoint_dir,
            ps_id,
            config.num_ps,
            keep=config.keep_checkpoint_max,
            model_def=config.model_def,
        )
        parameters.set_checkpoint_sink(config.checkpoint_steps, writer.submit)
    return ParameterServerServicer(parameters, ps_id, config.num_ps, writer)


class PortTakenError(RuntimeError):
    """The PS's port could not be bound: another process holds it."""


def why_unbound(host: str, port: int) -> OSError | None:
    """Why a plain TCP socket cannot bind `host:port` now (gRPC's failed bind says nothing of
    it), None when it can: the holder let go meanwhile, which is the port's being taken too."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            probe.bind(address)
    except OSError as error:
        return error
    return None


def start_server(
    servicer: ParameterServerServicer,
    port: int,
    host: str = "127.0.0.1",
    credentials: auth.JobAuth | None = None,
) -> tuple[grpc.Server, int]:
    """Bind and start a gRPC server for `servicer`; returns it and the bound port (port 0:
    any free port). A busy port raises PortTakenError naming the shard, host and port, an
    address that cannot be bound at all a RuntimeError saying why. With
    `credentials`, calls without the job's secret are refused (runtime/auth.py)."""
    server = grpc.server(
        futures.ThreadPoolExecutor(
            max_workers=MAX_WORKERS, thread_name_prefix=f"ps{servicer.ps_id}"
        ),
        options=SERVER_OPTIONS,
        interceptors=auth.server_interceptors(credentials),
    )
    if not 0 <= port <= 65535:
        raise ValueError(f"parameter server {servicer.ps_id}: port {port} is not in [0, 65535]")
    server.add_generic_rpc_handlers((_handlers(servicer),))
    try:
        bound = auth.add_port(server, host_port(host, port), credentials)
    except RuntimeError:
        bound = 0
    if bound == 0:
        server.stop(None)
        error = why_unbound(host, port)
        if error is None or error.errno == errno.EADDRINUSE:
            raise PortTakenError(
                f"parameter server {servicer.ps_id}: port {port} on {host} is in use; "
                "choose another port or stop the process using it"
            )
        raise RuntimeError(  # not the port's: another port would not help
            f"parameter server {servicer.ps_id}: cannot listen on {host}:{port}: "
            f"{error.strerror or error}; give --host an address of this machine"
        )
    server.start()
    return server, bound


def serve(
    config: JobConfig,
    ps_id: int,
    port: int,
    host: str = "127.0.0.1",
    credentials: auth.JobAuth | None = None,
) -> grpc.Server:
    """Start parameter server `ps_id` of `config.num_ps` on host:port (restored from a checkpoint
    when there is one, see `servicer_of`); returns the started server (stop it with
    `server.stop(grace)`; queued checkpoint writes finish in a daemon thread)."""
    servicer = servicer_of(config, ps_id)
    try:
        server, _ = start_server(servicer, port, host, credentials)
    except BaseException:
        servicer.close(0)
        raise
    return server
