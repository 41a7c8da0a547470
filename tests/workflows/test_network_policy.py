"""The NetworkPolicies of a job's pods: the install's denies all, the job's admits its peers."""

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


def _admitted(
    policies: list[dict[str, Any]], target: dict[str, str], source: dict[str, str]
) -> bool:
    """Whether same-namespace pod `source` may reach pod `target` under `policies`: a pod no
    policy selects is open; a selected one admits the union of the selecting policies' peers."""
    selecting = [p["spec"] for p in policies if _selects(p["spec"]["podSelector"], target)]
    if not selecting:
        return True
    return any(
        _selects(peer["podSelector"], source) and set(peer) == {"podSelector"}
        for spec in selecting
        for rule in spec.get("ingress", [])
        for peer in rule.get("from", [])
    )


def test_job_pods_admit_only_their_own_job_and_its_master():
    install = job_network_policy("ml")
    spec = m.ClusterSpec(job_name="train-1a2b", image="i", master_addr="10.0.0.1:1", namespace="ml")
    own = m.job_network_policy(spec)
    other = m.job_network_policy(
        m.ClusterSpec(job_name="train-9z8y", image="i", master_addr="x:1", namespace="ml")
    )
    for policy in (install, own):
        assert kubernetes_validate.validate(policy, "1.33", strict=True)
        assert policy["metadata"]["namespace"] == "ml"
        assert policy["spec"]["policyTypes"] == ["Ingress"]
    policies = [install, own, other]
    ps = m.replica_labels("train-1a2b", "ps", 0)
    worker = m.replica_labels("train-1a2b", "worker", 3)
    master = {"workflows.argoproj.io/workflow": "train-1a2b", "app": "x"}
    other_worker = m.replica_labels("train-9z8y", "worker", 0)
    other_master = {"workflows.argoproj.io/workflow": "train-9z8y"}
    stranger = {"app": "curious", "team": "other"}
    assert _admitted(policies, ps, worker)
    assert _admitted(policies, worker, ps)
    assert _admitted(policies, ps, master)
    assert not _admitted(policies, ps, other_worker)
    assert not _admitted(policies, worker, other_master)
    assert not _admitted(policies, ps, stranger)
    assert not _admitted(policies, worker, {})
    # The install's policy alone admits no one: a job without its own policy is closed.
    assert not _admitted([install], ps, worker)
    # no namespaceSelector or ipBlock peer: pods of other namespaces match no rule
    peers = [p for r in own["spec"]["ingress"] for p in r["from"]]
    assert all(set(p) == {"podSelector"} for p in peers)


def test_render_install_carries_the_policy():
    kinds = [o["kind"] for o in install_objects(ArgoOptions(namespace="ml"))]
    assert kinds.count("NetworkPolicy") == 1
