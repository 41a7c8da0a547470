"""The Kubernetes flags: parsed with argparse, checked up front, turned into a ClusterSpec."""

from __future__ import annotations

import argparse
import base64
import json

import kubernetes_validate
import pytest
from fake_kube import fake_kube

from elasticdl.runtime import auth
from elasticdl.runtime.k8s import manifests as m
from elasticdl.runtime.k8s.options import (
    KubernetesOptions,
    add_arguments,
    make_instance_manager,
    master_address,
)
from elasticdl.runtime.master.instances import Role

ENV = {"MY_POD_NAME": "train-abc-123", "MY_POD_UID": "uid-1", "MY_POD_IP": "10.4.0.9"}


def parse(*argv: str) -> KubernetesOptions:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return KubernetesOptions.from_namespace(parser.parse_args(list(argv)))


def test_flags_to_cluster_spec() -> None:
    options = parse(
        "--pod_image=gcr.io/p/zoo:1",
        "--worker_resource_request=cpu=2,memory=8Gi,gpu=1",
        "--ps_resource_request=cpu=1,memory=2Gi",
        "--ps_resource_limit=cpu=2,memory=2Gi",
        "--worker_pod_priority=high=0.5",
        "--ps_pod_priority=high",
        "--volume=claim_name=data,mount_path=/data",
        "--node_selector=pool=ml",
        "--tolerations=dedicated=ml:NoSchedule",
        "--image_pull_secrets=regcred",
        "--termination_grace_period=90",
    )
    spec = options.cluster_spec("train-abc", master_address(50001, ENV), namespace="ml", env=ENV)
    assert spec.master_addr == "10.4.0.9:50001" and spec.namespace == "ml"
    assert spec.owner == m.Owner("train-abc-123", "uid-1")
    assert spec.worker_resources.limits["nvidia.com/gpu"] == "1"
    assert spec.ps_resources.limits == {"cpu": "2", "memory": "2Gi"}
    assert spec.ps_priority_class == "high" and spec.worker_priority.for_worker(1) == "low"
    assert spec.termination_grace_s == 90
    pod = m.worker_pod(spec, 0, [spec.ps_address(0)], "x")
    kubernetes_validate.validate(pod, "1.33", strict=True)
    assert pod["spec"]["terminationGracePeriodSeconds"] == 90


def test_defaults() -> None:
    spec = parse().cluster_spec("j", "10.0.0.1:1", image="img:1", env={})
    assert spec.image == "img:1" and spec.namespace == "default" and spec.owner is None
    assert spec.worker_resources.requests == {"cpu": "1", "memory": "4096Mi"}
    assert spec.termination_grace_s == 60 and spec.ps_port == 2222


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--pod_image: no image"),
        (["--pod_image=i", "--worker_resource_request=cpu=1,memory=4"], "has no unit"),
        (["--pod_image=i", "--ps_pod_priority=high=0.5"], "one PriorityClass name"),
        (["--pod_image=i", "--termination_grace_period=-1"], "between 0 and 3600"),
        (["--pod_image=i", "--ps_port=0"], "between 1 and 65535"),
    ],
)
def test_bad_flags(argv: list[str], message: str) -> None:
    with pytest.raises(m.ManifestError, match=message):
        parse(*argv).cluster_spec("j", "10.0.0.1:1", env={})


def test_master_address_needs_the_pod_ip() -> None:
    assert master_address(5, {"MY_POD_IP": "fd00::1"}) == "[fd00::1]:5"
    with pytest.raises(m.ManifestError, match="MY_POD_IP"):
        master_address(5, {})


def test_make_instance_manager(tmp_path) -> None:
    config = tmp_path / "job.json"
    credentials = auth.new_auth()
    auth.write_secret(tmp_path, credentials)
    config.write_text('{"job_name": "j", "secret_file": "job.secret"}')
    with fake_kube(command=lambda pod, kube: None) as kube:
        options = parse("--pod_image=img:1", "--pod_namespace=ml")
        manager = make_instance_manager(options, config, "10.0.0.1:1", api_client=kube.api_client())
        try:
            manager.start_worker(0, [])
            assert kube.wait_for(lambda: kube.names("pods", "ml") == ["j-worker-0"])
            assert (
                kube.get("configmaps", "j-config", "ml")["data"]["job.json"] == config.read_text()
            )
            assert manager.alive(Role.WORKER) == [0]
            secret = kube.get("secrets", "j-auth", "ml")
            assert base64.b64decode(secret["data"]["job.secret"]).decode() == credentials.secret
            pod = json.dumps(kube.get("pods", "j-worker-0", "ml"))
            assert credentials.secret not in pod and "j-auth" in pod
        finally:
            manager.shutdown(grace_s=0)
        assert kube.names("pods", "ml") == [] and kube.names("secrets", "ml") == []


def test_the_default_pod_image_is_the_argo_main_containers() -> None:
    import sys

    from elasticdl.runtime.k8s.options import own_pod_image

    def sleeper(pod, kube):
        return [sys.executable, "-c", "import time; time.sleep(30)"]

    with fake_kube(command=sleeper) as kube:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "train-abc-123"},
            "spec": {
                "containers": [
                    {"name": "wait", "image": "quay.io/argoproj/argoexec:v3.7.1"},
                    {"name": "main", "image": "registry.local/zoo:abc"},
                ]
            },
        }
        assert kube.create("pods", "team-a", pod)[0] == 201
        client = kube.api_client()
        assert own_pod_image(client, "team-a", ENV) == "registry.local/zoo:abc"
        renamed = {**ENV, "ARGO_CONTAINER_NAME": "wait"}
        assert own_pod_image(client, "team-a", renamed) == "quay.io/argoproj/argoexec:v3.7.1"
        assert own_pod_image(client, "team-a", {**ENV, "MY_POD_NAME": "gone"}) == ""
        assert own_pod_image(client, "team-a", {}) == ""


def test_tls_needs_the_mounted_secret_and_projects_it_into_every_pod() -> None:
    assert KubernetesOptions().master_tls_dir() == ""
    options = KubernetesOptions(tls=True, tls_secret="job-tls")
    with pytest.raises(m.ManifestError, match="kubectl create secret tls job-tls"):
        options.master_tls_dir()
    spec = options.cluster_spec("j", "10.0.0.1:5000", image="i", namespace="ns", env={})
    assert spec.tls_secret == "job-tls"
    assert (
        KubernetesOptions(tls_secret="job-tls")
        .cluster_spec("j", "10.0.0.1:5000", image="i", namespace="ns", env={})
        .tls_secret
        == ""
    )
    pod = m.worker_pod(spec, 0, [], "launch")
    (config,) = [v for v in pod["spec"]["volumes"] if v["name"] == m.CONFIG_VOLUME]
    secrets = [s["secret"] for s in config["projected"]["sources"] if "secret" in s]
    assert {
        "name": "job-tls",
        "items": [
            {"key": "tls.crt", "path": "tls/tls.crt"},
            {"key": "tls.key", "path": "tls/tls.key"},
        ],
    } in secrets
    assert any(s["name"] == "job-tls" and s.get("optional") for s in secrets)  # ca.crt
