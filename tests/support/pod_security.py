"""The Pod Security Standards' "restricted" profile (which includes "baseline"), as checks.

Written from the Kubernetes documentation of the Pod Security Standards (policy version
v1.33): each rule reads the fields of a pod spec that the admission controller reads, and
`restricted_violations` names every rule a pod spec breaks, one line each. An Argo template is
checked as the pod spec it becomes (`argo_pod_spec`): its pod-level `securityContext`, its main
container, its volumes; Argo's own init and wait containers take their settings from the
controller's configuration (`executor.securityContext`), not from the workflow.
"""

from __future__ import annotations

from typing import Any

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {
    None,
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
}


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        *(spec.get("initContainers") or []),
        *(spec.get("containers") or []),
        *(spec.get("ephemeralContainers") or []),
    ]


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """Every "restricted" (and "baseline") rule the pod spec `spec` breaks; [] when it passes."""
    problems: list[str] = []
    pod = spec.get("securityContext") or {}
    containers = _containers(spec)
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            problems.append(f"{field} is true")
    if (pod.get("windowsOptions") or {}).get("hostProcess"):
        problems.append("securityContext.windowsOptions.hostProcess is true")
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if "hostPath" in kinds:
            problems.append(f"volume {volume['name']} is a hostPath")
        elif not kinds <= RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']} is of a kind restricted forbids: {kinds}")
    for sysctl in pod.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            problems.append(f"sysctl {sysctl.get('name')} is not a safe one")
    if (pod.get("seLinuxOptions") or {}).get("type") not in SELINUX_TYPES:
        problems.append("securityContext.seLinuxOptions.type is not allowed")
    pod_seccomp = (pod.get("seccompProfile") or {}).get("type")
    if pod_seccomp not in (None, "RuntimeDefault", "Localhost"):
        problems.append(f"securityContext.seccompProfile.type is {pod_seccomp}")
    if pod.get("runAsUser") == 0:
        problems.append("securityContext.runAsUser is 0")
    for container in containers:
        problems += [f"container {container.get('name')}: {p}" for p in _container(container, pod)]
    if not containers:
        problems.append("no containers")
    return problems


def _container(container: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    problems = []
    context = container.get("securityContext") or {}
    if context.get("privileged"):
        problems.append("privileged")
    if (context.get("windowsOptions") or {}).get("hostProcess"):
        problems.append("windowsOptions.hostProcess is true")
    if context.get("procMount") not in (None, "Default"):
        problems.append(f"procMount is {context['procMount']}")
    if (context.get("seLinuxOptions") or {}).get("type") not in SELINUX_TYPES:
        problems.append("seLinuxOptions.type is not allowed")
    for port in container.get("ports") or []:
        if port.get("hostPort"):
            problems.append(f"hostPort {port['hostPort']}")
    if context.get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation is not false")
    non_root = context.get("runAsNonRoot", pod.get("runAsNonRoot"))
    if non_root is not True:
        problems.append("runAsNonRoot is not true (on the container or the pod)")
    if context.get("runAsUser") == 0:
        problems.append("runAsUser is 0")
    seccomp = (context.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
    if seccomp not in ("RuntimeDefault", "Localhost"):
        problems.append(f"seccompProfile is {seccomp or 'unset'} (on the container and the pod)")
    capabilities = context.get("capabilities") or {}
    if "ALL" not in (capabilities.get("drop") or []):
        problems.append("capabilities.drop lacks ALL")
    added = set(capabilities.get("add") or [])
    if added - {"NET_BIND_SERVICE"}:
        problems.append(f"capabilities.add has {sorted(added - {'NET_BIND_SERVICE'})}")
    if added - BASELINE_CAPABILITIES:
        problems.append("capabilities.add goes beyond baseline's")
    return problems


def argo_pod_spec(template: dict[str, Any], workflow_spec: dict[str, Any]) -> dict[str, Any]:
    """The parts of a step's pod that an Argo container or script template sets (the pod-level
    securityContext is the template's, else the workflow's)."""
    main = dict(template.get("container") or template.get("script") or {})
    main.setdefault("name", "main")
    return {
        "securityContext": template.get("securityContext")
        or workflow_spec.get("securityContext")
        or {},
        "initContainers": template.get("initContainers") or [],
        "containers": [main, *(template.get("sidecars") or [])],
        "volumes": template.get("volumes") or [],
    }
