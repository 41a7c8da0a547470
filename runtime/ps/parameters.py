"""One parameter-server shard's state: dense variables, the user's optimizer, and the push policy.

`GradientPolicy` is pure logic (no TensorFlow, not thread-safe): it decides, for each gradient
push, whether it is accepted, what (if anything) to apply now and at which learning-rate scale,
and it tracks which task records' gradients reached the model.

`Parameters` holds the variables and applies gradients with the user's Keras optimizer, built
once over every trainable variable of the shard. It is thread-safe: one lock serialises
`initialize`, `push_gradients`, `apply_gradients`, `update_non_trainable`, `snapshot` and
`values`, `state` and `restore`, and the policy is only called under that lock (so a push's
check-and-apply is atomic and a snapshot's values always match its version). One exception:
while the optimizer's application compiles after initialization (under the lock, see
apply_functions.py), `snapshot` answers with the values at initialization, which nothing can
have changed yet, instead of waiting.

Checkpoints: `state()` captures values, non-trainable values, optimizer state and applied-records
progress at one version; `restore()` initializes a fresh store from such a state so that the next
application gives exactly what an uninterrupted run would. Optimizer state is mapped to stable
variable names by structure (see `optimizer_state_variables`), never by Keras variable paths.

Embedding tables (`embeddings`, an `EmbeddingStore`): declared by `initialize`, read by
`lookup` (which takes only the store's lock), updated in the same application as the dense
variables of a push, at the Keras optimizer's current learning rate (a schedule at its
iterations) times the push's scale, by the optimizer's sparse twin (`sparse_optimizers`).

Versions: `version` is the number of gradient applications since the model was initialized (or
the version it was initialized with). Async: every accepted push applies, so version += 1 per
push. Sync: `grads_to_wait` pushes computed on the current version are averaged and applied
once, version += 1.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from elasticdl.runtime.ps.apply_functions import ApplyFunctions
from elasticdl.runtime.ps.checkpoint import CheckpointError, ShardState
from elasticdl.runtime.ps.embedding_table import TableSpec
from elasticdl.runtime.ps.embeddings import EmbeddingStore, SparseGrads
from elasticdl.runtime.ps.sparse_optimizers import from_keras

_log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# The policy (pure)

# Async pushes up to this many versions behind are applied at the full learning rate. One worker
# that overlaps its push with the next minibatch is 1 behind, a few workers 2-4.
DEFAULT_STALENESS_TOLERANCE = 4


def staleness_lr_scale(staleness: int, tolerance: int) -> float:
    """Learning-rate factor of an async push computed `staleness` versions behind the shard.

    1.0 up to `tolerance` versions behind, then tolerance / staleness (tolerance 0: always 1.0,
    no rule). Async SGD stays stable while rate x staleness stays small; this caps that product
    at rate x tolerance whatever the number of workers. A push ahead of the shard (negative
    staleness: the shard was restored from a checkpoint) counts as current.
    """
    if tolerance <= 0 or staleness <= tolerance:
        return 1.0
    return tolerance / staleness


@dataclass(frozen=True)
class Decision:
    """What to do with one push.

    `accepted`: False means the push was discarded (sync mode: stale or from the future; the
    worker must pull and recompute). `gradients`: apply these now (None: nothing to apply yet,
    or rejected). `lr_scale`: learning-rate factor for that application. `contributions`: the
    (task_id, records_end) of every push the application contains; pass them to
    `GradientPolicy.record_applied` once the application succeeded. `reason`: why rejected.
    """

    accepted: bool
    gradients: dict[str, np.ndarray] | None = None
    lr_scale: float = 1.0
    contributions: tuple[tuple[int, int], ...] = ()
    reason: str = ""
    sparse: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    staleness: int = 0


@dataclass
class GradientPolicy:
    """Async or sync handling of gradient pushes, and applied-records tracking.

    Async (`use_async=True`, default): every push is accepted and applied on its own, whatever
    version it was computed on (after a PS restart a push may even be ahead of the PS), at the
    learning-rate factor `staleness_lr_scale(current - push version, staleness_tolerance)`:
    full rate up to `staleness_tolerance` versions behind, then tolerance / staleness, so the
    product of rate and staleness never exceeds what `staleness_tolerance` workers give (many
    async workers cannot diverge a model that trains with a few). `lr_staleness_modulation`
    is the classic 1 / staleness (tolerance 1). A push's own `lr_scale` multiplies in.
    `grads_to_wait` is ignored.

    Sync (`use_async=False`): pushes computed on the current version are accumulated; the
    `grads_to_wait`-th one releases their per-variable mean (a variable missing from some pushes
    is averaged over the pushes that have it), applied at scale 1 (push scales are ignored).
    A push on another version is rejected. Accumulated gradients of an older version (the model
    moved on by other means) are discarded.

    Sparse (embedding) gradients, (ids, values) per table, follow the same decision: async
    passes them on; sync concatenates the pushes' and divides the values by the number of
    pushes that had the table (the dense rule; the table then sums duplicate ids), so a row is
    updated with the mean over pushes of its gradient, as a dense table would be.
    """

    use_async: bool = True
    grads_to_wait: int = 1
    lr_staleness_modulation: bool = False
    staleness_tolerance: int = DEFAULT_STALENESS_TOLERANCE
    _sums: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False)
    _counts: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _pending: list[tuple[int, int]] = field(default_factory=list, init=False, repr=False)
    _pending_version: int | None = field(default=None, init=False, repr=False)
    _progress: dict[int, int] = field(default_factory=dict, init=False, repr=False)
    _sparse: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.grads_to_wait < 1:
            raise ValueError(f"grads_to_wait must be >= 1, got {self.grads_to_wait}")
        if self.staleness_tolerance < 0:
            raise ValueError(f"staleness_tolerance must be >= 0, got {self.staleness_tolerance}")

    @property
    def pending(self) -> int:
        """Number of pushes accumulated towards the next sync application."""
        return len(self._pending)

    def offer(
        self,
        current_version: int,
        push_version: int,
        gradients: Mapping[str, np.ndarray],
        task_id: int = 0,
        records_end: int = 0,
        lr_scale: float = 1.0,
        sparse: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> Decision:
        """Decide about one push; `gradients` (and `sparse`: table -> (ids, values)) must
        already be validated against the shard."""
        contribution = (int(task_id), int(records_end))
        if self.use_async:
            tolerance = 1 if self.lr_staleness_modulation else self.staleness_tolerance
            staleness = current_version - push_version
            scale = (lr_scale if lr_scale > 0 else 1.0) * staleness_lr_scale(staleness, tolerance)
            return Decision(
                True,
                dict(gradients),
                scale,
                (contribution,),
                sparse=dict(sparse or {}),
                staleness=max(0, staleness),
            )
        if push_version != current_version:
            when = "stale" if push_version < current_version else "ahead of this server"
            return Decision(
                False,
                reason=f"gradients of version {push_version} are {when} "
                f"(current version {current_version}); pull and recompute",
            )
        if self._pending_version != current_version:
            self._reset(current_version)
        for name, grad in gradients.items():
            if name in self._sums:
                self._sums[name] += grad
                self._counts[name] += 1
            else:
                self._sums[name] = np.array(grad, copy=True)
                self._counts[name] = 1
        for name, (ids, values) in (sparse or {}).items():
            self._sparse.setdefault(name, []).append((np.array(ids), np.array(values)))
        self._pending.append(contribution)
        if len(self._pending) < self.grads_to_wait:
            return Decision(True)
        mean = {
            name: total if self._counts[name] == 1 else total / total.dtype.type(self._counts[name])
            for name, total in self._sums.items()
        }
        sparse_mean = {name: _sparse_mean(parts) for name, parts in self._sparse.items()}
        contributions = tuple(self._pending)
        self._reset(None)
        return Decision(True, mean, 1.0, contributions, sparse=sparse_mean)

    def record_applied(self, contributions: Iterable[tuple[int, int]]) -> None:
        """Note that these pushes' gradients are in the model (max records_end per task)."""
        for task_id, records_end in contributions:
            if records_end > self._progress.get(task_id, 0):
                self._progress[task_id] = records_end

    def applied_progress(self, task_ids: Iterable[int]) -> dict[int, int]:
        """For each task: the records whose gradients were applied (0 when none)."""
        return {int(t): self._progress.get(int(t), 0) for t in task_ids}

    def progress(self) -> dict[int, int]:
        """A copy of every task's applied records (for checkpoints)."""
        return dict(self._progress)

    def restore_progress(self, progress: Mapping[int, int]) -> None:
        """Replace the applied-records progress (from a checkpoint); pending pushes are dropped."""
        self._progress = {int(t): int(r) for t, r in progress.items()}
        self._reset(None)

    def _reset(self, version: int | None) -> None:
        self._sums = {}
        self._counts = {}
        self._sparse = {}
        self._pending = []
        self._pending_version = version


def _sparse_mean(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.concatenate([p[0] for p in parts])
    values = np.concatenate([p[1] for p in parts])
    if len(parts) > 1:
        values = values / values.dtype.type(len(parts))
    return ids, values


# ---------------------------------------------------------------------------------------------
# The store


@dataclass(frozen=True)
class PushResult:
    """Outcome of `Parameters.push_gradients`: accepted or not, the version afterwards, and
    (when asked for and the version differs from the push's) the values at that version."""

    accepted: bool
    version: int
    applied: bool = False
    reason: str = ""
    values: dict[str, np.ndarray] | None = None
    staleness: int = 0
    lr_scale: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    """A consistent read: `values` is None when not initialized or when the caller is current."""

    initialized: bool
    version: int
    values: dict[str, np.ndarray] | None


class NotInitializedError(RuntimeError):
    """The shard has no model yet (no push_model arrived)."""


class Parameters:
    """Dense variables of one shard, updated with the user's Keras optimizer (thread-safe)."""

    def __init__(
        self,
        optimizer_factory: Callable[[], Any],
        policy: GradientPolicy | None = None,
    ) -> None:
        """`optimizer_factory()` returns a fresh, unbuilt Keras optimizer; called once, lazily."""
        self._optimizer_factory = optimizer_factory
        self.policy = policy or GradientPolicy()
        self._lock = threading.Lock()
        self._initialized = False
        self._version = 0
        self._variables: dict[str, Any] = {}
        self._index: dict[str, int] = {}
        self._non_trainable: dict[str, np.ndarray] = {}
        self._optimizer: Any = None
        self._apply_fn: Any = None
        self._warming: Snapshot | None = None
        """While the application compiles (`_start_warm_up_locked`): the values at
        initialization, read-only, which pulls get meanwhile instead of waiting for the lock."""
        self._scale: Any = None
        self._slot_variables: dict[str, Any] = {}
        self._optimizer_variables: dict[str, Any] = {}
        self._restored_from = ""
        self._state_error = ""
        self._checkpoint_steps = 0
        self._checkpoint_sink: Callable[[ShardState], None] | None = None
        self.embeddings = EmbeddingStore()
        self._base_lr: Any = None
        self.learning_rate_at: Any = None  # a ScheduledLearningRate (ps/learning_rate.py)

    # -- read-only facts ------------------------------------------------------------------
    @property
    def initialized(self) -> bool:
        return self._initialized

    @property
    def version(self) -> int:
        return self._version

    @property
    def optimizer(self) -> Any:
        """The built Keras optimizer (None before `initialize`)."""
        return self._optimizer

    @property
    def non_trainable_names(self) -> tuple[str, ...]:
        return tuple(self._non_trainable)

    @property
    def variables(self) -> dict[str, Any]:
        """Stable name -> the Keras variable (do not mutate outside this class)."""
        return dict(self._variables)

    # -- checkpoints ----------------------------------------------------------------------
    def set_checkpoint_sink(self, steps: int, sink: Callable[[ShardState], None] | None) -> None:
        """Hand `sink` a `state()` when the model is pushed (not restored) and whenever an
        application makes the version a multiple of `steps` (0: only on push). `sink` runs under
        the store's lock, so the state matches its version exactly; it must return quickly
        (queue the state, write elsewhere). Its exceptions are logged, never raised."""
        with self._lock:
            self._checkpoint_steps = max(0, int(steps))
            self._checkpoint_sink = sink

    # -- initialization -------------------------------------------------------------------
    def initialize(
        self,
        values: Mapping[str, np.ndarray],
        non_trainable: Iterable[str] = (),
        version: int = 0,
        embedding_tables: Iterable[TableSpec] = (),
    ) -> bool:
        """Create the variables and build the optimizer on the trainable ones.

        The first call wins; later calls change nothing and return False (racing workers may
        all push their freshly built model), but a later model whose names, shapes or
        trainability differ from the held ones is a ValueError (e.g. after a restore from
        another model's checkpoint). Names in `non_trainable` are stored as plain arrays and
        take no gradients; every name in it must be in `values`. `embedding_tables` are
        declared (created; or, when initialized, checked against the held ones).
        """
        with self._lock:
            non_trainable = set(non_trainable)
            tables = list(embedding_tables)
            if self._initialized:
                self._check_same_model(values, non_trainable)
                self.embeddings.check_same(tables, self._restored_from)
                return False
            missing = sorted(non_trainable - set(values))
            if missing:
                raise ValueError(f"non-trainable names without a value: {missing}")
            trainable = {n: v for n, v in values.items() if n not in non_trainable}
            fixed = {n: v for n, v in values.items() if n in non_trainable}
            self._create_locked(trainable, fixed, int(version), tables)
            self._emit_checkpoint_locked()
            self._start_warm_up_locked()
            return True

    def restore(self, state: ShardState, source: str = "") -> None:
        """Initialize from a checkpoint state: variables, optimizer slots and non-slot variables
        (iterations, ...), applied-records progress, version.

        The next application then gives exactly what it would have given in the run that wrote
        the state. Raises RuntimeError when already initialized, CheckpointError when a slot has
        another shape. Optimizer state written by another kind of optimizer (other slot names)
        is not restored: a warning is logged and the optimizer starts fresh.
        """
        with self._lock:
            if self._initialized:
                raise RuntimeError("cannot restore: the parameters are already initialized")
            tables = [e.spec for e in state.embeddings.values()]
            self._create_locked(state.trainable, state.non_trainable, int(state.version), tables)
            try:
                self._assign_optimizer_state_locked(state, source)
                self.embeddings.load(state.embeddings, source or "a state", state.version)
            except BaseException:
                self._initialized = False
                raise
            self.policy.restore_progress(state.progress)
            self._restored_from = f"{source} version {state.version}" if source else "a state"
            self._start_warm_up_locked()

    def _start_warm_up_locked(self) -> None:
        """Compile the optimizer's application now, on a thread of its own that takes the lock
        (apply_functions.py), so the first push does not wait for XLA. Pulls meanwhile get
        the values as they are now; the first change of them ends that."""
        values = self._values_locked(None)
        for value in values.values():
            value.setflags(write=False)  # one snapshot answers every pull meanwhile
        self._warming = Snapshot(True, self._version, values)
        others = [*self._slot_variables.values(), *self._optimizer_variables.values()]

        def warm_up() -> None:
            with self._lock:
                try:
                    if self._warming is not None:  # no push came first
                        self._apply_fn.warm_up(others)
                finally:
                    self._warming = None

        threading.Thread(target=warm_up, name="ps-warm-up", daemon=True).start()

    def _create_locked(
        self,
        trainable: Mapping[str, np.ndarray],
        fixed: Mapping[str, np.ndarray],
        version: int,
        tables: list[TableSpec] | None = None,
    ) -> None:
        import keras
        import tensorflow as tf

        variables: dict[str, Any] = {}
        for name, value in trainable.items():
            array = np.array(value, copy=True)
            if not np.issubdtype(array.dtype, np.floating):
                raise ValueError(
                    f"trainable variable {name!r} has dtype {array.dtype}; only floating "
                    "point variables take gradients (list it as non-trainable)"
                )
            variables[name] = keras.Variable(
                array, dtype=str(array.dtype), trainable=True, name=_keras_name(name)
            )
        optimizer = self._optimizer_factory()
        self._base_lr = optimizer._learning_rate  # before any scaling is installed
        embeddings = EmbeddingStore()
        if tables:
            embeddings.optimizer = from_keras(optimizer)
            embeddings.declare(tables)
        scale = tf.Variable(1.0, dtype=tf.float32, trainable=False, name="ps_lr_scale")
        if variables:
            optimizer.build(list(variables.values()))
            _install_lr_scale(optimizer, scale)
        try:
            slots, others = optimizer_state_variables(optimizer, variables)
            self._state_error = ""
        except TypeError as error:
            slots, others = {}, {}
            self._state_error = str(error)
            _log.warning("%s: checkpoints of this shard will fail", error)
        self._slot_variables, self._optimizer_variables = slots, others
        self._variables = variables
        self._index = {name: i for i, name in enumerate(variables)}
        self._non_trainable = {name: np.array(v, copy=True) for name, v in fixed.items()}
        self._optimizer = optimizer
        self._scale = scale
        self._apply_fn = ApplyFunctions(optimizer, list(variables.values()), scale)
        self.embeddings = embeddings
        self._version = version
        self._initialized = True

    def _assign_optimizer_state_locked(self, state: ShardState, source: str) -> None:
        where = f"checkpoint {source}" if source else "the restored state"
        assign_optimizer_state(
            state, self._optimizer, self._slot_variables, self._optimizer_variables, where
        )

    def _check_same_model(self, values: Mapping[str, np.ndarray], fixed: set[str]) -> None:
        differ = _model_difference(self._variables, self._non_trainable, values, fixed)
        if differ:
            origin = (
                f" (restored from checkpoint {self._restored_from})" if self._restored_from else ""
            )
            raise ValueError(
                f"the pushed model does not match the parameters held{origin}: {len(differ)} "
                f"variables differ in name, shape or trainability (e.g. {differ[:3]})"
            )

    # -- updates --------------------------------------------------------------------------
    def check_gradients(self, gradients: Mapping[str, np.ndarray]) -> None:
        """Raise ValueError naming every unknown variable or mis-shaped gradient."""
        self._require_initialized()
        unknown = sorted(name for name in gradients if name not in self._variables)
        if unknown:
            raise ValueError(f"gradients for unknown variables: {unknown}")
        for name, grad in gradients.items():
            expected = tuple(self._variables[name].shape)
            if tuple(np.shape(grad)) != expected:
                raise ValueError(
                    f"gradient for {name!r} has shape {tuple(np.shape(grad))}, "
                    f"the variable has shape {expected}"
                )

    def apply_gradients(self, gradients: Mapping[str, np.ndarray], lr_scale: float = 1.0) -> int:
        """Apply `gradients` (stable name -> array) with the optimizer; returns the new version.

        Bypasses the policy (and applied-records tracking). `lr_scale` multiplies the
        optimizer's learning rate for this one application.
        """
        with self._lock:
            self.check_gradients(gradients)
            self._apply_locked(gradients, lr_scale)
            return self._version

    def push_gradients(
        self,
        gradients: Mapping[str, np.ndarray],
        version: int,
        *,
        task_id: int = 0,
        records_end: int = 0,
        non_trainable: Mapping[str, np.ndarray] | None = None,
        lr_scale: float = 1.0,
        embedding_grads: SparseGrads | None = None,
        with_values: bool = False,
    ) -> PushResult:
        """One worker push through the policy: validate, decide, maybe apply, update state.

        Raises NotInitializedError before `initialize` and ValueError for unknown names or
        shapes (nothing is changed then). Non-trainable values of an accepted push replace the
        stored ones (last writer wins); a rejected push changes nothing. `embedding_grads`:
        table -> (ids, values), applied together with the dense gradients. `with_values`: the
        result carries every value at the version afterwards when it differs from `version`
        (read under the same lock: the push doubles as the caller's pull).
        """
        with self._lock:
            self.check_gradients(gradients)
            sparse = self.embeddings.check(embedding_grads or {})
            if non_trainable:
                _check_non_trainable(self._non_trainable, non_trainable)
            decision = self.policy.offer(
                self._version, int(version), gradients, task_id, records_end, lr_scale, sparse
            )
            fresh = with_values and int(version) != self._version
            if not decision.accepted:
                values = self._values_locked(None) if fresh else None
                return PushResult(False, self._version, reason=decision.reason, values=values)
            applied = decision.gradients is not None
            read = None
            if applied:
                read = self._apply_locked(
                    decision.gradients, decision.lr_scale, decision.sparse, read=with_values
                )
                self.policy.record_applied(decision.contributions)
            if non_trainable:
                self._store_non_trainable(non_trainable)
            fresh = with_values and int(version) != self._version
            return PushResult(
                True,
                self._version,
                applied,
                values=self._values_locked(None, read) if fresh else None,
                staleness=decision.staleness,
                lr_scale=decision.lr_scale if applied else 0.0,
            )

    def update_non_trainable(self, values: Mapping[str, np.ndarray]) -> None:
        """Replace non-trainable values (last writer wins); unknown names are a ValueError."""
        with self._lock:
            self._require_initialized()
            _check_non_trainable(self._non_trainable, values)
            self._store_non_trainable(values)

    # -- reads ----------------------------------------------------------------------------
    def values(self, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """The current values, trainable and non-trainable: snapshots that later updates do
        not change (trainable ones read-only views of a variable read, see `_snapshot`)."""
        with self._lock:
            return self._values_locked(names)

    def snapshot(self, known_version: int | None = None) -> Snapshot:
        """Version and values read atomically; no values when `known_version` is current."""
        warming = self._warming
        if warming is not None:
            if known_version is not None and known_version == warming.version:
                return Snapshot(True, warming.version, None)
            return warming
        with self._lock:
            if not self._initialized:
                return Snapshot(False, self._version, None)
            if known_version is not None and known_version == self._version:
                return Snapshot(True, self._version, None)
            return Snapshot(True, self._version, self._values_locked(None))

    def lookup(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows of `ids` in table `name` (created on first touch; only the tables' lock)."""
        return self.embeddings.lookup(name, ids)

    def state(self) -> ShardState:
        """A consistent copy of everything a checkpoint holds, at the current version."""
        with self._lock:
            self._require_initialized()
            return self._state_locked()

    def applied_progress(self, task_ids: Iterable[int]) -> dict[int, int]:
        """For each task id: max records_end over the pushes whose gradients were applied."""
        with self._lock:
            return self.policy.applied_progress(task_ids)

    # -- internals (lock held) ------------------------------------------------------------
    def _require_initialized(self) -> None:
        if not self._initialized:
            raise NotInitializedError("the parameters are not initialized: push the model first")

    def _apply_locked(
        self,
        gradients: Mapping[str, np.ndarray],
        lr_scale: float,
        sparse: SparseGrads | None = None,
        read: bool = False,
    ) -> list[np.ndarray] | None:
        """Apply a push; with `read`, the trainable values after the dense application (in
        `_index` order, read by the same compiled call), else None."""
        values = None
        if self.learning_rate_at is not None:
            self.learning_rate_at.set(self._base_lr, self._version)
        if sparse:
            # the optimizer's learning rate now (before iterations move), times the push's scale
            sparse_lr = _current_learning_rate(self._base_lr, self._optimizer) * float(lr_scale)
        if gradients and self._variables:
            names = sorted(gradients, key=self._index.__getitem__)
            indices = tuple(self._index[n] for n in names)
            grads = [np.asarray(gradients[n], dtype=self._variables[n].dtype) for n in names]
            values = self._apply_fn(indices, grads, float(lr_scale), read)
        elif sparse:
            self._optimizer.iterations.assign_add(1)  # schedules advance without dense variables
        if sparse:
            self.embeddings.apply(sparse, sparse_lr)
        self._version += 1
        self._warming = None
        if self._checkpoint_steps and self._version % self._checkpoint_steps == 0:
            self._emit_checkpoint_locked()
        return values

    def _state_locked(self) -> ShardState:
        if self._state_error:
            raise CheckpointError(self._state_error)
        return ShardState(
            version=self._version,
            trainable={n: np.asarray(v.numpy()) for n, v in self._variables.items()},
            non_trainable={n: v.copy() for n, v in self._non_trainable.items()},
            slots={k: np.asarray(v.numpy()) for k, v in self._slot_variables.items()},
            optimizer={k: np.asarray(v.numpy()) for k, v in self._optimizer_variables.items()},
            progress=self.policy.progress(),
            embeddings=self.embeddings.export(),
        )

    def _emit_checkpoint_locked(self) -> None:
        if self._checkpoint_sink is None:
            return
        try:
            self._checkpoint_sink(self._state_locked())
        except Exception:  # noqa: BLE001 - a checkpoint problem must not fail a push
            _log.exception("checkpoint of version %d could not be queued", self._version)

    def _store_non_trainable(self, values: Mapping[str, np.ndarray]) -> None:
        self._warming = None
        for name, value in values.items():
            self._non_trainable[name] = np.array(
                value, dtype=self._non_trainable[name].dtype, copy=True
            )

    def _values_locked(
        self, names: Iterable[str] | None, read: list[np.ndarray] | None = None
    ) -> dict[str, np.ndarray]:
        return _read_values(self._variables, self._non_trainable, names, read)


def _check_non_trainable(held: Mapping[str, np.ndarray], values: Mapping[str, np.ndarray]) -> None:
    """ValueError unless every one of `values` updates a `held` non-trainable of its shape."""
    unknown = sorted(name for name in values if name not in held)
    if unknown:
        raise ValueError(f"values for unknown non-trainable variables: {unknown}")
    for name, value in values.items():
        if np.shape(value) != held[name].shape:
            raise ValueError(
                f"non-trainable {name!r} has shape {np.shape(value)}, expected {held[name].shape}"
            )


def _read_values(
    variables: Mapping[str, Any],
    non_trainable: Mapping[str, np.ndarray],
    names: Iterable[str] | None,
    read: list[np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Snapshots of the named values (all when `names` is None); KeyError for an unknown one.
    `read`: the trainable values, in `variables`' order, read already (all names only)."""
    if names is None:
        if read is None:
            out = {name: _snapshot(v) for name, v in variables.items()}
        else:
            out = dict(zip(variables, read, strict=True))
        out.update({name: value.copy() for name, value in non_trainable.items()})
        return out
    out = {}
    for name in names:
        if name in variables:
            out[name] = _snapshot(variables[name])
        elif name in non_trainable:
            out[name] = non_trainable[name].copy()
        else:
            raise KeyError(f"no variable named {name!r} on this shard")
    return out


def _model_difference(
    variables: Mapping[str, Any],
    non_trainable: Mapping[str, np.ndarray],
    values: Mapping[str, np.ndarray],
    fixed: set[str],
) -> list[str]:
    """The names whose shape or trainability differ between the held model and a pushed one."""
    held = {n: tuple(v.shape) for n, v in variables.items()}
    held.update({n: v.shape for n, v in non_trainable.items()})
    pushed = {n: tuple(np.shape(v)) for n, v in values.items()}
    differ = sorted(n for n in set(held) | set(pushed) if held.get(n) != pushed.get(n))
    return differ + sorted((fixed ^ set(non_trainable)) - set(differ))


def _snapshot(variable: Any) -> np.ndarray:
    """The variable's value now, without a copy: a read gives an immutable tensor (an update
    that comes while it is alive writes to a fresh buffer), and `np.asarray` views it read-only.
    `.numpy()` would copy it: 10 MB of pulls cost ~0.7 ms more per push (bench/ps.py)."""
    import tensorflow as tf

    return np.asarray(tf.convert_to_tensor(variable))


def optimizer_state_variables(
    optimizer: Any, variables: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(slots, others): every variable of a built Keras 3 optimizer, keyed by stable names.

    Keras optimizers keep per-variable state in list attributes indexed like the variables they
    were built with (`_get_variable_index`): Adam `_momentums`/`_velocities`, SGD `momentums`,
    RMSprop `_velocities`/`_momentums`/`_average_gradients`, Adagrad `_accumulators`, EMA and
    gradient-accumulation lists, ... Each element of such a list becomes slot
    `<stable_name>/<attribute>` (leading underscores dropped; a wrapped optimizer's attributes
    are prefixed `inner_optimizer.`). Other optimizer variables (`iterations`, Nadam's
    `u_product`, loss-scale state) are keyed by attribute name; the learning rate is left out
    (it comes from the model definition). Raises TypeError if some optimizer variable fits
    neither, so no state is silently lost.
    """
    import keras

    index = {optimizer._get_variable_index(v): n for n, v in variables.items()} if variables else {}
    model_ids = {id(v) for v in variables.values()}
    owned = {id(v) for v in optimizer.variables}
    slots: dict[str, Any] = {}
    others: dict[str, Any] = {}
    learning_rates: set[int] = set()

    def walk(obj: Any, prefix: str, depth: int) -> None:
        for attr, value in sorted(vars(obj).items()):
            if attr in ("_variables", "_trainable_variables", "_tracker"):
                continue
            name = prefix + attr.lstrip("_")
            if isinstance(value, keras.optimizers.Optimizer) and depth < 3:
                walk(value, name + ".", depth + 1)
            elif (
                index
                and isinstance(value, list | tuple)
                and len(value) == len(index)
                and any(id(x) in owned and id(x) not in model_ids for x in value)
            ):
                for i, item in enumerate(value):
                    if item is not None and id(item) in owned and id(item) not in model_ids:
                        slots[f"{index[i]}/{name}"] = item
            elif isinstance(value, keras.Variable) and id(value) in owned:
                if name.rsplit(".", 1)[-1] == "learning_rate":
                    learning_rates.add(id(value))
                else:
                    others.setdefault(name, value)

    walk(optimizer, "", 0)
    named = {id(v) for v in slots.values()} | {id(v) for v in others.values()} | learning_rates
    unnamed = [getattr(v, "path", v.name) for v in optimizer.variables if id(v) not in named]
    if unnamed:
        raise TypeError(
            f"cannot map the state of {type(optimizer).__name__} to variables for checkpoints: "
            f"{unnamed[:5]}"
        )
    return slots, others


def _current_learning_rate(base: Any, optimizer: Any) -> float:
    import keras

    if isinstance(base, keras.optimizers.schedules.LearningRateSchedule):
        return float(np.asarray(base(optimizer.iterations)))
    if isinstance(base, keras.Variable):
        return float(np.asarray(base.numpy()))
    return float(np.asarray(base() if callable(base) else base))


def _keras_name(name: str) -> str:
    """Keras variable names may not contain '/'; the stable name stays the dict key."""
    return name.replace("/", "_").replace(":", "_").replace("#", "_") or "var"


def _install_lr_scale(optimizer: Any, scale: Any) -> None:
    """Make a schedule or callable learning rate honour `scale` (a variable lr is scaled at
    apply time instead, see `ApplyFunctions`)."""
    import keras

    current = optimizer._learning_rate  # the Keras 3 attribute behind `learning_rate`
    if isinstance(current, keras.Variable):
        return
    if isinstance(current, keras.optimizers.schedules.LearningRateSchedule):

        def scaled() -> Any:
            return current(optimizer.iterations) * scale

    elif callable(current):

        def scaled() -> Any:
            return current() * scale

    else:
        raise TypeError(f"unsupported learning rate {current!r} in {type(optimizer).__name__}")
    optimizer.learning_rate = scaled


def assign_optimizer_state(
    state: ShardState,
    optimizer: Any,
    slots: Mapping[str, Any],
    optimizer_variables: Mapping[str, Any],
    where: str,
) -> None:
    """Put a restored shard's optimizer slots and variables into the live optimizer. Slots of
    another optimizer: a warning, and the optimizer starts fresh; a shape that does not fit:
    CheckpointError naming `where`."""
    if set(state.slots) != set(slots):
        theirs = sorted({k.rsplit("/", 1)[1] for k in state.slots})
        ours = sorted({k.rsplit("/", 1)[1] for k in slots})
        _log.warning(
            "optimizer state in %s does not fit %s (slots %s there, %s here): parameters "
            "restored, the optimizer starts fresh",
            where,
            type(optimizer).__name__,
            theirs,
            ours,
        )
        return
    targets = [(k, slots[k], v) for k, v in state.slots.items()]
    targets += [
        (k, optimizer_variables[k], v)
        for k, v in state.optimizer.items()
        if k in optimizer_variables
    ]
    for key, variable, value in targets:
        if tuple(variable.shape) != tuple(np.shape(value)):
            raise CheckpointError(
                f"{where}: optimizer variable {key!r} has shape {tuple(np.shape(value))}, "
                f"the optimizer expects {tuple(variable.shape)}"
            )
    for _, variable, value in targets:
        variable.assign(np.asarray(value, dtype=variable.dtype))
