"""The `on_cluster` marker: tests against a real Kubernetes cluster, skipped without one.

A test marked `@pytest.mark.on_cluster` runs only when a cluster is configured: KUBECONFIG is
set, or the tests run in a pod (KUBERNETES_SERVICE_HOST, in-cluster config). They are not
part of CI. The job's master runs in the pytest process and its PS and worker pods must reach
it (and it their Services), so run pytest in a pod of the cluster. On kind (minikube: the same
with `minikube image load`):

    kind create cluster
    docker build -t elasticdl:local . && kind load docker-image elasticdl:local
    kubectl create serviceaccount edl-test
    kubectl create role edl-test --verb=create,get,list,watch,delete,deletecollection \\
        --resource=pods,services,configmaps
    kubectl create rolebinding edl-test --role=edl-test --serviceaccount=default:edl-test
    kubectl apply -f - <<EOF   # data shared by the test pod and the job's pods (one node)
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "edl-data"},
     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    EOF
    kubectl run edl-test --image=elasticdl:local --overrides='{"spec": {
      "serviceAccountName": "edl-test",
      "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "edl-data"}}],
      "containers": [{"name": "edl-test", "image": "elasticdl:local",
        "command": ["sleep", "infinity"],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}'
    kubectl cp . edl-test:/src
    kubectl exec edl-test -- pip install pytest pytest-timeout kubernetes-validate
    kubectl exec edl-test -- env ELASTICDL_TEST_IMAGE=elasticdl:local \\
        ELASTICDL_TEST_DATA_DIR=/data ELASTICDL_TEST_VOLUME=claim_name=edl-data,mount_path=/data \\
        sh -c 'cd /src && python -P -m pytest -p no:cacheprovider -m on_cluster tests/runtime/k8s'

Environment: ELASTICDL_TEST_IMAGE (the image the PS and worker pods run; it must hold
elasticdl), ELASTICDL_TEST_NAMESPACE (default: the pod's), ELASTICDL_TEST_DATA (training data
the pods can read, e.g. a gs:// URL) or ELASTICDL_TEST_DATA_DIR (a directory the test writes
the data to, which ELASTICDL_TEST_VOLUME, a `--volume` string, mounts into every pod).
"""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "on_cluster: needs a real Kubernetes cluster (KUBECONFIG)")


def has_cluster() -> bool:
    return bool(os.environ.get("KUBECONFIG") or os.environ.get("KUBERNETES_SERVICE_HOST"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("on_cluster") and not has_cluster():
        pytest.skip("on_cluster: no cluster (set KUBECONFIG, or run in a pod)")
