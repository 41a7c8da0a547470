"""The objects the Kubernetes instance manager creates, as pure builders of API JSON dicts.

Per job (`ClusterSpec` holds what they share):

* a ConfigMap `<job>-config` with `job.json` (the `JobConfig` the master wrote) and a Secret
  `<job>-auth` with `job.secret` (the job's secret, runtime/auth.py), projected together
  read-only into `/etc/elasticdl/` in every PS and worker pod (the secret is never an
  argument or an environment value);
* per parameter server: a ClusterIP Service `<job>-ps-<i>` selecting that shard's pod, so a
  relaunched PS keeps its address `<job>-ps-<i>.<namespace>.svc:<port>`, and a pod
  `<job>-ps-<i>` (a relaunch: `<job>-ps-<i>-r<n>`, the Service finds it by its labels);
* per worker: a pod `<job>-worker-<id>` (ids are never reused).

Every object carries the labels `elasticdl-job-name`, `elasticdl-replica-type` (`ps`,
`worker`; not on the ConfigMap) and `elasticdl-replica-index`, never a
`workflows.argoproj.io/*` label, and an ownerReference to the master pod (name and uid from
the downward API: `MY_POD_NAME`, `MY_POD_UID`), so deleting the master (or its workflow)
garbage-collects them even if the master crashed. Pods: `restartPolicy: Never` (the master
relaunches, under a new id), `terminationGracePeriodSeconds` (default 60 s: long enough for a
worker to finish its minibatch on SIGTERM), the argv of the local processes, resources from
`cpu=1,memory=4096Mi[,gpu=1]` strings (limits default to the requests), a priority class per
role, volumes, node selector, tolerations and image pull secrets.

Every pod passes Pod Security "restricted" (`pod_security_context`,
`container_security_context`): it runs as the runtime image's non-root user with no privilege
escalation, no capabilities, the runtime's default seccomp profile and a read-only root
filesystem; what the code writes goes to an emptyDir at /tmp (`TMP_DIR`, also its HOME: Keras'
config, a git zoo's cache). Only a `--volume` of a kind "restricted" forbids (host_path) takes a
pod out of it.

The parsers (`parse_resources`, `parse_worker_priority`, `parse_volumes`, `parse_node_selector`,
`parse_tolerations`, `parse_image_pull_secrets`) raise `ManifestError` (a ValueError) with one
line that names the flag and shows the expected form.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from elasticdl.runtime import tf_quiet

CONFIG_DIR = "/etc/elasticdl"
CONFIG_FILE = "job.json"
CONFIG_PATH = f"{CONFIG_DIR}/{CONFIG_FILE}"
CONFIG_VOLUME = "elasticdl-config"
SECRET_KEY = "job.secret"
"""The job secret's key in the Secret and its file name beside job.json (auth.SECRET_FILE)."""
TLS_SUBDIR = "tls"
"""With --tls: where a pod finds the TLS Secret's files, beside job.json (JobConfig.tls_dir)."""
TLS_MOUNT = "/etc/elasticdl-tls"
"""With --tls: where the master's own pod (the Argo step) mounts the TLS Secret."""
TLS_KEYS = ("tls.crt", "tls.key")
"""The keys of a kubernetes.io/tls Secret a pod needs; `ca.crt` is projected when present."""
PS_PORT = 2222

LABEL_JOB = "elasticdl-job-name"
LABEL_TYPE = "elasticdl-replica-type"
LABEL_INDEX = "elasticdl-replica-index"
ANNOTATION_LAUNCH = "elasticdl.org/launch-id"
"""A fresh id per creation request: a 409 on retry tells our own pod from a stale one."""

RUNTIME_UID = 1000
RUNTIME_GID = 1000
"""The runtime image's user and group (the Dockerfile's USER, which a zoo's image keeps)."""
TMP_DIR = "/tmp"
TMP_VOLUME = "tmp"
"""The writable emptyDir of a pod whose root filesystem is read-only: temporary files and HOME."""
TMP_ENV = {"HOME": TMP_DIR, "TMPDIR": TMP_DIR}

GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_GRACE_S = 60


class ManifestError(ValueError):
    """A Kubernetes flag does not parse or does not fit; the message is one line."""


# -- names ------------------------------------------------------------------------------------

_MAX_PREFIX = 40  # leaves room for "-worker-<id>" / "-ps-<i>-r<n>" in a 63-char DNS label


def name_prefix(job_name: str) -> str:
    """`job_name` as the start of DNS-1035 object names and a label value: lowercase letters,
    digits and '-', starting with a letter, at most 40 characters (longer names keep their
    start and get a short hash of the whole, so two long names stay distinct)."""
    clean = re.sub(r"[^a-z0-9-]+", "-", job_name.lower()).strip("-")
    clean = re.sub(r"-{2,}", "-", clean)
    if not clean or not clean[0].isalpha():
        clean = f"edl-{clean}".rstrip("-")
    if len(clean) > _MAX_PREFIX:
        digest = hashlib.sha256(job_name.encode()).hexdigest()[:8]
        clean = f"{clean[: _MAX_PREFIX - 9].rstrip('-')}-{digest}"
    return clean


def config_map_name(prefix: str) -> str:
    return f"{prefix}-config"


def secret_name(prefix: str) -> str:
    return f"{prefix}-auth"


def ps_service_name(prefix: str, ps_id: int) -> str:
    return f"{prefix}-ps-{ps_id}"


def ps_pod_name(prefix: str, ps_id: int, generation: int = 0) -> str:
    """The first PS pod is `<job>-ps-<i>`; its relaunches `<job>-ps-<i>-r<n>`."""
    base = f"{prefix}-ps-{ps_id}"
    return base if generation == 0 else f"{base}-r{generation}"


def worker_pod_name(prefix: str, worker_id: int) -> str:
    return f"{prefix}-worker-{worker_id}"


def job_selector(prefix: str) -> str:
    """The label selector of every object of the job."""
    return f"{LABEL_JOB}={prefix}"


def replica_labels(prefix: str, role: str, index: int) -> dict[str, str]:
    return {LABEL_JOB: prefix, LABEL_TYPE: role, LABEL_INDEX: str(index)}


# -- flag parsers -----------------------------------------------------------------------------

_QUANTITY = re.compile(r"^[+]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_RESOURCE_KEYS = {
    "cpu": "cpu",
    "memory": "memory",
    "gpu": GPU_RESOURCE,
    "ephemeral-storage": "ephemeral-storage",
    "ephemeral_storage": "ephemeral-storage",
}
_EXTENDED = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$")


def _quantity_value(text: str) -> Fraction:
    """A Kubernetes quantity as an exact number (for comparing request and limit)."""
    match = _QUANTITY.match(text)
    assert match is not None
    number, _, suffix = match.groups()
    value = Fraction(number)
    suffix = suffix or ""
    binary = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
    decimal = {"m": -1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
    if suffix in binary:
        return value * 1024 ** binary[suffix]
    if suffix in decimal:
        return value * Fraction(1000) ** decimal[suffix]
    if suffix:
        return value * Fraction(10) ** int(suffix[1:])
    return value


def parse_resources(text: str, flag: str = "--worker_resource_request") -> dict[str, str]:
    """`cpu=1,memory=4096Mi,gpu=1` -> `{"cpu": "1", "memory": "4096Mi", "nvidia.com/gpu": "1"}`.

    Keys: cpu, memory, gpu (nvidia.com/gpu), ephemeral-storage, or an extended resource name
    such as amd.com/gpu. Values are Kubernetes quantities; memory and ephemeral-storage need a
    unit (4096Mi, 4Gi, 4G: a bare 4096 would be 4096 bytes); a GPU count is a whole number.
    "" -> {}."""
    out: dict[str, str] = {}
    form = "expected KEY=QUANTITY[,...], e.g. cpu=1,memory=4096Mi,gpu=1"
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not key or not value:
            raise ManifestError(f"{flag} {text!r}: {item!r} is not KEY=QUANTITY; {form}")
        name = _RESOURCE_KEYS.get(key.lower())
        if name is None:
            if not _EXTENDED.match(key):
                raise ManifestError(
                    f"{flag} {text!r}: unknown resource {key!r}; use cpu, memory, gpu, "
                    "ephemeral-storage or an extended resource like amd.com/gpu"
                )
            name = key
        if name in out:
            raise ManifestError(f"{flag} {text!r}: {key!r} is given twice")
        if not _QUANTITY.match(value):
            raise ManifestError(
                f"{flag} {text!r}: {key}={value!r} is not a Kubernetes quantity "
                "(e.g. 1, 500m, 4096Mi, 4Gi)"
            )
        if name in ("memory", "ephemeral-storage") and value[-1].isdigit() and "e" not in value:
            raise ManifestError(
                f"{flag} {text!r}: {key}={value} has no unit and would mean {value} bytes; "
                f"write e.g. {key}={value}Mi"
            )
        if (name == GPU_RESOURCE or "/" in name) and not value.isdigit():
            raise ManifestError(f"{flag} {text!r}: {key}={value} must be a whole number")
        if _quantity_value(value) <= 0:
            raise ManifestError(f"{flag} {text!r}: {key}={value} must be positive")
        out[name] = value
    return out


@dataclass(frozen=True)
class Resources:
    """Requests and limits of one role's container."""

    requests: Mapping[str, str] = field(default_factory=dict)
    limits: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if self.requests:
            out["requests"] = dict(self.requests)
        if self.limits:
            out["limits"] = dict(self.limits)
        return out


def resources(request: str, limit: str = "", role: str = "worker") -> Resources:
    """Requests from `--<role>_resource_request`, limits from `--<role>_resource_limit`.

    Without a limit the limits equal the requests (Guaranteed QoS: the pod is the last one
    the kubelet evicts). A limit below its request, or a GPU whose limit and request differ
    (Kubernetes requires them equal), is an error."""
    requests = parse_resources(request, f"--{role}_resource_request")
    limits = parse_resources(limit, f"--{role}_resource_limit") if limit else dict(requests)
    for name, value in requests.items():
        if name in limits and _quantity_value(limits[name]) < _quantity_value(value):
            raise ManifestError(
                f"--{role}_resource_limit {limit!r}: {name}={limits[name]} is below its "
                f"request {value}"
            )
    for name in {*requests, *limits}:
        if (name == GPU_RESOURCE or "/" in name) and name in requests and name in limits:
            if requests[name] != limits[name]:
                raise ManifestError(
                    f"--{role}_resource_limit {limit!r}: {name} must equal its request "
                    f"({requests[name]}): extended resources cannot be overcommitted"
                )
        if (name == GPU_RESOURCE or "/" in name) and name not in limits:
            limits[name] = requests[name]
    return Resources(requests, limits)


@dataclass(frozen=True)
class WorkerPriority:
    """`--worker_pod_priority`: `high_share` of the workers get `high_class`, the rest
    `low_class` ("" = no priorityClassName: the cluster's default)."""

    high_class: str = ""
    high_share: Fraction = Fraction(0)
    low_class: str = ""

    def for_worker(self, worker_id: int) -> str:
        """The priority class of worker `worker_id`.

        Worker i is high when ceil((i+1)*share) > ceil(i*share): among workers 0..n-1 exactly
        ceil(n*share) are high, spread evenly, and relaunches (new ids) keep the share."""
        share = self.high_share
        if share <= 0:
            return self.low_class
        if share >= 1:
            return self.high_class
        high = math.ceil((worker_id + 1) * share) > math.ceil(worker_id * share)
        return self.high_class if high else self.low_class


_CLASS = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def parse_worker_priority(text: str) -> WorkerPriority:
    """`--worker_pod_priority`: "" (none), `CLASS` (every worker), or `CLASS=SHARE[,REST]`:
    a share in [0, 1] of the workers get CLASS, the others REST (default `low`), e.g.
    `high=0.5` (the PriorityClasses `high` and `low` must exist in the cluster)."""
    flag = "--worker_pod_priority"
    text = text.strip()
    if not text:
        return WorkerPriority()
    head, _, rest = (s.strip() for s in text.partition(","))
    name, sep, share_text = (s.strip() for s in head.partition("="))
    if not sep:
        if rest or not _CLASS.match(name):
            raise ManifestError(f"{flag} {text!r}: expected CLASS or CLASS=SHARE[,REST_CLASS]")
        return WorkerPriority(name, Fraction(1))
    try:
        share = Fraction(share_text)
    except ValueError:
        share = Fraction(-1)
    if not 0 <= share <= 1:
        raise ManifestError(
            f"{flag} {text!r}: {share_text!r} is not a share between 0 and 1 (e.g. high=0.5)"
        )
    low = rest or "low"
    for cls in (name, low):
        if not _CLASS.match(cls):
            raise ManifestError(f"{flag} {text!r}: {cls!r} is not a PriorityClass name")
    return WorkerPriority(name, share, low)


def _pairs(text: str, flag: str, form: str) -> list[tuple[str, str]]:
    out = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not key:
            raise ManifestError(f"{flag} {text!r}: {item!r} is not KEY=VALUE; expected {form}")
        out.append((key, value))
    return out


_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def parse_node_selector(text: str) -> dict[str, str]:
    """`--node_selector "cloud.google.com/gke-nodepool=ml,disk=ssd"` -> a nodeSelector."""
    flag = "--node_selector"
    out = {}
    for key, value in _pairs(text, flag, "KEY=VALUE[,...]"):
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            raise ManifestError(f"{flag} {text!r}: {key}={value} is not a valid label")
        out[key] = value
    return out


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_tolerations(text: str) -> list[dict[str, str]]:
    """`--tolerations "dedicated=ml:NoSchedule;nvidia.com/gpu:NoSchedule"`: `KEY=VALUE:EFFECT`
    tolerates that taint (operator Equal), `KEY:EFFECT` any value of it (Exists); the effect
    may be left out (every effect)."""
    flag = "--tolerations"
    out = []
    for item in (p.strip() for p in text.split(";")):
        if not item:
            continue
        body, _, effect = item.rpartition(":") if ":" in item else (item, "", "")
        key, sep, value = body.partition("=")
        bad_value = bool(sep) and not _LABEL_VALUE.match(value)
        if not key or not _LABEL_KEY.match(key) or bad_value or (effect and effect not in _EFFECTS):
            raise ManifestError(
                f"{flag} {text!r}: {item!r}: expected KEY[=VALUE][:EFFECT] with EFFECT one of "
                f"{', '.join(_EFFECTS)}, items separated by ';'"
            )
        toleration = {"key": key, "operator": "Equal" if sep else "Exists"}
        if sep:
            toleration["value"] = value
        if effect:
            toleration["effect"] = effect
        out.append(toleration)
    return out


def parse_image_pull_secrets(text: str) -> list[str]:
    """`--image_pull_secrets "regcred,other"` -> secret names."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if not _CLASS.match(name):
            raise ManifestError(f"--image_pull_secrets {text!r}: {name!r} is not a Secret name")
    return names


@dataclass(frozen=True)
class Volume:
    volume: Mapping[str, Any]
    mount: Mapping[str, Any]


_VOLUME_SOURCES = ("claim_name", "host_path", "config_map", "secret", "empty_dir")


def parse_volumes(text: str) -> list[Volume]:
    """`--volume "claim_name=data,mount_path=/data;host_path=/mnt/x,mount_path=/x,read_only=true"`

    One volume per ';'-separated item: a source (claim_name, host_path, config_map, secret or
    empty_dir=true), mount_path, and optionally sub_path and read_only=true|false."""
    flag = "--volume"
    out = []
    for index, item in enumerate(p.strip() for p in text.split(";")):
        if not item:
            continue
        fields = dict(_pairs(item, flag, "SOURCE=NAME,mount_path=PATH[;...]"))
        unknown = set(fields) - {*_VOLUME_SOURCES, "mount_path", "sub_path", "read_only"}
        sources = [s for s in _VOLUME_SOURCES if s in fields]
        mount_path = fields.get("mount_path", "")
        if unknown or len(sources) != 1 or not mount_path.startswith("/"):
            raise ManifestError(
                f"{flag} {text!r}: {item!r}: expected one of {', '.join(_VOLUME_SOURCES)}, an "
                "absolute mount_path, optionally sub_path and read_only"
            )
        source, value = sources[0], fields[sources[0]]
        if source in ("claim_name", "config_map", "secret") and not _CLASS.match(value):
            raise ManifestError(f"{flag} {text!r}: {source} {value!r} is not an object name")
        if source == "host_path" and not value.startswith("/"):
            raise ManifestError(f"{flag} {text!r}: host_path {value!r} is not an absolute path")
        sub_path = fields.get("sub_path", "")
        if sub_path.startswith("/") or ".." in sub_path.split("/"):
            raise ManifestError(f"{flag} {text!r}: sub_path {sub_path!r} must stay inside")
        name = f"volume-{index}"
        volume: dict[str, Any] = {"name": name}
        if source == "claim_name":
            volume["persistentVolumeClaim"] = {"claimName": value}
        elif source == "host_path":
            volume["hostPath"] = {"path": value}
        elif source == "config_map":
            volume["configMap"] = {"name": value}
        elif source == "secret":
            volume["secret"] = {"secretName": value}
        else:
            volume["emptyDir"] = {}
        mount: dict[str, Any] = {"name": name, "mountPath": mount_path}
        if fields.get("sub_path"):
            mount["subPath"] = fields["sub_path"]
        read_only = fields.get("read_only", "false").lower()
        if read_only not in ("true", "false"):
            raise ManifestError(f"{flag} {text!r}: read_only must be true or false")
        if read_only == "true":
            mount["readOnly"] = True
        out.append(Volume(volume, mount))
    return out


# -- the job's shared settings ---------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    """The master pod, which every object of the job belongs to."""

    name: str
    uid: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Owner | None:
        """From the downward API variables MY_POD_NAME and MY_POD_UID; None if unset."""
        name, uid = env.get("MY_POD_NAME", ""), env.get("MY_POD_UID", "")
        return cls(name, uid) if name and uid else None

    def reference(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "name": self.name, "uid": self.uid}


@dataclass(frozen=True)
class ClusterSpec:
    """Everything the job's pods share. `job_name` is sanitised by `name_prefix`."""

    job_name: str
    image: str
    master_addr: str
    namespace: str = "default"
    owner: Owner | None = None
    python: str = "python"
    """argv[0] in the containers: the image's Python with elasticdl installed."""
    image_pull_policy: str = "IfNotPresent"
    worker_resources: Resources = Resources()
    ps_resources: Resources = Resources()
    worker_priority: WorkerPriority = WorkerPriority()
    ps_priority_class: str = ""
    volumes: tuple[Volume, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, str], ...] = ()
    image_pull_secrets: tuple[str, ...] = ()
    service_account: str = ""
    termination_grace_s: int = DEFAULT_GRACE_S
    ps_port: int = PS_PORT
    tls_secret: str = ""
    """A kubernetes.io/tls Secret projected into every pod (empty: no TLS)."""
    env: Mapping[str, str] = field(default_factory=dict)
    log_level: str = ""

    @property
    def prefix(self) -> str:
        return name_prefix(self.job_name)

    def ps_address(self, ps_id: int) -> str:
        """The stable address of PS `ps_id` (its Service's DNS name and port)."""
        return f"{ps_service_name(self.prefix, ps_id)}.{self.namespace}.svc:{self.ps_port}"


def _metadata(
    spec: ClusterSpec, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": spec.namespace, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    if spec.owner is not None:
        meta["ownerReferences"] = [spec.owner.reference()]
    return meta


def config_for_pods(spec: ClusterSpec, config_json: str) -> str:
    """job.json as the pods read it: with a TLS Secret, its `tls_dir` names the Secret's files
    in the pods (`tls/` beside job.json) instead of the master's copy. A master with TLS files
    but no Secret is refused: its pods could not read them."""
    import json

    settings = json.loads(config_json)
    if spec.tls_secret:
        return json.dumps({**settings, "tls_dir": TLS_SUBDIR}, indent=2, sort_keys=True)
    if settings.get("tls_dir"):
        raise ManifestError(
            "TLS on Kubernetes comes from a Secret: give --tls true (and --tls_secret NAME, a "
            "kubernetes.io/tls Secret); --tls_dir is for the local engine"
        )
    return config_json


def config_map(
    spec: ClusterSpec, config_json: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """The ConfigMap holding job.json (a ConfigMap holds at most 1 MiB)."""
    if len(config_json.encode()) > 1_000_000:
        raise ManifestError("the job config is larger than a ConfigMap can hold (1 MiB)")
    name = config_map_name(spec.prefix)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(spec, name, {LABEL_JOB: spec.prefix}, annotations),
        "data": {CONFIG_FILE: config_json},
    }


def job_secret(spec: ClusterSpec, secret: str) -> dict[str, Any]:
    """The Secret holding the job's secret (runtime/auth.py), owned like every other object."""
    import base64

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(spec, secret_name(spec.prefix), {LABEL_JOB: spec.prefix}),
        "data": {SECRET_KEY: base64.b64encode(secret.encode()).decode()},
    }


ARGO_WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
"""The label Argo puts on a workflow's pods, valued with the workflow's name."""
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def network_policy_name(prefix: str) -> str:
    return f"{prefix}-peers"


def job_network_policy(spec: ClusterSpec) -> dict[str, Any]:
    """Ingress to this job's pods only from this job's pods and its master.

    With the deny-all policy of `elasticdl render install` (workflows/network_policy.py), what
    this admits is all the job's pods accept: workers and parameter servers of the same job,
    and the master's pod -- on Argo the step's pod, which Argo labels with the workflow's name,
    the job's name there. Another job's pods in the same namespace are refused at the network
    (and still by the per-job secret)."""
    peers: list[dict[str, Any]] = [{"podSelector": {"matchLabels": {LABEL_JOB: spec.prefix}}}]
    if _LABEL_VALUE.match(spec.job_name):
        peers.append({"podSelector": {"matchLabels": {ARGO_WORKFLOW_LABEL: spec.job_name}}})
    name = network_policy_name(spec.prefix)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(spec, name, {LABEL_JOB: spec.prefix}),
        "spec": {
            "podSelector": {"matchLabels": {LABEL_JOB: spec.prefix}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers}],
        },
    }


def ps_service(spec: ClusterSpec, ps_id: int) -> dict[str, Any]:
    """The ClusterIP Service that gives PS `ps_id` a stable address across relaunches."""
    labels = replica_labels(spec.prefix, "ps", ps_id)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, ps_service_name(spec.prefix, ps_id), labels),
        "spec": {
            "type": "ClusterIP",
            "selector": labels,
            "ports": [
                {
                    "name": "grpc",
                    "port": spec.ps_port,
                    "targetPort": spec.ps_port,
                    "protocol": "TCP",
                }
            ],
        },
    }


def _env(spec: ClusterSpec, role: str, index: int) -> list[dict[str, Any]]:
    fixed = {
        **TMP_ENV,
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": tf_quiet.DEFAULT_LEVEL,
        "ELASTICDL_JOB_NAME": spec.job_name,
        "ELASTICDL_MASTER_ADDR": spec.master_addr,
        "ELASTICDL_REPLICA_TYPE": role,
        "ELASTICDL_REPLICA_INDEX": str(index),
    }
    env: list[dict[str, Any]] = [
        {"name": k, "value": v} for k, v in {**fixed, **dict(spec.env)}.items()
    ]
    for name, path in (("MY_POD_NAME", "metadata.name"), ("MY_POD_IP", "status.podIP")):
        env.append({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}})
    return env


def _config_sources(spec: ClusterSpec) -> list[dict[str, Any]]:
    """job.json from the ConfigMap and, beside it, job.secret from the job's Secret; with TLS,
    the TLS Secret's certificate and key (and its ca.crt, when it has one) in `tls/`."""
    secret = {"name": secret_name(spec.prefix), "items": [{"key": SECRET_KEY, "path": SECRET_KEY}]}
    sources: list[dict[str, Any]] = [
        {"configMap": {"name": config_map_name(spec.prefix)}},
        {"secret": secret},
    ]
    if spec.tls_secret:
        tls = [{"key": k, "path": f"{TLS_SUBDIR}/{k}"} for k in TLS_KEYS]
        ca = [{"key": "ca.crt", "path": f"{TLS_SUBDIR}/ca.crt"}]
        sources.append({"secret": {"name": spec.tls_secret, "items": tls}})
        sources.append({"secret": {"name": spec.tls_secret, "items": ca, "optional": True}})
    return sources


def pod_security_context() -> dict[str, Any]:
    """The pod-level half of Pod Security "restricted": no container runs as root (Argo's own
    containers in a step's pod keep their image's user), seccomp RuntimeDefault."""
    return {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context() -> dict[str, Any]:
    """The container-level half: the runtime image's user, no privilege escalation, every
    capability dropped, a read-only root filesystem (writes go to the /tmp emptyDir)."""
    return {
        "runAsUser": RUNTIME_UID,
        "runAsGroup": RUNTIME_GID,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }


def writable_tmp() -> tuple[dict[str, Any], dict[str, Any]]:
    """(volume, mount) of the /tmp emptyDir a read-only root filesystem needs: `tempfile`,
    Keras' config directory and a git zoo's cache (under HOME: `TMP_ENV`) write there."""
    return {"name": TMP_VOLUME, "emptyDir": {}}, {"name": TMP_VOLUME, "mountPath": TMP_DIR}


def _pod(
    spec: ClusterSpec,
    role: str,
    index: int,
    name: str,
    argv: list[str],
    launch_id: str,
    res: Resources,
    priority_class: str,
    ports: list[dict[str, Any]],
) -> dict[str, Any]:
    # A --volume mounted at /tmp takes the place of the emptyDir.
    own_tmp = not any(v.mount.get("mountPath") == TMP_DIR for v in spec.volumes)
    tmp_volume, tmp_mount = writable_tmp()
    mounts: list[dict[str, Any]] = [
        {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True},
        *([tmp_mount] if own_tmp else []),
        *(dict(v.mount) for v in spec.volumes),
    ]
    volumes: list[dict[str, Any]] = [
        {"name": CONFIG_VOLUME, "projected": {"sources": _config_sources(spec)}},
        *([tmp_volume] if own_tmp else []),
        *(dict(v.volume) for v in spec.volumes),
    ]
    container: dict[str, Any] = {
        "name": role,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": argv,
        "env": _env(spec, role, index),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": mounts,
        "securityContext": container_security_context(),
    }
    if res.requests or res.limits:
        container["resources"] = res.as_json()
    if ports:
        container["ports"] = ports
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": spec.termination_grace_s,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security_context(),
        "containers": [container],
        "volumes": volumes,
    }
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in spec.tolerations]
    if spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in spec.image_pull_secrets]
    if spec.service_account:
        pod_spec["serviceAccountName"] = spec.service_account
    labels = replica_labels(spec.prefix, role, index)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _metadata(spec, name, labels, {ANNOTATION_LAUNCH: launch_id}),
        "spec": pod_spec,
    }


def _log_args(spec: ClusterSpec) -> list[str]:
    return ["--log_level", spec.log_level] if spec.log_level else []


def ps_argv(spec: ClusterSpec, ps_id: int) -> list[str]:
    """The PS command: the local process's argv, listening on every interface of the pod."""
    return [
        spec.python,
        "-P",
        "-m",
        "elasticdl.runtime.ps.main",
        "--config",
        CONFIG_PATH,
        "--ps_id",
        str(ps_id),
        "--port",
        str(spec.ps_port),
        "--host",
        "0.0.0.0",  # noqa: S104 - inside the pod; reached through the Service
        *_log_args(spec),
    ]


def worker_argv(spec: ClusterSpec, worker_id: int, ps_addrs: Sequence[str]) -> list[str]:
    """The worker command, as `LocalInstanceManager` runs it."""
    return [
        spec.python,
        "-P",
        "-m",
        "elasticdl.runtime.worker.main",
        "--config",
        CONFIG_PATH,
        "--worker_id",
        str(worker_id),
        "--master_addr",
        spec.master_addr,
        "--ps_addrs",
        ",".join(ps_addrs),
        *_log_args(spec),
    ]


def ps_pod(spec: ClusterSpec, ps_id: int, generation: int, launch_id: str) -> dict[str, Any]:
    """Pod `generation` (0 first, then relaunches) of parameter server `ps_id`."""
    return _pod(
        spec,
        "ps",
        ps_id,
        ps_pod_name(spec.prefix, ps_id, generation),
        ps_argv(spec, ps_id),
        launch_id,
        spec.ps_resources,
        spec.ps_priority_class,
        [{"name": "grpc", "containerPort": spec.ps_port, "protocol": "TCP"}],
    )


def worker_pod(
    spec: ClusterSpec, worker_id: int, ps_addrs: Sequence[str], launch_id: str
) -> dict[str, Any]:
    """The pod of worker `worker_id`, with its priority class from `--worker_pod_priority`."""
    return _pod(
        spec,
        "worker",
        worker_id,
        worker_pod_name(spec.prefix, worker_id),
        worker_argv(spec, worker_id, ps_addrs),
        launch_id,
        spec.worker_resources,
        spec.worker_priority.for_worker(worker_id),
        [],
    )
