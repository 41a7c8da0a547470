"""The pods, Services and ConfigMap the Kubernetes instance manager creates."""

from __future__ import annotations

import base64
import json
from fractions import Fraction
from typing import Any

import kubernetes_validate
import pytest

from elasticdl.runtime.k8s import manifests as m

K8S_VERSION = "1.33"  # the oldest schema kubernetes-validate 1.37 ships


def full_spec(**overrides: Any) -> m.ClusterSpec:
    values: dict[str, Any] = {
        "job_name": "train-1a2b",
        "image": "gcr.io/p/zoo:abc",
        "master_addr": "10.4.0.9:50001",
        "namespace": "ml",
        "owner": m.Owner("train-1a2b-train-3301", "0b5e3c1e-77aa-4d54-9f2e-3b1c2d4e5f60"),
        "worker_resources": m.resources("cpu=1,memory=4096Mi,gpu=1"),
        "ps_resources": m.resources("cpu=2,memory=8Gi", "cpu=4,memory=8Gi", role="ps"),
        "worker_priority": m.parse_worker_priority("high=0.5"),
        "ps_priority_class": "high",
        "volumes": tuple(
            m.parse_volumes(
                "claim_name=data,mount_path=/data;host_path=/mnt/cache,mount_path=/cache,"
                "read_only=true;secret=gcs-key,mount_path=/secrets,sub_path=key.json"
            )
        ),
        "node_selector": m.parse_node_selector("cloud.google.com/gke-nodepool=ml"),
        "tolerations": tuple(m.parse_tolerations("dedicated=ml:NoSchedule;nvidia.com/gpu")),
        "image_pull_secrets": tuple(m.parse_image_pull_secrets("regcred")),
        "service_account": "elasticdl-worker",
        "env": {"GOOGLE_APPLICATION_CREDENTIALS": "/secrets/key.json"},
    }
    values.update(overrides)
    return m.ClusterSpec(**values)


def all_objects(spec: m.ClusterSpec) -> list[dict[str, Any]]:
    ps = [spec.ps_address(i) for i in range(2)]
    return [
        m.config_map(spec, '{"job_name": "train-1a2b"}'),
        m.job_secret(spec, "s3cr3t-value"),
        m.ps_service(spec, 0),
        m.ps_service(spec, 1),
        m.ps_pod(spec, 0, 0, "launch-a"),
        m.ps_pod(spec, 1, 2, "launch-b"),
        m.worker_pod(spec, 0, ps, "launch-c"),
        m.worker_pod(spec, 7, ps, "launch-d"),
    ]


@pytest.mark.parametrize(
    "spec",
    [full_spec(), m.ClusterSpec("j", "img", "10.0.0.1:1")],
    ids=["every option", "minimal"],
)
def test_every_manifest_passes_strict_validation(spec: m.ClusterSpec) -> None:
    for obj in all_objects(spec):
        assert kubernetes_validate.validate(obj, K8S_VERSION, strict=True) == K8S_VERSION


def test_a_typo_would_be_caught() -> None:
    pod = m.worker_pod(full_spec(), 0, [], "x")
    pod["spec"]["restartPolicyy"] = "Never"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_labels_owner_and_pod_settings() -> None:
    spec = full_spec()
    for obj in all_objects(spec):
        meta = obj["metadata"]
        assert meta["namespace"] == "ml"
        assert meta["labels"][m.LABEL_JOB] == "train-1a2b"
        assert not any(k.startswith("workflows.argoproj.io") for k in meta["labels"])
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "train-1a2b-train-3301",
                "uid": "0b5e3c1e-77aa-4d54-9f2e-3b1c2d4e5f60",
            }
        ]
    worker = m.worker_pod(spec, 7, [spec.ps_address(0)], "launch")
    assert worker["metadata"]["name"] == "train-1a2b-worker-7"
    assert worker["metadata"]["labels"] == {
        m.LABEL_JOB: "train-1a2b",
        m.LABEL_TYPE: "worker",
        m.LABEL_INDEX: "7",
    }
    pod_spec = worker["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    assert pod_spec["terminationGracePeriodSeconds"] == 60
    assert pod_spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod_spec["nodeSelector"] == {"cloud.google.com/gke-nodepool": "ml"}
    assert pod_spec["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists"},
    ]
    container = pod_spec["containers"][0]
    assert container["command"] == [
        "python",
        "-P",
        "-m",
        "elasticdl.runtime.worker.main",
        "--config",
        "/etc/elasticdl/job.json",
        "--worker_id",
        "7",
        "--master_addr",
        "10.4.0.9:50001",
        "--ps_addrs",
        "train-1a2b-ps-0.ml.svc:2222",
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ELASTICDL_MASTER_ADDR"] == "10.4.0.9:50001"
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == "/secrets/key.json"
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "4096Mi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "1", "memory": "4096Mi", "nvidia.com/gpu": "1"},
    }
    mounts = {v["mountPath"]: v for v in container["volumeMounts"]}
    assert mounts["/etc/elasticdl"]["readOnly"] is True
    assert mounts["/cache"]["readOnly"] is True and mounts["/secrets"]["subPath"] == "key.json"
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    assert volumes["elasticdl-config"] == {
        "name": "elasticdl-config",
        "projected": {
            "sources": [
                {"configMap": {"name": "train-1a2b-config"}},
                {
                    "secret": {
                        "name": "train-1a2b-auth",
                        "items": [{"key": "job.secret", "path": "job.secret"}],
                    }
                },
            ]
        },
    }
    assert volumes["volume-0"]["persistentVolumeClaim"] == {"claimName": "data"}


def test_ps_pod_and_its_service() -> None:
    spec = full_spec()
    service = m.ps_service(spec, 1)
    pod = m.ps_pod(spec, 1, 2, "launch")
    assert service["metadata"]["name"] == "train-1a2b-ps-1"
    assert pod["metadata"]["name"] == "train-1a2b-ps-1-r2"
    assert m.ps_pod(spec, 1, 0, "l")["metadata"]["name"] == "train-1a2b-ps-1"
    selector = service["spec"]["selector"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert selector[m.LABEL_INDEX] == "1" and selector[m.LABEL_TYPE] == "ps"
    assert spec.ps_address(1) == "train-1a2b-ps-1.ml.svc:2222"
    container = pod["spec"]["containers"][0]
    assert container["command"][3:] == [
        "elasticdl.runtime.ps.main",
        "--config",
        "/etc/elasticdl/job.json",
        "--ps_id",
        "1",
        "--port",
        "2222",
        "--host",
        "0.0.0.0",
    ]
    assert container["ports"] == [{"name": "grpc", "containerPort": 2222, "protocol": "TCP"}]
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "8Gi"},
        "limits": {"cpu": "4", "memory": "8Gi"},
    }
    assert pod["spec"]["priorityClassName"] == "high"


@pytest.mark.parametrize(
    ("text", "n", "high"),
    [
        ("high=0.5", 4, 2),
        ("high=0.5", 5, 3),
        ("high=0.25", 8, 2),
        ("high=1", 3, 3),
        ("high=0", 3, 0),
        ("high=1/3", 6, 2),
    ],
)
def test_worker_priority_share(text: str, n: int, high: int) -> None:
    priority = m.parse_worker_priority(text)
    classes = [priority.for_worker(i) for i in range(n)]
    assert classes.count("high") == high
    assert classes.count("low") == n - high
    # Relaunches get new ids: the share holds over any run of consecutive ids.
    later = [priority.for_worker(i) for i in range(100, 100 + n)]
    assert abs(later.count("high") - high) <= 1


def test_worker_priority_forms() -> None:
    assert m.parse_worker_priority("") == m.WorkerPriority()
    assert m.parse_worker_priority("").for_worker(3) == ""
    assert m.parse_worker_priority("high").for_worker(9) == "high"
    spread = m.parse_worker_priority("prod=0.5,spot")
    assert spread == m.WorkerPriority("prod", Fraction(1, 2), "spot")
    assert [spread.for_worker(i) for i in range(4)] == ["prod", "spot", "prod", "spot"]
    pod = m.worker_pod(full_spec(), 1, [], "x")
    assert pod["spec"]["priorityClassName"] == "low"
    assert (
        "priorityClassName" not in m.worker_pod(m.ClusterSpec("j", "i", "a:1"), 0, [], "x")["spec"]
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: m.resources("cpu=1,memory=4096"), "has no unit and would mean 4096 bytes"),
        (lambda: m.resources("cpu=one"), "'one' is not a Kubernetes quantity"),
        (lambda: m.resources("cpu=1,disk=10Gi"), "unknown resource 'disk'"),
        (lambda: m.resources("cpu"), "'cpu' is not KEY=QUANTITY"),
        (lambda: m.resources("cpu=1,cpu=2"), "'cpu' is given twice"),
        (lambda: m.resources("gpu=0.5"), "gpu=0.5 must be a whole number"),
        (lambda: m.resources("cpu=0"), "cpu=0 must be positive"),
        (lambda: m.resources("memory=8Gi", "memory=4Gi"), "memory=4Gi is below its request 8Gi"),
        (lambda: m.resources("gpu=1", "gpu=2"), "must equal its request"),
        (lambda: m.resources("memory=1Gi", "memory=1", "ps"), "--ps_resource_limit"),
        (lambda: m.parse_worker_priority("high=1.5"), "not a share between 0 and 1"),
        (lambda: m.parse_worker_priority("high=half"), "not a share between 0 and 1"),
        (lambda: m.parse_worker_priority("High Prio"), "expected CLASS or CLASS=SHARE"),
        (lambda: m.parse_volumes("claim_name=d"), "an absolute mount_path"),
        (lambda: m.parse_volumes("nfs=x,mount_path=/x"), "expected one of claim_name"),
        (lambda: m.parse_tolerations("k=v:Sometimes"), "EFFECT one of NoSchedule"),
        (lambda: m.parse_tolerations("k=a b:NoSchedule"), "expected KEY[=VALUE][:EFFECT]"),
        (lambda: m.parse_volumes("claim_name=$(x),mount_path=/d"), "is not an object name"),
        (lambda: m.parse_volumes("secret=Reg_Cred,mount_path=/d"), "is not an object name"),
        (lambda: m.parse_volumes("host_path=data,mount_path=/d"), "is not an absolute path"),
        (lambda: m.parse_volumes("claim_name=d,mount_path=/d,sub_path=../up"), "stay inside"),
        (lambda: m.parse_node_selector("a b=c"), "is not a valid label"),
        (lambda: m.parse_image_pull_secrets("Reg Cred"), "is not a Secret name"),
    ],
)
def test_bad_flags_give_one_clear_line(call: Any, message: str) -> None:
    with pytest.raises(m.ManifestError) as err:
        call()
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_resource_forms() -> None:
    assert m.parse_resources("") == {}
    assert m.parse_resources(" cpu=500m , memory=1.5Gi, ephemeral-storage=10G ") == {
        "cpu": "500m",
        "memory": "1.5Gi",
        "ephemeral-storage": "10G",
    }
    assert m.parse_resources("amd.com/gpu=2") == {"amd.com/gpu": "2"}
    burstable = m.resources("cpu=1,memory=1Gi", "memory=2Gi")
    assert burstable.limits == {"memory": "2Gi"}
    gpu_from_request = m.resources("gpu=1", "cpu=2")
    assert gpu_from_request.limits == {"cpu": "2", "nvidia.com/gpu": "1"}


def test_names_fit_dns_labels() -> None:
    assert m.name_prefix("train-1a2b") == "train-1a2b"
    assert m.name_prefix("My_Job.v2") == "my-job-v2"
    assert m.name_prefix("2024-run") == "edl-2024-run"
    long = m.name_prefix("x" * 100)
    assert len(long) <= 40 and long != m.name_prefix("x" * 99)
    spec = m.ClusterSpec("A" * 80, "img", "a:1")
    for obj in all_objects(spec):
        assert len(obj["metadata"]["name"]) <= 63
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_owner_from_downward_api_env() -> None:
    assert m.Owner.from_env({"MY_POD_NAME": "p", "MY_POD_UID": "u"}) == m.Owner("p", "u")
    assert m.Owner.from_env({"MY_POD_NAME": "p"}) is None
    assert (
        "ownerReferences"
        not in m.worker_pod(m.ClusterSpec("j", "i", "a:1"), 0, [], "x")["metadata"]
    )


def test_config_map_holds_job_json() -> None:
    cm = m.config_map(full_spec(), '{"a": 1}')
    assert cm["data"] == {"job.json": '{"a": 1}'}
    assert cm["metadata"]["name"] == "train-1a2b-config"
    with pytest.raises(m.ManifestError, match="1 MiB"):
        m.config_map(full_spec(), "x" * 1_100_000)


def test_the_job_secret_lives_in_its_own_secret_and_nowhere_in_a_pod() -> None:
    spec = full_spec()
    secret = m.job_secret(spec, "s3cr3t-value")
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == "train-1a2b-auth"
    assert base64.b64decode(secret["data"]["job.secret"]) == b"s3cr3t-value"
    assert secret["metadata"]["labels"] == {m.LABEL_JOB: "train-1a2b"}
    ps = [spec.ps_address(0)]
    for pod in (m.ps_pod(spec, 0, 0, "a"), m.worker_pod(spec, 3, ps, "b")):
        text = json.dumps(pod)
        assert "s3cr3t" not in text and base64.b64encode(b"s3cr3t-value").decode() not in text
        container = pod["spec"]["containers"][0]
        assert "job.secret" not in " ".join(container["command"])
        assert all("secret" not in e["name"].lower() for e in container["env"])
        (config,) = [v for v in pod["spec"]["volumes"] if v["name"] == m.CONFIG_VOLUME]
        sources = config["projected"]["sources"]
        assert {"secret": {"name": "train-1a2b-auth", "items": [
            {"key": "job.secret", "path": "job.secret"}]}} in sources  # fmt: skip
