"""`KubernetesInstanceManager`: the job's parameter servers and workers as pods.

The same interface as `LocalInstanceManager` (mechanism only; the master keeps the policy):

* `start_ps(i)` creates, once per job, the NetworkPolicy that admits only the job's own pods
  (manifests.job_network_policy), the Secret with the job's secret, the ConfigMap with
  job.json and PS i's Service, then a
  pod for PS i (a relaunch: the next generation `<job>-ps-<i>-r<n>`), and returns the
  Service's stable address at once. `start_worker(id, ps)` creates pod `<job>-worker-<id>`.
  Pods are created by a background thread: a creation the API refuses for a transient reason
  (ResourceQuota exceeded, 409 conflict, throttling, 5xx) is retried with exponential backoff
  (`CreationBackoff`); one refused for good, or retried past the backoff's limit, is reported
  as a failed exit with the API's message. Creations and deletions go at a bounded rate (a
  token bucket, 20 a second with bursts of 30 by default), and a 429 or 5xx holds every
  creation back for its `Retry-After` or an exponential backoff (throttle.py), as client-go
  does: 1,000 workers' pods are created in ~50 s without flooding the API server.
* A watch thread (pod_watch.py) lists the job's pods (label `elasticdl-job-name`), then watches
  from the list's resourceVersion, and lists again every `resync_s`, after a 410 Gone and after
  a broken connection. Every event goes to the pure `PodTracker` (pod_states.py); each ended
  pod becomes a `PodExit` (an `InstanceExit` with `outcome`, `message`) on the `exits()`
  queue. A pod on a lost node is force-deleted.
* `signal(role, i, SIGTERM)` deletes the pod with its termination grace period (the kubelet
  sends SIGTERM, then SIGKILL), `SIGKILL` deletes it with grace 0; other signals cannot be
  delivered to a pod (False). An exit the master caused itself is reported with that signal
  ("killed"), not as a preemption.
* `alive(role)`: instances started and not ended (creation pending, Pending, Running).
* `listen_for_scale(inbox)`: resize requests annotated on the job's ConfigMap (scale.py).
* `shutdown(grace_s)` deletes the job's pods (grace `grace_s`), waits up to `grace_s` + 10 s
  for them to end, then deletes the Services, the ConfigMap, the Secret and the NetworkPolicy.
  ownerReferences
  to the master pod cover a master that crashed before it could.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import math
import queue
import signal as signals
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from elasticdl.runtime.k8s import manifests
from elasticdl.runtime.k8s.manifests import ClusterSpec
from elasticdl.runtime.k8s.pod_states import (
    EXIT_KIND,
    CreationBackoff,
    Decision,
    Outcome,
    PodTracker,
    Refusal,
    creation_refusal,
)
from elasticdl.runtime.k8s.pod_watch import PodWatch
from elasticdl.runtime.k8s.throttle import ApiPace
from elasticdl.runtime.master.exits import ExitKind
from elasticdl.runtime.master.instances import (
    InstanceExit,
    InstanceManager,
    Role,
    StatusSource,
    drain_exits,
)
from elasticdl.runtime.master.scaling import ScaleInbox

log = logging.getLogger("elasticdl.k8s")

_SHUTDOWN_MARGIN_S = 10.0


@dataclass(frozen=True)
class PodExit(InstanceExit):
    """An `InstanceExit` with what Kubernetes said about the pod: `outcome`
    (pod_states.Outcome), its `ExitKind` as `observed` (preempted and oom beyond what an exit
    status tells), the tracker's `message` and the pod's name."""

    outcome: str = ""
    pod: str = ""


def _observed(outcome: Outcome, sig: int | None) -> ExitKind | None:
    """The exit kind of a pod's outcome; a failed pod ended by a signal (one the master sent)
    was killed."""
    kind = EXIT_KIND[outcome]
    if kind is ExitKind.FAILED and sig is not None:
        return ExitKind.KILLED
    return kind


def load_api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An ApiClient: in-cluster config (a service account) when in a pod, else kubeconfig."""
    from kubernetes import config

    configuration = client.Configuration()
    try:
        if kubeconfig:
            raise config.ConfigException("kubeconfig given")
        config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException:
        config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    return client.ApiClient(configuration)


def current_namespace(kubeconfig: str | None = None) -> str:
    """The namespace of this pod's service account, else the kubeconfig context's, else
    "default"."""
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    try:
        with open(path) as f:
            return f.read().strip() or "default"
    except OSError:
        pass
    try:
        from kubernetes import config

        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
        return str(active.get("context", {}).get("namespace") or "default")
    except Exception:  # noqa: BLE001 - no kubeconfig: the default namespace
        return "default"


@dataclass
class _Instance:
    role: Role
    index: int
    pod: str
    manifest: dict[str, Any]
    backoff: CreationBackoff
    created: bool = False
    in_flight: bool = False
    """A create call for it is under way."""
    delete_grace: int | None = None
    """Signalled while its create call was under way: delete it with this grace once created."""
    ended: bool = False
    running: bool = False
    """Its pod was seen running (the watch said so)."""
    signal_sent: int | None = None
    launch_id: str = field(default_factory=lambda: uuid.uuid4().hex)


def _status_message(err: ApiException) -> str:
    try:
        return str(json.loads(err.body or "{}").get("message") or err.reason or "")
    except (ValueError, AttributeError):
        return str(err.reason or err.body or "")


class KubernetesInstanceManager(InstanceManager):
    """Parameter servers and workers as pods of one job (see the module docstring).

    `api_client`: a configured `kubernetes.client.ApiClient` (default: `load_api_client()`).
    `backoff`: makes the `CreationBackoff` of each pod creation. `resync_s`: how often the
    watch lists everything again; `watch_timeout_s`: how long one watch request lasts.
    `pace`: the rate of pod creations and deletions (throttle.py; default 20/s, burst 30).
    """

    def __init__(
        self,
        spec: ClusterSpec,
        config_json: str,
        api_client: Any | None = None,
        backoff: Callable[[], CreationBackoff] = CreationBackoff,
        resync_s: float = 300.0,
        watch_timeout_s: int = 30,
        job_secret: str = "",
        pace: ApiPace | None = None,
    ) -> None:
        """`job_secret`: the job's secret (runtime/auth.py), put in the job's Secret."""
        self.spec = spec
        self._job_secret = job_secret
        self.prefix = spec.prefix
        self.namespace = spec.namespace
        self._config_json = manifests.config_for_pods(spec, config_json)
        api_client = api_client or load_api_client()
        self._api = client.CoreV1Api(api_client)
        self._net = client.NetworkingV1Api(api_client)
        self._new_backoff = backoff
        self._pace = pace or ApiPace()
        self._selector = manifests.job_selector(self.prefix)
        self._lock = threading.Condition()
        self._tracker = PodTracker()
        self._current: dict[tuple[Role, int], _Instance] = {}
        self._by_pod: dict[str, _Instance] = {}
        self._ps_generation: dict[int, int] = {}
        self._services: set[int] = set()
        self._config_created = False
        self._exits: queue.Queue[InstanceExit] = queue.Queue()
        self._due: list[tuple[float, int, _Instance]] = []
        self._seq = itertools.count()
        self._closing = False
        """No more creations (shutdown began)."""
        self._watch = PodWatch(
            self._api,
            self.namespace,
            self._selector,
            self._expected,
            self._listed,
            self._observed_event,
            backoff,
            resync_s,
            watch_timeout_s,
        )
        self._scale_listener: Any = None
        self._config_annotations: dict[str, str] = {}
        self._creator = threading.Thread(target=self._create_loop, name="k8s-create", daemon=True)
        self._watcher = threading.Thread(target=self._watch.run, name="k8s-watch", daemon=True)
        self._creator.start()
        self._watcher.start()

    # -- the interface ---------------------------------------------------------------------

    def start_ps(self, ps_id: int) -> str:
        self._ensure_config()
        if ps_id not in self._services:
            self._create_now("service", manifests.ps_service(self.spec, ps_id))
            self._services.add(ps_id)
        generation = self._ps_generation.get(ps_id, -1) + 1
        self._ps_generation[ps_id] = generation
        launch = uuid.uuid4().hex
        pod = manifests.ps_pod(self.spec, ps_id, generation, launch)
        self._launch(Role.PS, ps_id, pod, launch)
        return self.spec.ps_address(ps_id)

    def start_worker(self, worker_id: int, ps_addrs: Sequence[str]) -> None:
        self._ensure_config()
        launch = uuid.uuid4().hex
        pod = manifests.worker_pod(self.spec, worker_id, ps_addrs, launch)
        self._launch(Role.WORKER, worker_id, pod, launch)

    def signal(self, role: Role, index: int, sig: int) -> bool:
        if sig == signals.SIGKILL:
            grace = 0
        elif sig == signals.SIGTERM:
            grace = self.spec.termination_grace_s
        else:
            log.warning("%s%d: %s cannot be sent to a pod", role, index, signals.Signals(sig).name)
            return False
        with self._lock:
            inst = self._current.get((role, index))
            if inst is None or inst.ended:
                return False
            inst.signal_sent = sig
            if inst.in_flight:
                inst.delete_grace = grace  # deleted as soon as the create call returns
                return True
            if not inst.created:
                # Not created yet (creation refused so far): it ends here.
                self._end(inst, None, sig, Outcome.FAILED, f"creation of pod {inst.pod} cancelled")
                return True
        self._delete_pod(inst.pod, grace)
        return True

    def exits(self, timeout: float) -> list[InstanceExit]:
        return drain_exits(self._exits, timeout)

    def alive(self, role: Role) -> list[int]:
        with self._lock:
            return sorted(
                i for (r, i), inst in self._current.items() if r == role and not inst.ended
            )

    def running(self, role: Role) -> list[int]:
        """Indexes of the instances of `role` whose pod the watch saw running, not ended."""
        with self._lock:
            found = self._current.items()
            return sorted(
                i for (r, i), inst in found if r == role and inst.running and not inst.ended
            )

    def is_alive(self, role: Role, index: int) -> bool:
        with self._lock:
            inst = self._current.get((role, index))
            return inst is not None and not inst.ended

    def listen_for_scale(self, inbox: ScaleInbox, status: StatusSource | None = None) -> None:
        """Resize and status requests annotated on the job's ConfigMap (scale.py)."""
        from elasticdl.runtime.k8s.scale import ANNOTATION_RESIZABLE, ConfigMapScaleListener

        self._config_annotations[ANNOTATION_RESIZABLE] = "true"
        if self._scale_listener is None:
            name = manifests.config_map_name(self.prefix)
            listener = ConfigMapScaleListener(self._api, self.namespace, name, inbox, status=status)
            self._scale_listener = listener.start()

    def shutdown(self, grace_s: float = 5.0) -> None:
        if self._scale_listener is not None:
            self._scale_listener.stop()
        with self._lock:
            first = not self._closing
            self._closing = True
            for _, _, inst in self._due:
                if not inst.ended and not inst.created:
                    self._end(inst, None, None, Outcome.FAILED, "job shut down before creation")
            self._due.clear()
            self._lock.notify_all()
        grace = max(0, math.ceil(grace_s))
        _call(
            "delete pods",
            lambda: self._api.delete_collection_namespaced_pod(
                self.namespace, label_selector=self._selector, grace_period_seconds=grace
            ),
        )
        deadline = time.monotonic() + grace_s + _SHUTDOWN_MARGIN_S
        with self._lock:
            while any(not i.ended for i in self._current.values()):
                left = deadline - time.monotonic()
                if left <= 0 or not self._watcher.is_alive():
                    break
                self._lock.wait(timeout=min(left, 0.2))
        if not first:
            return
        selector = self._selector
        for what, delete in (
            ("services", self._api.delete_collection_namespaced_service),
            ("the config map", self._api.delete_collection_namespaced_config_map),
            ("the secret", self._api.delete_collection_namespaced_secret),
            ("the network policy", self._net.delete_collection_namespaced_network_policy),
        ):
            _call(f"delete {what}", lambda d=delete: d(self.namespace, label_selector=selector))
        self._watch.stop()

    # -- creating ----------------------------------------------------------------------------

    def _ensure_config(self) -> None:
        if not self._config_created:
            policy = manifests.job_network_policy(self.spec)
            self._create_now("network_policy", policy, self._net)
            self._create_now("secret", manifests.job_secret(self.spec, self._job_secret))
            body = manifests.config_map(self.spec, self._config_json, self._config_annotations)
            self._create_now("config_map", body)
            self._config_created = True

    def _create_now(self, kind: str, body: dict[str, Any], api: Any = None) -> None:
        create_replacing(api or self._api, self.namespace, kind, body, self._new_backoff())

    def _launch(self, role: Role, index: int, pod: dict[str, Any], launch: str) -> None:
        name = pod["metadata"]["name"]
        inst = _Instance(role, index, name, pod, self._new_backoff(), launch_id=launch)
        with self._lock:
            if self._closing:
                raise RuntimeError("the instance manager is shut down")
            self._current[(role, index)] = inst
            self._by_pod[name] = inst
            self._tracker.expect(name)
            heapq.heappush(self._due, (time.monotonic(), next(self._seq), inst))
            self._lock.notify_all()

    def _create_loop(self) -> None:
        while True:
            with self._lock:
                while not self._closing and (not self._due or self._due[0][0] > time.monotonic()):
                    wait = self._due[0][0] - time.monotonic() if self._due else None
                    self._lock.wait(timeout=wait)
                if self._closing:
                    return
                _, _, inst = heapq.heappop(self._due)
                if inst.ended:
                    continue
                inst.in_flight = True
            self._pace.before_create()  # created then deleted if the job shut down meanwhile
            self._create_pod(inst)

    def _create_pod(self, inst: _Instance) -> None:
        try:
            created = self._api.create_namespaced_pod(
                self.namespace, inst.manifest, _preload_content=False
            )
            uid = json.loads(created.data)["metadata"]["uid"]
        except ApiException as err:
            self._refused(inst, err)
            return
        except Exception as err:  # noqa: BLE001 - connection refused, timeout: transient
            self._refused(inst, ApiException(status=0, reason=str(err)))
            return
        self._pace.accepted()
        self._bound(inst, uid)

    def _bound(self, inst: _Instance, uid: str) -> None:
        with self._lock:
            inst.created = True
            inst.in_flight = False
            inst.backoff.reset()
            decisions = self._tracker.bind(inst.pod, uid)
            for decision in decisions:
                self._decided(decision)
            grace = 0 if self._closing else inst.delete_grace
        log.debug("created pod %s (uid %s)", inst.pod, uid)
        if grace is not None:  # signalled, or the job shut down, while it was being created
            self._delete_pod(inst.pod, grace)

    def _refused(self, inst: _Instance, err: ApiException) -> None:
        message = _status_message(err)
        refusal = creation_refusal(err.status or 0, message)
        self._pace.refused(err.status or 0, err.headers, message)
        if refusal is Refusal.CONFLICT:
            existing = self._read_pod(inst.pod)
            annotations = (existing or {}).get("metadata", {}).get("annotations") or {}
            if existing and annotations.get(manifests.ANNOTATION_LAUNCH) == inst.launch_id:
                self._bound(inst, existing["metadata"]["uid"])  # our create went through
                return
            if existing:
                log.warning("pod %s exists from an earlier attempt: deleting it", inst.pod)
                self._delete_pod(inst.pod, 0)
        delay = None if refusal is Refusal.FATAL else inst.backoff.next_delay()
        with self._lock:
            inst.in_flight = False
            if inst.ended or self._closing:
                return
            if inst.delete_grace is not None:
                self._tracker.forget(inst.pod)
                message = f"creation of pod {inst.pod} cancelled"
                self._end(inst, None, inst.signal_sent, Outcome.FAILED, message)
                return
            if delay is None:
                tries = f" after {inst.backoff.attempts} retries" if inst.backoff.attempts else ""
                self._tracker.forget(inst.pod)
                self._end(
                    inst,
                    None,
                    None,
                    Outcome.FAILED,
                    f"pod {inst.pod} could not be created{tries}: HTTP {err.status}: {message}",
                )
                return
            log.warning(
                "creating pod %s refused (HTTP %s: %s); retrying in %.1f s",
                inst.pod,
                err.status,
                message,
                delay,
            )
            heapq.heappush(self._due, (time.monotonic() + delay, next(self._seq), inst))
            self._lock.notify_all()

    # -- watching ----------------------------------------------------------------------------

    def _expected(self) -> list[str]:
        with self._lock:
            return [n for n, i in self._by_pod.items() if i.created and not i.ended]

    def _listed(self, items: list[Mapping[str, Any]], expected: list[str]) -> None:
        """A listing of the job's pods: feed each to the tracker; pods in `expected` (created
        before the list was requested) that it lacks were deleted while nobody watched."""
        with self._lock:
            for item in items:
                decision = self._tracker.observe("MODIFIED", item)
                if decision is not None:
                    self._decided(decision)
            names = [(i.get("metadata") or {}).get("name", "") for i in items]
            for decision in self._tracker.vanished(expected, names):
                self._decided(decision)

    def _observed_event(self, kind: str, pod: Mapping[str, Any]) -> None:
        with self._lock:
            decision = self._tracker.observe(kind, pod)
            if decision is not None:
                self._decided(decision)

    # -- decisions -----------------------------------------------------------------------------

    def _decided(self, decision: Decision) -> None:
        """Act on one decision of the tracker (called with the lock held)."""
        inst = self._by_pod.get(decision.pod)
        if inst is None or inst.ended:
            return
        if decision.outcome is Outcome.RUNNING:
            inst.running = True
            log.info("%s%d: %s", inst.role, inst.index, decision.message)
            return
        code, sig, outcome, message = (
            decision.exit_code,
            decision.signal,
            decision.outcome,
            decision.message,
        )
        if inst.signal_sent is not None and outcome is Outcome.PREEMPTED:
            # The master deleted it: killed by its signal, not preempted.
            sig = decision.signal if decision.signal is not None else inst.signal_sent
            outcome = Outcome.FAILED
            name = signals.Signals(inst.signal_sent).name
            message = f"pod {inst.pod} deleted by the master ({name})"
        if decision.force_delete:
            threading.Thread(
                target=self._delete_pod, args=(inst.pod, 0), name="k8s-force-delete", daemon=True
            ).start()
        self._end(inst, code, sig, outcome, message, decision.log_tail)

    def _end(
        self,
        inst: _Instance,
        code: int | None,
        sig: int | None,
        outcome: Outcome,
        message: str,
        log_tail: str = "",
    ) -> None:
        """Report `inst` ended (lock held)."""
        inst.ended = True
        level = logging.INFO if outcome is Outcome.SUCCEEDED else logging.WARNING
        log.log(level, "%s%d ended (%s): %s", inst.role, inst.index, outcome, message)
        self._exits.put(
            PodExit(
                inst.role,
                inst.index,
                exit_code=code,
                signal=sig,
                at=time.monotonic(),
                log_tail=log_tail,
                observed=_observed(outcome, sig),
                message=message,
                outcome=str(outcome),
                pod=inst.pod,
            )
        )
        self._lock.notify_all()

    # -- API helpers ---------------------------------------------------------------------------

    def _read_pod(self, name: str) -> Mapping[str, Any] | None:
        return _read_pod(self._api, self.namespace, name)

    def _delete_pod(self, name: str, grace: int) -> None:
        self._pace.before_delete()
        delete = self._api.delete_namespaced_pod
        _call(
            f"delete pod {name}", lambda: delete(name, self.namespace, grace_period_seconds=grace)
        )

    def wait_watching(self, timeout: float = 10.0) -> bool:
        """Whether the watch has done its first list (for tests and start-up logs)."""
        return self._watch.ready.wait(timeout)


def create_replacing(
    api: Any, namespace: str, kind: str, body: dict[str, Any], backoff: CreationBackoff
) -> None:
    """Create a Service, the ConfigMap, the Secret or the NetworkPolicy now, replacing a stale
    one of the same name (from an earlier attempt of the job: it may belong to another master
    pod); transient refusals are retried with `backoff`; a fatal one raises RuntimeError."""
    create = getattr(api, f"create_namespaced_{kind}")
    delete = getattr(api, f"delete_namespaced_{kind}")
    name = body["metadata"]["name"]
    while True:
        try:
            create(namespace, body)
            return
        except ApiException as err:
            message = _status_message(err)
            refusal = creation_refusal(err.status or 0, message)
            if refusal is Refusal.CONFLICT:
                log.info("replacing the %s %s left by an earlier attempt", kind, name)
                _call(f"delete {kind} {name}", lambda: delete(name, namespace))
            elif refusal is Refusal.FATAL:
                raise RuntimeError(
                    f"cannot create {kind} {name} in namespace {namespace}: "
                    f"HTTP {err.status}: {message}"
                ) from None
            delay = backoff.next_delay()
            if delay is None:
                raise RuntimeError(
                    f"cannot create {kind} {name}: still refused after "
                    f"{backoff.attempts} retries: HTTP {err.status}: {message}"
                ) from None
            log.warning(
                "%s %s refused (HTTP %s: %s); retrying in %.1f s",
                kind,
                name,
                err.status,
                message,
                delay,
            )
            time.sleep(delay)


def _read_pod(api: Any, namespace: str, name: str) -> Mapping[str, Any] | None:
    try:
        resp = api.read_namespaced_pod(name, namespace, _preload_content=False)
        return dict(json.loads(resp.data))
    except ApiException as err:
        if err.status != 404:
            log.warning("reading pod %s: HTTP %s", name, err.status)
        return None


def _call(what: str, fn: Callable[[], Any]) -> None:
    """An API call whose failure is logged, not raised (404: already gone)."""
    try:
        fn()
    except ApiException as err:
        if err.status != 404:
            log.warning("%s: HTTP %s: %s", what, err.status, _status_message(err))
    except Exception as err:  # noqa: BLE001 - best effort (cleanup)
        log.warning("%s: %s", what, err)
