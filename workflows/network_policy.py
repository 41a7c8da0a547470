"""The NetworkPolicy `elasticdl render install` adds: who may connect to a job's pods.

The parameter-server and worker pods the elastic master creates all carry the label
``elasticdl-job-name`` (runtime/k8s/manifests.py). The policy selects them and admits ingress
only from pods of the same namespace that are themselves job pods (workers pulling from and
pushing to the PS) or Argo workflow pods (the masters: the train/predict steps, labelled
``workflows.argoproj.io/workflow`` by Argo). Every other pod -- other namespaces included --
is refused at the network, where the cluster's network plugin enforces NetworkPolicies.

A static policy cannot tell one job's pods from another's (the label value differs per job);
the per-job secret on every call (runtime/auth.py) does that. The master pod is not selected:
it is reached by its workers at its pod IP and guarded by the secret alone.
"""

from __future__ import annotations

from typing import Any

from elasticdl.runtime.k8s.manifests import LABEL_JOB as JOB_LABEL
from elasticdl.workflows.argo import LABELS

POLICY_NAME = "elasticdl-job-pods"
ARGO_WORKFLOW_LABEL = "workflows.argoproj.io/workflow"


def _having(label: str) -> dict[str, Any]:
    return {"podSelector": {"matchExpressions": [{"key": label, "operator": "Exists"}]}}


def job_network_policy(namespace: str | None = None) -> dict[str, Any]:
    """Ingress to job pods only from job pods and Argo workflow pods of the namespace."""
    metadata: dict[str, Any] = {"name": POLICY_NAME, "labels": dict(LABELS)}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": _having(JOB_LABEL)["podSelector"],
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [_having(JOB_LABEL), _having(ARGO_WORKFLOW_LABEL)]}],
        },
    }
