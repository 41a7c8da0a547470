"""The NetworkPolicy of `elasticdl render install`: job pods admit only job and Argo pods."""

from __future__ import annotations

from typing import Any

import kubernetes_validate

from elasticdl.runtime.k8s import manifests as m
from elasticdl.workflows.argo import ArgoOptions
from elasticdl.workflows.network_policy import job_network_policy
from elasticdl.workflows.render import install_objects


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels, matchExpressions with Exists/DoesNotExist/In/NotIn)."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        key, op = expr["key"], expr["operator"]
        ok = {
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
            "In": labels.get(key) in expr.get("values", []),
            "NotIn": labels.get(key) not in expr.get("values", []),
        }[op]
        if not ok:
            return False
    return True


def _admitted(policy: dict[str, Any], target: dict[str, str], source: dict[str, str]) -> bool:
    """Whether `policy` lets a same-namespace pod labelled `source` reach one labelled
    `target` (a pod the policy does not select is not restricted by it)."""
    spec = policy["spec"]
    if not _selects(spec["podSelector"], target):
        return True
    return any(
        _selects(peer["podSelector"], source) and set(peer) == {"podSelector"}
        for rule in spec.get("ingress", [])
        for peer in rule.get("from", [])
    )


def test_job_pods_admit_only_job_pods_and_argo_step_pods():
    policy = job_network_policy("ml")
    assert kubernetes_validate.validate(policy, "1.33", strict=True)
    assert policy["metadata"]["namespace"] == "ml" and policy["spec"]["policyTypes"] == ["Ingress"]
    ps = m.replica_labels("train-1a2b", "ps", 0)
    worker = m.replica_labels("train-1a2b", "worker", 3)
    master = {"workflows.argoproj.io/workflow": "train-1a2b", "app": "x"}
    stranger = {"app": "curious", "team": "other"}
    assert _admitted(policy, ps, worker)
    assert _admitted(policy, worker, ps)
    assert _admitted(policy, ps, master)
    assert not _admitted(policy, ps, stranger)
    assert not _admitted(policy, worker, {})
    # no namespaceSelector or ipBlock peer: pods of other namespaces match no rule
    peers = [p for r in policy["spec"]["ingress"] for p in r["from"]]
    assert all(set(p) == {"podSelector"} for p in peers)


def test_render_install_carries_the_policy():
    kinds = [o["kind"] for o in install_objects(ArgoOptions(namespace="ml"))]
    assert kinds.count("NetworkPolicy") == 1
