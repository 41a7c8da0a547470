"""The Kubernetes flags of a job's master, and building its `KubernetesInstanceManager`.

    add_arguments(parser)                          # the flags below, in their own group
    options = KubernetesOptions.from_namespace(args)
    spec = options.cluster_spec(job_name, master_addr)   # ManifestError: one line, up front
    manager = make_instance_manager(options, config_path, master_addr)
    factory = instance_manager_factory(options)   # all checked up front; for TrainingJob
    check_reachable_from_pods("--output", url, options.volume, writable=True)  # or InferenceJob

Flags: --pod_image (default: the master pod's own image), --pod_namespace (default: the master
pod's namespace), --worker_resource_request / --worker_resource_limit /
--ps_resource_request / --ps_resource_limit (`cpu=1,memory=4096Mi[,gpu=1]`; limits default to
the requests), --worker_pod_priority (`high=0.5`), --ps_pod_priority, --volume, --node_selector,
--tolerations, --image_pull_secrets, --image_pull_policy, --pod_service_account,
--termination_grace_period (seconds, default 60), --ps_port (default 2222), --tls with
--tls_secret (a kubernetes.io/tls Secret the master's step mounts and every pod projects).
"""

from __future__ import annotations

import argparse
import os
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elasticdl.runtime.job_config import host_port
from elasticdl.runtime.job_options import ARGO_ONLY, NOWHERE, STEP, Option, options_class
from elasticdl.runtime.job_options import add_arguments as add_options
from elasticdl.runtime.k8s import manifests as m

if TYPE_CHECKING:
    from elasticdl.runtime.master.instances import InstanceManager

DEFAULT_WORKER_REQUEST = "cpu=1,memory=4096Mi"
DEFAULT_PS_REQUEST = "cpu=1,memory=4096Mi"


_GROUP = "kubernetes (--instance_manager kubernetes)"
_RESOURCES = "cpu=1,memory=4096Mi[,gpu=1][,ephemeral-storage=10Gi]"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _parsed(parse: Callable[[str], object]) -> Callable[[str], object]:
    """A check of a flag's text by the parser the job uses (ManifestError names the flag)."""

    def check(value: str) -> object:
        return parse(value) if value.strip() else None

    return check


def _name_check(flag_name: str, what: str) -> Callable[[str], object]:
    def check(value: str) -> None:
        if value and not _DNS_SUBDOMAIN.match(value):
            raise ValueError(
                f"--{flag_name} {value!r}: not a {what} name (lowercase letters, digits, "
                "'-' and '.')"
            )

    return check


def _k8s(name: str, help: str, **kwargs: Any) -> Option:
    """A flag of the job step, and (unless `engines` says otherwise) an Argo-only pipeline
    parameter: only a master in a pod creates pods."""
    kwargs.setdefault("engines", ARGO_ONLY)
    return Option(name, help, group=_GROUP, takes=frozenset({STEP}), **kwargs)


def _resources(role: str, pods: str, request: str) -> tuple[Option, ...]:
    return (
        _k8s(
            f"{role}_resource_request",
            f"Resources {pods} requests: {_RESOURCES}",
            default=request,
            validate=_parsed(lambda v: m.parse_resources(v, f"--{role}_resource_request")),
        ),
        _k8s(
            f"{role}_resource_limit",
            f"Resource limits of {pods}, the same form; empty: the requests",
            validate=_parsed(lambda v: m.parse_resources(v, f"--{role}_resource_limit")),
        ),
    )


KUBERNETES: tuple[Option, ...] = (
    _k8s("pod_image", "PS and worker image (default: the master pod's)", engines=NOWHERE),
    _k8s("pod_namespace", "default: the master pod's", engines=NOWHERE),
    *_resources("worker", "each worker pod", DEFAULT_WORKER_REQUEST),
    *_resources("ps", "each parameter-server pod", DEFAULT_PS_REQUEST),
    _k8s(
        "worker_pod_priority",
        "PriorityClass of the worker pods: CLASS, or CLASS=SHARE[,REST] (high=0.5: half the "
        "workers high, the rest low); empty: the cluster's default",
        validate=_parsed(m.parse_worker_priority),
    ),
    _k8s(
        "ps_pod_priority",
        "PriorityClass of the parameter-server pods; empty: the cluster's default",
        validate=_name_check("ps_pod_priority", "PriorityClass"),
    ),
    _k8s(
        "node_selector",
        "Node labels the job's pods need: KEY=VALUE[,...], e.g. cloud.google.com/gke-nodepool=ml",
        validate=_parsed(m.parse_node_selector),
    ),
    _k8s(
        "tolerations",
        "Taints the job's pods tolerate: KEY[=VALUE][:EFFECT][;...], e.g. "
        "nvidia.com/gpu:NoSchedule",
        validate=_parsed(m.parse_tolerations),
    ),
    _k8s(
        "volume",
        "Volumes mounted in the job's pods: claim_name=C,mount_path=/p[;host_path=/h,"
        "mount_path=/q,read_only=true;...] (also config_map, secret, empty_dir=true)",
        validate=_parsed(m.parse_volumes),
    ),
    _k8s(
        "image_pull_secrets",
        "Secrets for pulling the job image in the job's pods, comma-separated",
        validate=_parsed(m.parse_image_pull_secrets),
    ),
    _k8s(
        "image_pull_policy",
        "imagePullPolicy of the job's pods",
        default="IfNotPresent",
        choices=("IfNotPresent", "Always", "Never"),
    ),
    _k8s(
        "pod_service_account",
        "ServiceAccount of the job's pods (e.g. one with access to the data); empty: the "
        "namespace's default (the pods need no Kubernetes API access)",
        validate=_name_check("pod_service_account", "ServiceAccount"),
    ),
    _k8s(
        "termination_grace_period",
        "Seconds a pod the master stops gets to finish (a worker, its minibatch) before it is "
        "killed",
        type=int,
        default=m.DEFAULT_GRACE_S,
        minimum=0,
        maximum=3600,
    ),
    _k8s("ps_port", "the PS gRPC port", type=int, default=m.PS_PORT, engines=NOWHERE),
    _k8s(
        "tls",
        "TLS on the job's channels with the certificate of --tls_secret (false: the job's "
        "secret only)",
        type=bool,
        default=False,
    ),
    _k8s(
        "tls_secret",
        "The kubernetes.io/tls Secret for --tls (tls.crt, tls.key[, ca.crt]; the certificate "
        "names the DNS name `elasticdl`)",
        default="elasticdl-tls",
        validate=_name_check("tls_secret", "Secret"),
    ),
)
"""The Kubernetes flags of a job step's master, declared once: the step's flags, the fields of
`KubernetesOptions`, and the Argo-only pipeline parameters (`engines`) with their checks."""


@options_class(KUBERNETES, surface=STEP, frozen=True)
class KubernetesOptions:
    """The flags as given (strings); `cluster_spec` parses and checks them."""

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> KubernetesOptions:
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)})

    def cluster_spec(
        self,
        job_name: str,
        master_addr: str,
        image: str = "",
        namespace: str = "",
        env: Mapping[str, str] | None = None,
    ) -> m.ClusterSpec:
        """The job's `ClusterSpec`; ManifestError (one line) for a bad flag. `image` and
        `namespace` fill in --pod_image / --pod_namespace when those are empty."""
        env = os.environ if env is None else env
        image = self.pod_image or image
        if not image:
            raise m.ManifestError("--pod_image: no image for the PS and worker pods; give one")
        if self.image_pull_policy not in ("Always", "IfNotPresent", "Never"):
            raise m.ManifestError(
                f"--image_pull_policy {self.image_pull_policy!r}: Always, IfNotPresent or Never"
            )
        if not 0 <= self.termination_grace_period <= 3600:
            raise m.ManifestError("--termination_grace_period: seconds between 0 and 3600")
        if not 0 < self.ps_port < 65536:
            raise m.ManifestError(f"--ps_port {self.ps_port}: a port between 1 and 65535")
        ps_priority = self.ps_pod_priority.strip()
        if ps_priority and "=" in ps_priority:
            raise m.ManifestError(f"--ps_pod_priority {ps_priority!r}: one PriorityClass name")
        return m.ClusterSpec(
            job_name=job_name,
            image=image,
            master_addr=master_addr,
            namespace=self.pod_namespace or namespace or "default",
            owner=m.Owner.from_env(env),
            image_pull_policy=self.image_pull_policy,
            worker_resources=m.resources(
                self.worker_resource_request, self.worker_resource_limit, "worker"
            ),
            ps_resources=m.resources(self.ps_resource_request, self.ps_resource_limit, "ps"),
            worker_priority=m.parse_worker_priority(self.worker_pod_priority),
            ps_priority_class=m.parse_worker_priority(ps_priority).high_class,
            volumes=tuple(m.parse_volumes(self.volume)),
            node_selector=m.parse_node_selector(self.node_selector),
            tolerations=tuple(m.parse_tolerations(self.tolerations)),
            image_pull_secrets=tuple(m.parse_image_pull_secrets(self.image_pull_secrets)),
            service_account=self.pod_service_account,
            termination_grace_s=self.termination_grace_period,
            ps_port=self.ps_port,
            tls_secret=self.tls_secret if self.tls else "",
        )

    def master_tls_dir(self) -> str:
        """With --tls, where this master (in its pod) reads the TLS Secret the pipeline step
        mounts (`m.TLS_MOUNT`); "" without. ManifestError (one line) when it is not there."""
        if not self.tls:
            return ""
        missing = [k for k in m.TLS_KEYS if not (Path(m.TLS_MOUNT) / k).is_file()]
        if missing:
            raise m.ManifestError(
                f"--tls: the Secret {self.tls_secret!r} is not mounted at {m.TLS_MOUNT} (no "
                f"{', '.join(missing)}); create it in the job's namespace with `kubectl create "
                f"secret tls {self.tls_secret} --cert=CERT --key=KEY`"
            )
        return m.TLS_MOUNT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the Kubernetes flags (used with --instance_manager kubernetes)."""
    add_options(parser, KUBERNETES, STEP)


def master_address(port: int, env: Mapping[str, str] | None = None) -> str:
    """How the pods reach the master: the master pod's IP (downward API MY_POD_IP)."""
    env = os.environ if env is None else env
    ip = env.get("MY_POD_IP", "")
    if not ip:
        raise m.ManifestError(
            "--instance_manager kubernetes: MY_POD_IP is not set; the master pod needs it "
            "from the downward API (fieldRef status.podIP) so its pods can reach it"
        )
    return host_port(ip, port)


def own_pod_image(api_client: Any, namespace: str, env: Mapping[str, str] | None = None) -> str:
    """The master pod's own image (MY_POD_NAME; on Argo the `main` container's, not the
    `wait` sidecar's), "" when it cannot be read."""
    from kubernetes import client

    env = os.environ if env is None else env
    name = env.get("MY_POD_NAME", "")
    if not name:
        return ""
    try:
        containers = (
            client.CoreV1Api(api_client).read_namespaced_pod(name, namespace).spec.containers
        )
    except Exception:  # noqa: BLE001 - the default only; --pod_image can say it
        return ""
    # On Argo the pod also runs Argo's `wait` sidecar: the step's container is `main`.
    wanted = env.get("ARGO_CONTAINER_NAME", "main")
    mine = [c for c in containers if c.name == wanted] or containers[:1]
    return str(mine[0].image or "") if mine else ""


def make_instance_manager(
    options: KubernetesOptions,
    config_path: Path,
    master_addr: str,
    job_name: str = "",
    api_client: Any | None = None,
) -> Any:
    """A `KubernetesInstanceManager` for the job whose config the master wrote at
    `config_path` (the job name defaults to the config's), through the in-cluster config,
    else kubeconfig. Fits `TrainingJob`'s `(config_path, master_addr, log_dir)` factory:
    `lambda path, addr, _: make_instance_manager(options, path, addr)`."""
    import json

    from elasticdl.runtime import auth
    from elasticdl.runtime.k8s.manager import (
        KubernetesInstanceManager,
        current_namespace,
        load_api_client,
    )

    config_json = Path(config_path).read_text()
    job_name = job_name or str(json.loads(config_json)["job_name"])
    api_client = api_client or load_api_client()
    namespace = options.pod_namespace or current_namespace()
    image = options.pod_image or own_pod_image(api_client, namespace)
    spec = options.cluster_spec(job_name, master_addr, image=image, namespace=namespace)
    settings = json.loads(config_json)
    credentials = auth.for_process(config_path, settings.get("secret_file", ""))
    secret = credentials.secret if credentials is not None else ""
    return KubernetesInstanceManager(spec, config_json, api_client=api_client, job_secret=secret)


ManagerFactory = Callable[[Path, str, Path], "InstanceManager"]


def instance_manager_factory(
    options: KubernetesOptions, env: Mapping[str, str] | None = None
) -> ManagerFactory:
    """Check what a master on Kubernetes needs before anything starts (MY_POD_IP from the
    downward API, every Kubernetes flag: ManifestError, one line), then the factory that
    `TrainingJob` and `InferenceJob` take: it makes a `KubernetesInstanceManager`.

    Without --pod_image the pods run the master pod's own image, read through MY_POD_NAME
    (downward API): with neither, no pod could start, so that is refused here too."""
    env = os.environ if env is None else env
    master_address(0, env)
    options.cluster_spec("check", "127.0.0.1:0", image="check", namespace="check", env=env)
    if not options.pod_image and not env.get("MY_POD_NAME"):
        raise m.ManifestError(
            "--pod_image: no image for the worker pods, and MY_POD_NAME is not set to read the "
            "master pod's own; give --pod_image (an image with elasticdl installed)"
        )
    return lambda path, addr, _: make_instance_manager(options, path, addr)


_SHARED_SOURCES = ("persistentVolumeClaim", "hostPath")


def check_reachable_from_pods(flag: str, url: str, volume: str, writable: bool = False) -> None:
    """ValueError (one line) unless every pod can reach `url`: a URL of a store other than
    this process's memory, or a local path under the mount_path of a shared `--volume` (a
    claim or a hostPath, writable when `writable`). A path outside every such volume would be
    the pod's own disk: written there, the data vanishes with the pod."""
    import fsspec

    protocol, path = fsspec.core.split_protocol(url)
    if protocol == "memory":
        raise ValueError(
            f"{flag} {url!r}: memory:// lives in the master's memory, out of the worker pods' "
            "reach with --instance_manager kubernetes; use an object store URL (gs://...)"
        )
    if not url or protocol not in (None, "file", "local"):
        return
    local = posixpath.normpath(os.path.abspath(path))
    mounts = [
        (v.mount["mountPath"].rstrip("/") or "/", bool(v.mount.get("readOnly")))
        for v in m.parse_volumes(volume)
        if any(source in v.volume for source in _SHARED_SOURCES)
    ]
    for mount, read_only in sorted(mounts, key=lambda item: -len(item[0])):  # innermost first
        if local != mount and not local.startswith(mount.rstrip("/") + "/"):
            continue
        if writable and read_only:
            raise ValueError(
                f"{flag} {url!r} lies on the read-only --volume mounted at {mount}; the "
                "pods write there: mount it read_only=false"
            )
        if writable and local == mount:
            raise ValueError(
                f"{flag} {url!r} is the --volume mount_path itself; give a new directory "
                f"inside it (e.g. {mount.rstrip('/')}/out): the job stages what it writes "
                "beside it"
            )
        return
    mounted = f"mounted: {', '.join(p for p, _ in mounts)}" if mounts else "none is mounted"
    raise ValueError(
        f"{flag} {url!r}: the worker pods cannot reach a local path outside every shared "
        f"--volume ({mounted}) with --instance_manager kubernetes; use an object store URL "
        "(gs://...) or a path under a --volume claim_name=C,mount_path=/p that the master pod "
        "mounts at the same path"
    )
