"""The NetworkPolicy `elasticdl render install` adds: a job's pods admit no one by default.

The parameter-server and worker pods the elastic master creates all carry the label
``elasticdl-job-name`` (runtime/k8s/manifests.py). This policy selects them and admits no
ingress; each job's master adds a policy of its own (`manifests.job_network_policy`, created
with the job's Secret and deleted with it) that admits that job's pods and its master's pod
(Argo labels a step's pod ``workflows.argoproj.io/workflow=<workflow name>``, the job's name).
NetworkPolicies add up, so a job's pods are reachable from their own job only: other jobs'
pods, other pods of the namespace and other namespaces are refused at the network, where the
cluster's network plugin enforces NetworkPolicies.

The master pod is not selected: it is reached by its workers at its pod IP and guarded by the
per-job secret (runtime/auth.py) alone.
"""

from __future__ import annotations

from typing import Any

from elasticdl.runtime.k8s.manifests import LABEL_JOB as JOB_LABEL
from elasticdl.workflows.argo import LABELS

POLICY_NAME = "elasticdl-job-pods"


def job_network_policy(namespace: str | None = None) -> dict[str, Any]:
    """Deny ingress to every job pod of the namespace (each job's own policy admits its peers)."""
    metadata: dict[str, Any] = {"name": POLICY_NAME, "labels": dict(LABELS)}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": {"matchExpressions": [{"key": JOB_LABEL, "operator": "Exists"}]},
            "policyTypes": ["Ingress"],
            "ingress": [],
        },
    }
