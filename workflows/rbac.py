"""Least-privilege RBAC for the pipelines' pods, plus the optional semaphore ConfigMap.

The ServiceAccount the workflows run as may, in its own namespace only:

* pods: create, get, list, watch, delete, deletecollection, patch -- the elastic master (with
  ``--instance_manager kubernetes``) creates its worker and parameter-server pods, watches
  them, relaunches and retires them, and deletes them all at the end; the exit handler
  (`steps/cleanup.py`) lists and deletes leftovers by label;
* services, configmaps: create, get, list, watch, delete, deletecollection -- the master gives
  each parameter server a Service (a stable address) and its pods the job's config in a
  ConfigMap; the exit handler lists and deletes leftovers by label;
* secrets: create, delete, deletecollection -- the master hands its pods the job's secret
  (runtime/auth.py) in a Secret it creates and deletes; it cannot read any Secret;
* networking.k8s.io networkpolicies: create, delete, deletecollection -- the master's policy
  admitting its own pods only (workflows/network_policy.py);
* argoproj.io workflowtaskresults: create, patch -- what Argo's executor (v3.4+) needs to report
  a step's outputs.

Nothing cluster-wide, no reading secrets, no exec.
"""

from __future__ import annotations

from typing import Any

from elasticdl.workflows.argo import LABELS

ROLE_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["create", "get", "list", "watch", "delete", "deletecollection", "patch"],
    },
    {
        # The master's PS Services and its job-config ConfigMap (--instance_manager kubernetes).
        "apiGroups": [""],
        "resources": ["services", "configmaps"],
        "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"],
    },
    {
        # The job's secret (runtime/auth.py), in a Secret the master creates for its pods;
        # no get/list/watch: the master never reads a Secret back, nor anyone else's.
        "apiGroups": [""],
        "resources": ["secrets"],
        "verbs": ["create", "delete", "deletecollection"],
    },
    {
        # The job's own NetworkPolicy (runtime/k8s/manifests.job_network_policy).
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["create", "delete", "deletecollection"],
    },
    {
        "apiGroups": ["argoproj.io"],
        "resources": ["workflowtaskresults"],
        "verbs": ["create", "patch"],
    },
]


def _metadata(name: str, namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def rbac_objects(service_account: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding named `service_account`."""
    subject: dict[str, Any] = {"kind": "ServiceAccount", "name": service_account}
    if namespace:
        subject["namespace"] = namespace
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _metadata(service_account, namespace),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _metadata(service_account, namespace),
            "rules": ROLE_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(service_account, namespace),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": service_account,
            },
            "subjects": [subject],
        },
    ]


def semaphore_configmap(
    name: str, key: str, limit: int, namespace: str | None = None
) -> dict[str, Any]:
    """The ConfigMap Argo reads a semaphore's size from: at most `limit` workflows at once."""
    if limit < 1:
        raise ValueError(f"--max_concurrent_jobs must be >= 1, got {limit}")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(name, namespace),
        "data": {key: str(limit)},
    }
