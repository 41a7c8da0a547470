"""Parameter-server liveness: a hung PS (SIGSTOP, a deadlock) never exits, so it is found by
probing.

A process that is stopped still holds its listening socket and its open connections: the
kernel accepts connections and buffers requests for it, so only a call that must be *answered*
tells a live PS from a hung one. The probe is `get_applied_progress` with no task ids, the
cheapest call of the existing `ParameterServer` service (one dictionary comprehension under
the store's lock; no tensors).

Pure core, `PSLiveness` (no I/O, times passed in): probes are sent, then answered or failed.
A PS is *unresponsive* when at least `min_failures` (3) probes sent after its last answered
probe have failed and the first of them was sent `timeout_s` or more ago. Unresponsive is not
hung: the supervisor then looks at the process (hangs.py) and kills only a hung one, a
stopped one past `timeout_s`, any other only past a deadline stretched by the machine's load
per core (liveness.py), over which the failed probes keep coming.
A probe answered late (a GC pause, a PS busy applying gradients on a loaded 2-core machine)
but within its deadline proves the PS alive; requiring several failed probes keeps one lost
answer (the master itself starved of CPU at the wrong moment) from condemning a
PS. A PS that has not answered since it was (re)started is *starting*: it is flagged only after
`start_timeout_s` (a relaunched PS restores its checkpoint and imports TensorFlow first), or
once it is seen serving by other means (`served`: the model version advanced; without that, a
PS stopped before any probe got through, probed from before it listened, was taken for
starting for two minutes while the workers timed out on it).
Results of probes sent to an earlier incarnation (before `restart`) are ignored.

Thin I/O class, `PSHealthMonitor`: one daemon thread sends a probe to every PS each
`interval_s` (non-blocking gRPC futures with deadline `timeout_s`; callbacks feed the core
under a lock). Interface for the supervisor:

    monitor = PSHealthMonitor(addrs, timeout_s=6.0, interval_s=1.0, start_timeout_s=120.0)
    monitor.start()                      # begins probing; every PS is "starting"
    monitor.unresponsive(now=None)       # -> list[int]: ps ids to kill and relaunch
    monitor.down_since(ps_id)            # -> float | None: send time of its first failed probe
    monitor.served(ps_id, generation)    # seen serving by other means: no longer "starting"
    monitor.set_address(ps_id, addr)     # after a relaunch (same or new address): restart
    monitor.wait_serving(addr, timeout_s)  # -> float: seconds until addr answers a probe
    monitor.checkpoint_writes()          # -> {ps_id: (incarnation, ShardWrites)} from answers
    monitor.stop()

A probe's answer also carries the PS's checkpoint-write counts (`CheckpointHealth`), kept per
incarnation for checkpoint_health.py.

Times are `time.monotonic()` seconds unless a `clock` is given.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import grpc

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.proto import elasticdl_pb2_grpc
from elasticdl.runtime import auth
from elasticdl.runtime.job_config import GRPC_OPTIONS
from elasticdl.runtime.master.checkpoint_health import ShardWrites
from elasticdl.runtime.master.liveness import load_factor

TIMEOUT_S = 6.0
INTERVAL_S = 1.0
START_TIMEOUT_S = 120.0
MIN_FAILURES = 3
_MAX_FAILED = 256
_CHANNEL_OPTIONS = [
    *GRPC_OPTIONS,
    # A relaunched PS on the same port is seen within a second, not after gRPC's default
    # reconnect backoff (which grows to two minutes).
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


@dataclass(frozen=True)
class Probe:
    """One probe of one incarnation (`generation`) of PS `ps_id`, sent at `sent_at`."""

    ps_id: int
    generation: int
    sent_at: float


@dataclass
class _PSState:
    generation: int
    started_at: float
    answered_at: float | None = None
    """Send time of the newest answered probe: the PS was alive after it."""
    failed: list[float] = field(default_factory=list)
    """Send times of failed probes sent after `answered_at`, oldest first."""
    last_error: str = ""


class PSLiveness:
    """Which parameter servers answer probes; pure, times passed in."""

    def __init__(
        self,
        num_ps: int,
        now: float,
        timeout_s: float = TIMEOUT_S,
        start_timeout_s: float = START_TIMEOUT_S,
        min_failures: int = MIN_FAILURES,
    ) -> None:
        if timeout_s <= 0 or start_timeout_s <= 0 or min_failures < 1:
            raise ValueError(
                f"PS liveness needs timeout_s > 0, start_timeout_s > 0 and min_failures >= 1, "
                f"got {timeout_s}, {start_timeout_s}, {min_failures}"
            )
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.min_failures = min_failures
        self._ps = [_PSState(0, now) for _ in range(num_ps)]

    @property
    def num_ps(self) -> int:
        return len(self._ps)

    def restart(self, ps_id: int, now: float) -> None:
        """PS `ps_id` was (re)launched at `now`: it is starting; older probes no longer count."""
        self._ps[ps_id] = _PSState(self._ps[ps_id].generation + 1, now)

    def sent(self, ps_id: int, now: float) -> Probe:
        """A probe goes to PS `ps_id` now; pass it back to `answered` or `failed`."""
        return Probe(ps_id, self._ps[ps_id].generation, now)

    def answered(self, probe: Probe) -> None:
        state = self._current(probe)
        if state is None or (state.answered_at is not None and probe.sent_at <= state.answered_at):
            return
        state.answered_at = probe.sent_at
        state.failed = [t for t in state.failed if t > probe.sent_at]

    def served(self, ps_id: int, now: float, generation: int | None = None) -> None:
        """PS `ps_id` was seen serving by `now` other than by a probe (the model version
        advanced, which takes its push; its relaunch answered `wait_serving`).

        A PS whose probes all failed so far (it was probed before it listened, then hung
        before a probe got through) is then no longer *starting*: probes sent from `now` on
        that fail make it unresponsive after `timeout_s`, not `start_timeout_s`. One that
        answered a probe already is left as it is (its probes tell more exactly when it was
        last alive). `generation`: the incarnation seen serving (default: the current one)."""
        state = self._ps[ps_id]
        if generation not in (None, state.generation) or state.answered_at is not None:
            return
        self.answered(Probe(ps_id, state.generation, now))

    def failed(self, probe: Probe, error: str = "") -> None:
        state = self._current(probe)
        if state is None or (state.answered_at is not None and probe.sent_at <= state.answered_at):
            return
        if len(state.failed) < _MAX_FAILED:  # the oldest ones are what counts
            state.failed.append(probe.sent_at)
            state.failed.sort()
        state.last_error = error

    def status(self, ps_id: int, now: float, scale: float = 1.0) -> str:
        """ "starting", "alive" or "unresponsive"; `scale` stretches the start timeout (the
        machine's load per core, at least 1: liveness.py). Unresponsive means silent past the
        base timeout: hangs.py stretches that deadline by the load for a process that is not
        stopped (a stopped one is found as fast on a loaded machine as on an idle one)."""
        state = self._ps[ps_id]
        if state.answered_at is None:
            late = now - state.started_at >= self.start_timeout_s * max(1.0, scale)
            return "unresponsive" if late else "starting"
        failed = state.failed
        if len(failed) >= self.min_failures and now - failed[0] >= self.timeout_s:
            return "unresponsive"
        return "alive"

    def unresponsive(self, now: float, scale: float = 1.0) -> list[int]:
        """Ids of the parameter servers silent past their deadline (see the module docstring):
        the supervisor judges whether they are hung or slow (hangs.py)."""
        return [i for i in range(self.num_ps) if self.status(i, now, scale) == "unresponsive"]

    def down_since(self, ps_id: int) -> float | None:
        """Send time of the first probe that failed since the last answer (None: none failed).

        The PS stopped answering between its last answered probe and this time; the outage
        of a hung PS runs from about here to when its relaunch answers (`wait_serving`)."""
        failed = self._ps[ps_id].failed
        return failed[0] if failed else None

    def last_error(self, ps_id: int) -> str:
        return self._ps[ps_id].last_error

    def generation(self, ps_id: int) -> int:
        """The incarnation of PS `ps_id` (counts its (re)starts)."""
        return self._ps[ps_id].generation

    def is_current(self, probe: Probe) -> bool:
        return self._current(probe) is not None

    def _current(self, probe: Probe) -> _PSState | None:
        state = self._ps[probe.ps_id]
        return state if probe.generation == state.generation else None


class PSHealthMonitor:
    """Probes every parameter server from a daemon thread; see the module docstring."""

    def __init__(
        self,
        addrs: Sequence[str],
        timeout_s: float = TIMEOUT_S,
        interval_s: float = INTERVAL_S,
        start_timeout_s: float = START_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
        credentials: auth.JobAuth | None = None,
        load: Callable[[], float] = load_factor,
    ) -> None:
        """`credentials`: the job's (runtime/auth.py); probes then carry its secret. `load()`:
        the machine's load per core, which stretches every timeout (liveness.py)."""
        if interval_s <= 0:
            raise ValueError(f"PS health probes need interval_s > 0, got {interval_s}")
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self._clock = clock
        self._load = load
        # Re-entrant: a probe's callback may run at once, in the thread that sent it.
        self._lock = threading.RLock()
        self._core = PSLiveness(len(addrs), clock(), timeout_s, start_timeout_s)
        self._addrs = list(addrs)
        self._credentials = credentials
        self._channels = [self._channel(a) for a in addrs]
        self._stubs = [elasticdl_pb2_grpc.ParameterServerStub(c) for c in self._channels]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writes: dict[int, tuple[int, ShardWrites]] = {}

    def start(self) -> None:
        """Start probing; every PS counts as starting from now."""
        if self._thread is not None:
            return
        with self._lock:
            now = self._clock()
            for ps_id in range(self._core.num_ps):
                self._core.restart(ps_id, now)
        self._thread = threading.Thread(target=self._run, name="ps-health", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop probing and close the channels (in-flight probes are cancelled)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        with self._lock:
            channels = list(self._channels)
        for channel in channels:  # outside the lock: see set_address
            channel.close()

    def set_address(self, ps_id: int, addr: str) -> None:
        """PS `ps_id` was relaunched (at `addr`): it is starting again from now."""
        old = None
        with self._lock:
            if addr != self._addrs[ps_id]:
                old = self._channels[ps_id]
                self._channels[ps_id] = self._channel(addr)
                self._stubs[ps_id] = elasticdl_pb2_grpc.ParameterServerStub(self._channels[ps_id])
                self._addrs[ps_id] = addr
            self._core.restart(ps_id, self._clock())
        # Closing a channel waits for the callbacks of its calls, which take the lock: closed
        # under it, a probe completing at that moment hangs the master for good.
        if old is not None:
            old.close()

    def _channel(self, addr: str) -> grpc.Channel:
        return auth.channel(addr, self._credentials, _CHANNEL_OPTIONS)

    def unresponsive(self, now: float | None = None) -> list[int]:
        scale = self._load()
        with self._lock:
            return self._core.unresponsive(self._clock() if now is None else now, scale)

    def status(self, ps_id: int, now: float | None = None) -> str:
        scale = self._load()
        with self._lock:
            return self._core.status(ps_id, self._clock() if now is None else now, scale)

    def down_since(self, ps_id: int) -> float | None:
        with self._lock:
            return self._core.down_since(ps_id)

    def generation(self, ps_id: int) -> int:
        with self._lock:
            return self._core.generation(ps_id)

    def served(self, ps_id: int, generation: int | None = None) -> None:
        """PS `ps_id` (incarnation `generation`) was seen serving just now: `PSLiveness.served`."""
        with self._lock:
            self._core.served(ps_id, self._clock(), generation)

    def checkpoint_writes(self) -> dict[int, tuple[int, ShardWrites]]:
        """PS id -> (incarnation, its checkpoint writes) from the newest answered probes."""
        with self._lock:
            return dict(self._writes)

    def wait_serving(self, addr: str, timeout_s: float) -> float:
        """Seconds until the PS at `addr` answers a probe; TimeoutError after `timeout_s`."""
        start = self._clock()
        deadline = start + timeout_s
        with self._channel(addr) as channel:
            stub = elasticdl_pb2_grpc.ParameterServerStub(channel)
            while True:
                left = deadline - self._clock()
                if left <= 0:
                    raise TimeoutError(
                        f"parameter server {addr} did not answer within {timeout_s:g} s"
                    )
                try:
                    stub.get_applied_progress(
                        pb.AppliedProgressRequest(), timeout=min(left, self.timeout_s)
                    )
                    return self._clock() - start
                except grpc.RpcError:
                    time.sleep(min(0.1, max(0.0, deadline - self._clock())))

    # -- the probing thread -----------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                for ps_id, stub in enumerate(self._stubs):
                    self._send(ps_id, stub)
            self._stop.wait(self.interval_s)

    def _send(self, ps_id: int, stub: elasticdl_pb2_grpc.ParameterServerStub) -> None:
        """Send one probe (lock held); its callback records the outcome."""
        probe = self._core.sent(ps_id, self._clock())
        try:
            call = stub.get_applied_progress.future(
                pb.AppliedProgressRequest(), timeout=self.timeout_s
            )
        except ValueError:  # the channel was closed by stop() or set_address()
            return

        def done(future: grpc.Future) -> None:
            error = ""
            if future.cancelled():
                return
            exception = future.exception()
            if exception is not None:
                code = exception.code() if isinstance(exception, grpc.Call) else None
                error = f"{getattr(code, 'name', type(exception).__name__)}"
            with self._lock:
                if error:
                    self._core.failed(probe, error)
                    return
                self._core.answered(probe)
                health = future.result().checkpoints
                if health.enabled and self._core.is_current(probe):
                    writes = writes_of(health)
                    known = self._writes.get(probe.ps_id)
                    # Counts only grow within an incarnation: a late answer does not go back.
                    if (
                        known is None
                        or known[0] != probe.generation
                        or _total(known[1]) <= _total(writes)
                    ):
                        self._writes[probe.ps_id] = (probe.generation, writes)

        call.add_done_callback(done)


def writes_of(health: pb.CheckpointHealth) -> ShardWrites:
    """The pure `ShardWrites` of a PS's `CheckpointHealth` answer."""
    return ShardWrites(
        written=health.written,
        failed=health.failed,
        failed_in_a_row=health.failed_in_a_row,
        last_error=health.last_error,
        last_failed_version=health.last_failed_version,
    )


def _total(writes: ShardWrites) -> int:
    return writes.written + writes.failed
