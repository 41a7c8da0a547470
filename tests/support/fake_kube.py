"""Test helper: a loopback fake Kubernetes API server that runs pods as local processes.

    with fake_kube() as kube:
        api_client = kube.api_client()          # the official client, bound to the fake
        ...                                      # create pods through it: they run here
        kube.oom_kill("job-worker-0")            # the kernel's OOM killer (OOMKilled, 137)
        kube.preempt("job-worker-1")             # SIGKILL without OOMKilled (137)
        kube.refuse_creates(2)                   # the next 2 pod creations: 403 quota
        kube.refuse_creates(3, code=429, retry_after=1)  # 429 Too Many Requests, Retry-After

What it serves (HTTP/1.1 on 127.0.0.1, an ephemeral port; no auth), for pods, services,
configmaps and secrets in any namespace under /api/v1/namespaces/NS/... (and networkpolicies
under /apis/networking.k8s.io/v1/namespaces/NS/..., stored, not enforced): create (POST; every
object is checked with kubernetes-validate, strict, like an API server's validation: 422 if invalid;
409 AlreadyExists), get, list with `labelSelector` (=, ==, !=, in, notin, exists, !exists),
merge patch (PATCH: merge or strategic merge, as a JSON merge patch), delete
(`gracePeriodSeconds` from the query or a DeleteOptions body), deletecollection by
label selector, and watch (`?watch=true&resourceVersion=&timeoutSeconds=`): JSON events,
one a line, in a chunked response; a resourceVersion older than the last `compact()` gets
the ERROR event with code 410 (Gone), as etcd compaction does. Every write bumps a global
resourceVersion.

Pods run: once created, a pod is scheduled (`spec.nodeName`), its container's command starts
as a local process (argv[0] `python` becomes this interpreter) and its status goes Pending ->
Running -> Succeeded/Failed with the exit code (128+N for signal N) and, on failure, the log
tail as the termination message (`FallbackToLogsOnError`). To run the job's own pods here,
the fake plays kubelet, DNS and kube-proxy: ConfigMap volumes are written under the pod's
directory (so are projected volumes of ConfigMaps and Secrets, the Secrets' values decoded)
and argv paths under their mountPath point there; a Service gets a local port per
service port, `<svc>.<ns>.svc:<port>` in argv and env becomes `127.0.0.1:<local port>`, a pod
selected by a Service listens on that local port (`--port <targetPort>`), and `0.0.0.0`
becomes 127.0.0.1. Deleting a pod with a grace period sets `deletionTimestamp`, sends
SIGTERM and SIGKILL after the grace period, records how it ended, then removes it
(DELETED); grace 0 removes it at once and kills the process.

`command=` replaces how a pod's process is made (e.g. a sleeper for API-level tests).
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import datetime
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from elasticdl.runtime.master.ports import choose_port

RESOURCES = {
    "pods": "Pod",
    "services": "Service",
    "configmaps": "ConfigMap",
    "secrets": "Secret",
    "networkpolicies": "NetworkPolicy",
}
_PATH = re.compile(
    r"^/(?:api/v1|apis/networking\.k8s\.io/v1)/namespaces/(?P<ns>[^/]+)/"
    r"(?P<res>pods|services|configmaps|secrets|networkpolicies)(?:/(?P<name>[^/]+))?$"
)
NODE = "fake-node-1"
SCHEDULE_S = 0.02


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_object(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


# -- label selectors ----------------------------------------------------------------------


def _split_selector(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Whether `labels` satisfy a Kubernetes label selector string."""
    for req in _split_selector(selector or ""):
        match = re.match(r"^([\w./-]+)\s+(in|notin)\s+\((.*)\)$", req)
        if match:
            key, op, values = match.groups()
            allowed = {v.strip() for v in values.split(",")}
            if (op == "in") != (labels.get(key) in allowed):
                return False
        elif "!=" in req:
            key, value = (s.strip() for s in req.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in req:
            key, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif req.startswith("!"):
            if req[1:].strip() in labels:
                return False
        elif req not in labels:
            return False
    return True


# -- the store and the pods ---------------------------------------------------------------


@dataclass
class _PodRun:
    key: tuple[str, str]
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    directory: Path | None = None
    mark: str = ""
    """Why the fake itself killed it: oom, evicted, node_lost, preempted, force."""
    done: threading.Event = field(default_factory=threading.Event)


class FakeKube:
    """The fake API server's state and test controls (see the module docstring)."""

    def __init__(
        self,
        command: Callable[[dict[str, Any], FakeKube], list[str] | None] | None = None,
        validate: bool = True,
        schedule_s: float = SCHEDULE_S,
    ) -> None:
        self._command = command or local_command
        self._validate = validate
        self._schedule_s = schedule_s
        self.lock = threading.Condition()
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.events: list[tuple[int, str, str, str, dict[str, Any]]] = []
        self.rv = 100
        self.compacted = 0
        self.service_ports: dict[tuple[str, str, int], int] = {}
        self.runs: dict[tuple[str, str], _PodRun] = {}
        self.refusals: list[tuple[int, str, float | None]] = []
        self.requests: list[tuple[str, str]] = []
        self.timed_requests: list[tuple[float, str, str]] = []
        """(time.monotonic(), method, path) of every request, as `requests`."""
        self.root = Path(tempfile.mkdtemp(prefix="fake-kube-"))
        self.stopping = False
        self._held: set[str] = set()
        self._cluster_ips = itertools.count(10)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    # -- test controls -----------------------------------------------------------------------

    def api_client(self) -> Any:
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        return client.ApiClient(configuration)

    def refuse_creates(
        self,
        count: int,
        code: int = 403,
        message: str = 'pods "x" is forbidden: exceeded quota: compute-resources, '
        "requested: cpu=1, used: cpu=4, limited: cpu=4",
        retry_after: float | None = None,
    ) -> None:
        """Answer the next `count` pod creations with `code` (default: a ResourceQuota), with
        a `Retry-After` header when given (an overloaded API server's 429 says it)."""
        with self.lock:
            self.refusals.extend([(code, message, retry_after)] * count)

    def hold(self, name: str) -> None:
        """Keep pod `name` Pending (unschedulable) until `release(name)`."""
        with self.lock:
            self._held.add(name)

    def release(self, name: str) -> None:
        with self.lock:
            self._held.discard(name)
            self.lock.notify_all()

    def oom_kill(self, name: str, namespace: str = "default") -> None:
        """The OOM killer: SIGKILL, terminated with reason OOMKilled and exit code 137."""
        self._kill(namespace, name, "oom")

    def preempt(self, name: str, namespace: str = "default") -> None:
        """SIGKILL from outside (a preempting kubelet): exit code 137, not OOMKilled."""
        self._kill(namespace, name, "preempted")

    def evict(self, name: str, namespace: str = "default") -> None:
        """Kubelet node-pressure eviction: phase Failed, reason Evicted."""
        self._kill(namespace, name, "evicted")

    def lose_node(self, name: str, namespace: str = "default") -> None:
        """The node stops reporting: the process dies, the pod goes to phase Unknown."""
        self._kill(namespace, name, "node_lost")

    def compact(self) -> None:
        """Forget the event history: watches from an older resourceVersion get 410 Gone."""
        with self.lock:
            self.compacted = self.rv + 1

    def pods(self, namespace: str = "default", selector: str = "") -> list[dict[str, Any]]:
        with self.lock:
            return [
                copy.deepcopy(o)
                for (res, ns, _), o in sorted(self.objects.items())
                if res == "pods" and ns == namespace and selector_matches(selector, _labels(o))
            ]

    def get(self, resource: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        with self.lock:
            obj = self.objects.get((resource, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def names(self, resource: str, namespace: str = "default") -> list[str]:
        with self.lock:
            return sorted(n for (r, ns, n) in self.objects if r == resource and ns == namespace)

    def logs(self, name: str, namespace: str = "default") -> str:
        run = self.runs.get((namespace, name))
        if run is None or run.log is None or not run.log.exists():
            return ""
        return run.log.read_text(errors="replace")

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.02)
        return predicate()

    def close(self) -> None:
        with self.lock:
            self.stopping = True
            runs = list(self.runs.values())
            self.lock.notify_all()
        for run in runs:
            if run.process is not None and run.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.process.pid, signal.SIGKILL)
                run.process.wait()
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the store -----------------------------------------------------------------------------

    def _record(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        """Bump the resourceVersion, stamp it on `obj`, log the event (lock held)."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append(
            (self.rv, resource, obj["metadata"]["namespace"], kind, copy.deepcopy(obj))
        )
        self.lock.notify_all()

    def create(self, resource: str, namespace: str, body: dict[str, Any]) -> tuple[Any, ...]:
        if self._validate:
            import kubernetes_validate

            try:
                kubernetes_validate.validate(body, "1.33", strict=True)
            except kubernetes_validate.ValidationError as err:
                message = str(err).splitlines()[0]
                return 422, status_object(
                    422, "Invalid", f"{RESOURCES[resource]} is invalid: {message}"
                )
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name", "")
        meta["namespace"] = namespace
        with self.lock:
            if resource == "pods" and self.refusals:
                code, message, retry_after = self.refusals.pop(0)
                reason = {403: "Forbidden", 409: "AlreadyExists", 429: "TooManyRequests"}.get(
                    code, "InternalError"
                )
                body = status_object(code, reason, message.replace('"x"', f'"{name}"'))
                if retry_after is None:
                    return code, body
                return code, body, {"Retry-After": f"{retry_after:g}"}
            if (resource, namespace, name) in self.objects:
                return 409, status_object(
                    409, "AlreadyExists", f'{resource} "{name}" already exists'
                )
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            if resource == "pods":
                obj["spec"].setdefault("terminationGracePeriodSeconds", 30)
                obj["status"] = {"phase": "Pending", "qosClass": "Burstable"}
            if resource == "services":
                obj["spec"]["clusterIP"] = f"10.96.0.{next(self._cluster_ips)}"
                for port in obj["spec"].get("ports", []):
                    self.service_ports[(namespace, name, port["port"])] = choose_port("127.0.0.1")
            self.objects[(resource, namespace, name)] = obj
            self._record(resource, "ADDED", obj)
            created = copy.deepcopy(obj)
        if resource == "pods":
            run = _PodRun((namespace, name))
            self.runs[(namespace, name)] = run
            threading.Thread(target=self._run_pod, args=(run,), daemon=True).start()
        return 201, created

    def patch(
        self, resource: str, namespace: str, name: str, patch: dict[str, Any]
    ) -> tuple[int, Any]:
        """A JSON merge patch (RFC 7386; for metadata and ConfigMap data a strategic merge
        patch means the same): MODIFIED, with a new resourceVersion."""
        with self.lock:
            obj = self.objects.get((resource, namespace, name))
            if obj is None:
                return 404, status_object(404, "NotFound", f'{resource} "{name}" not found')
            for fixed in ("name", "namespace", "uid"):
                if fixed in patch.get("metadata", {}):
                    return 422, status_object(422, "Invalid", f"metadata.{fixed} is immutable")
            _merge_patch(obj, patch)
            self._record(resource, "MODIFIED", obj)
            return 200, copy.deepcopy(obj)

    def _remove(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """Remove an object (lock held): the DELETED event."""
        obj = self.objects.pop((resource, namespace, name), None)
        if obj is not None:
            self._record(resource, "DELETED", obj)
        return obj

    def delete(
        self, resource: str, namespace: str, name: str, grace: int | None
    ) -> tuple[int, Any]:
        with self.lock:
            obj = self.objects.get((resource, namespace, name))
            if obj is None:
                return 404, status_object(404, "NotFound", f'{resource} "{name}" not found')
            if resource != "pods":
                return 200, self._remove(resource, namespace, name)
            run = self.runs.get((namespace, name))
            running = run is not None and run.process is not None and run.process.poll() is None
            if grace is None:
                grace = int(obj["spec"].get("terminationGracePeriodSeconds", 30))
            if grace == 0 or not running:
                if run is not None:
                    run.mark = run.mark or "force"
                removed = self._remove(resource, namespace, name)
                if run is not None and running:
                    _signal(run, signal.SIGKILL)
                return 200, removed
            if "deletionTimestamp" in obj["metadata"]:
                return 200, copy.deepcopy(obj)
            obj["metadata"]["deletionTimestamp"] = _now()
            obj["metadata"]["deletionGracePeriodSeconds"] = grace
            self._record(resource, "MODIFIED", obj)
            result = copy.deepcopy(obj)
        assert run is not None
        _signal(run, signal.SIGTERM)
        threading.Thread(target=self._kill_after, args=(run, grace), daemon=True).start()
        return 200, result

    def _kill_after(self, run: _PodRun, grace: float) -> None:
        if not run.done.wait(grace):
            _signal(run, signal.SIGKILL)

    def _kill(self, namespace: str, name: str, mark: str) -> None:
        run = self.runs.get((namespace, name))
        if run is None:
            raise KeyError(f"no pod {namespace}/{name}")
        run.mark = mark
        if run.process is None:
            with self.lock:
                obj = self.objects.get(("pods", namespace, name))
                if obj is not None and mark in ("evicted", "node_lost"):
                    self._finish_status(obj, run, None)
                    self._record("pods", "MODIFIED", obj)
            return
        _signal(run, signal.SIGKILL)

    # -- the kubelet ---------------------------------------------------------------------------

    def _update(self, run: _PodRun, change: Callable[[dict[str, Any]], None]) -> bool:
        namespace, name = run.key
        with self.lock:
            obj = self.objects.get(("pods", namespace, name))
            if obj is None or run.mark == "force":
                return False
            change(obj)
            self._record("pods", "MODIFIED", obj)
            return True

    def _container_status(self, obj: dict[str, Any], state: dict[str, Any]) -> None:
        container = obj["spec"]["containers"][0]
        obj["status"]["containerStatuses"] = [
            {
                "name": container["name"],
                "image": container["image"],
                "imageID": f"{container['image']}@sha256:0",
                "ready": "running" in state,
                "restartCount": 0,
                "started": "running" in state,
                "state": state,
            }
        ]

    def _run_pod(self, run: _PodRun) -> None:
        namespace, name = run.key
        time.sleep(self._schedule_s)

        def schedule(obj: dict[str, Any]) -> None:
            obj["spec"]["nodeName"] = NODE
            obj["status"]["conditions"] = [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()}
            ]
            obj["status"]["hostIP"] = "127.0.0.1"
            self._container_status(obj, {"waiting": {"reason": "ContainerCreating"}})

        with self.lock:
            while name in self._held and not self.stopping:
                if ("pods", namespace, name) not in self.objects:
                    break
                self.lock.wait(0.1)
        if not self._update(run, schedule):
            run.done.set()
            return
        with self.lock:
            obj = copy.deepcopy(self.objects.get(("pods", namespace, name)))
        if not obj or run.mark:
            run.done.set()
            return
        run.directory = self.root / namespace / name
        run.directory.mkdir(parents=True, exist_ok=True)
        run.log = run.directory / "container.log"
        argv, env = self._command(obj, self), self._env(obj)
        if argv is None:
            run.done.set()
            return
        with run.log.open("ab") as out:
            process = subprocess.Popen(  # noqa: S603 - argv list, no shell
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=run.directory,
                env=env,
                start_new_session=True,
            )
        with self.lock:
            run.process = process
            deleting = "deletionTimestamp" in (
                self.objects.get(("pods", namespace, name), {}).get("metadata", {})
            )
        if deleting or run.mark:
            _signal(run, signal.SIGKILL if run.mark else signal.SIGTERM)

        def running(obj: dict[str, Any]) -> None:
            obj["status"]["phase"] = "Running"
            obj["status"]["podIP"] = "127.0.0.1"
            obj["status"]["startTime"] = _now()
            self._container_status(obj, {"running": {"startedAt": _now()}})

        self._update(run, running)
        code = process.wait()
        run.done.set()
        exit_code = code if code >= 0 else 128 - code
        with self.lock:
            obj = self.objects.get(("pods", namespace, name))
            if obj is None or run.mark == "force":
                return
            self._finish_status(obj, run, exit_code)
            self._record("pods", "MODIFIED", obj)
            if "deletionTimestamp" in obj["metadata"]:
                self._remove("pods", namespace, name)

    def _finish_status(self, obj: dict[str, Any], run: _PodRun, exit_code: int | None) -> None:
        """The pod's status once its container ended (lock held)."""
        status = obj["status"]
        if run.mark == "node_lost":
            status["phase"] = "Unknown"
            status["reason"] = "NodeLost"
            status["message"] = (
                f"Node {NODE} which was running pod {obj['metadata']['name']} is unresponsive"
            )
            return
        if run.mark in ("oom", "preempted", "evicted") and exit_code is None:
            exit_code = 137
        reason = "Completed" if exit_code == 0 else "Error"
        if run.mark == "oom":
            reason = "OOMKilled"
        terminated: dict[str, Any] = {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": status.get("startTime", _now()),
            "finishedAt": _now(),
        }
        if exit_code and run.log is not None and run.log.exists():
            lines = run.log.read_text(errors="replace").splitlines()[-80:]
            terminated["message"] = "\n".join(lines)[-2048:]
        self._container_status(obj, {"terminated": terminated})
        status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        if run.mark == "evicted":
            status["reason"] = "Evicted"
            status["message"] = "The node was low on resource: memory."

    def _env(self, pod: dict[str, Any]) -> dict[str, str]:
        env = dict(os.environ)
        fields = {
            "metadata.name": pod["metadata"]["name"],
            "metadata.namespace": pod["metadata"]["namespace"],
            "metadata.uid": pod["metadata"]["uid"],
            "status.podIP": "127.0.0.1",
            "spec.nodeName": NODE,
        }
        for item in pod["spec"]["containers"][0].get("env", []):
            if "value" in item:
                env[item["name"]] = self.rewrite(item["value"], pod["metadata"]["namespace"])
            elif "fieldRef" in item.get("valueFrom", {}):
                env[item["name"]] = fields.get(item["valueFrom"]["fieldRef"]["fieldPath"], "")
        return env

    def rewrite(self, text: str, namespace: str) -> str:
        """Service DNS names with their port -> 127.0.0.1 and the Service's local port."""
        for (ns, name, port), local in self.service_ports.items():
            for host in (f"{name}.{ns}.svc.cluster.local", f"{name}.{ns}.svc", f"{name}.{ns}"):
                text = text.replace(f"{host}:{port}", f"127.0.0.1:{local}")
            if ns == namespace:
                text = re.sub(rf"(?<![\w.-]){re.escape(name)}:{port}\b", f"127.0.0.1:{local}", text)
        return text


def _merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_patch(target[key], value)
        elif isinstance(value, dict):
            target[key] = {}
            _merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def _signal(run: _PodRun, sig: int) -> None:
    if run.process is not None and run.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.process.pid, sig)


def _volume_files(
    volume: dict[str, Any], kube: FakeKube, namespace: str
) -> dict[str, bytes] | None:
    """The files of a configMap, secret or projected volume (None: another kind)."""
    import base64

    if "projected" in volume:
        files: dict[str, bytes] = {}
        for source in volume["projected"].get("sources", []):
            files.update(_volume_files(source, kube, namespace) or {})
        return files
    if "configMap" in volume:
        cm = kube.get("configmaps", volume["configMap"]["name"], namespace) or {}
        data = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
        items = volume["configMap"].get("items")
    elif "secret" in volume:
        ref = volume["secret"]
        secret = kube.get("secrets", ref.get("name") or ref.get("secretName", ""), namespace) or {}
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        items = ref.get("items")
    else:
        return None
    if items:
        return {i["path"]: data[i["key"]] for i in items if i["key"] in data}
    return data


def local_command(pod: dict[str, Any], kube: FakeKube) -> list[str] | None:
    """The pod's container command as a local argv (see the module docstring)."""
    namespace = pod["metadata"]["namespace"]
    container = pod["spec"]["containers"][0]
    argv = [*container.get("command", []), *container.get("args", [])]
    if not argv:
        return None
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    directory = kube.root / namespace / pod["metadata"]["name"]
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    mounts = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        files = _volume_files(volume, kube, namespace)
        if files is not None:
            local = directory / mount["mountPath"].lstrip("/")
            local.mkdir(parents=True, exist_ok=True)
            for key, value in files.items():
                (local / key).parent.mkdir(parents=True, exist_ok=True)  # items' paths
                (local / key).write_bytes(value)
            mounts[mount["mountPath"]] = str(local)
    with kube.lock:
        services = [
            o for (res, ns, _), o in kube.objects.items() if res == "services" and ns == namespace
        ]
        own_ports = {}
        for svc in services:
            selector = svc["spec"].get("selector") or {}
            if selector and selector.items() <= _labels(pod).items():
                for port in svc["spec"].get("ports", []):
                    local = kube.service_ports[(namespace, svc["metadata"]["name"], port["port"])]
                    own_ports[str(port.get("targetPort", port["port"]))] = str(local)
    out = []
    for i, arg in enumerate(argv):
        for path, local in mounts.items():
            if arg == path or arg.startswith(path + "/"):
                arg = local + arg[len(path) :]
        if arg == "0.0.0.0":  # noqa: S104 - rewriting it away
            arg = "127.0.0.1"
        if i > 0 and argv[i - 1] == "--port" and arg in own_ports:
            arg = own_ports[arg]
        out.append(kube.rewrite(arg, namespace))
    return out


# -- HTTP --------------------------------------------------------------------------------------


def _handler(kube: FakeKube) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else each small reply waits ~40 ms for a delayed ACK

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature
            pass

        def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[re.Match[str] | None, dict[str, str]]:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            kube.requests.append((self.command, parts.path))
            kube.timed_requests.append((time.monotonic(), self.command, parts.path))
            return _PATH.match(parts.path), query

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw.strip() else {}

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            match, _ = self._route()
            if match is None or match["name"]:
                self._send(404, status_object(404, "NotFound", "the server could not find it"))
                return
            self._send(*kube.create(match["res"], match["ns"], self._body()))

        def do_PATCH(self) -> None:  # noqa: N802
            match, _ = self._route()
            if match is None or not match["name"]:
                self._send(404, status_object(404, "NotFound", "the server could not find it"))
                return
            kind = self.headers.get("Content-Type", "").split(";")[0].strip()
            if kind not in (
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ):
                self._send(415, status_object(415, "UnsupportedMediaType", f"{kind} patches"))
                return
            self._send(*kube.patch(match["res"], match["ns"], match["name"], self._body()))

        def do_DELETE(self) -> None:  # noqa: N802
            match, query = self._route()
            if match is None:
                self._send(404, status_object(404, "NotFound", "the server could not find it"))
                return
            body = self._body()
            grace_text = query.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
            grace = int(grace_text) if grace_text is not None else None
            res, ns = match["res"], match["ns"]
            if match["name"]:
                self._send(*kube.delete(res, ns, match["name"], grace))
                return
            selector = query.get("labelSelector", "")
            with kube.lock:
                names = [
                    n
                    for (r, space, n), o in kube.objects.items()
                    if r == res and space == ns and selector_matches(selector, _labels(o))
                ]
            items = [kube.delete(res, ns, n, grace)[1] for n in names]
            self._send(200, {"kind": f"{RESOURCES[res]}List", "apiVersion": "v1", "items": items})

        def do_GET(self) -> None:  # noqa: N802
            match, query = self._route()
            if match is None:
                self._send(404, status_object(404, "NotFound", "the server could not find it"))
                return
            res, ns, name = match["res"], match["ns"], match["name"]
            if name:
                obj = kube.get(res, name, ns)
                if obj is None:
                    self._send(404, status_object(404, "NotFound", f'{res} "{name}" not found'))
                else:
                    self._send(200, obj)
                return
            selector = query.get("labelSelector", "")
            if query.get("watch") in ("true", "1"):
                self._watch(res, ns, selector, query)
                return
            with kube.lock:
                items = [
                    copy.deepcopy(o)
                    for (r, space, _), o in sorted(kube.objects.items())
                    if r == res and space == ns and selector_matches(selector, _labels(o))
                ]
                version = str(kube.rv)
            self._send(
                200,
                {
                    "kind": f"{RESOURCES[res]}List",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": version},
                    "items": items,
                },
            )

        def _chunk(self, event: dict[str, Any]) -> None:
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _watch(self, res: str, ns: str, selector: str, query: dict[str, str]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
            start = query.get("resourceVersion", "")
            try:
                with kube.lock:
                    if start in ("", "0"):
                        cursor = kube.rv
                        initial = [
                            {"type": "ADDED", "object": copy.deepcopy(o)}
                            for (r, space, _), o in sorted(kube.objects.items())
                            if r == res and space == ns and selector_matches(selector, _labels(o))
                        ]
                    elif int(start) < kube.compacted:
                        initial = [
                            {
                                "type": "ERROR",
                                "object": status_object(
                                    410, "Expired", f"too old resource version: {start}"
                                ),
                            }
                        ]
                        deadline = 0.0
                        cursor = kube.rv
                    else:
                        cursor, initial = int(start), []
                for event in initial:
                    self._chunk(event)
                while time.monotonic() < deadline and not kube.stopping:
                    with kube.lock:
                        first = bisect.bisect_right(kube.events, cursor, key=lambda e: e[0])
                        fresh = kube.events[first:]
                        if not fresh:
                            kube.lock.wait(min(0.2, max(0.0, deadline - time.monotonic())))
                            continue
                    for rv, r, space, kind, obj in fresh:
                        cursor = rv
                        if r == res and space == ns and selector_matches(selector, _labels(obj)):
                            self._chunk({"type": kind, "object": obj})
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, OSError):
                self.close_connection = True

    return Handler


@contextlib.contextmanager
def fake_kube(**kwargs: Any) -> Iterator[FakeKube]:
    """A running `FakeKube`, closed (every pod process killed) on exit."""
    kube = FakeKube(**kwargs)
    try:
        yield kube
    finally:
        kube.close()
