"""What a fresh namespace needs of the rendered workflows: no ServiceAccount unless one is given
or `render install` made it, no artifact repository unless asked for, every pod of ours under
Pod Security "restricted" (the image build's kaniko step excepted, and said so), parameter
descriptions for the Argo UI's form, and a default image that is a release's."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pod_security import argo_pod_spec, restricted_violations

from elasticdl.runtime.k8s import manifests as m
from elasticdl.workflows.argo import DESCRIPTION_ANNOTATION, ArgoOptions, Schedule
from elasticdl.workflows.definitions import PIPELINES, pipeline
from elasticdl.workflows.render import install_objects, render_objects
from elasticdl.workflows.steps import Engine

ROOT = Path(__file__).resolve().parents[2]


def _objects(train_values: dict[str, str], predict_values: dict[str, str]) -> list[dict]:
    """Every kind of rendered Argo object: train with an image build, with --image and with
    SQL; predict from files and from SQL into a table; the templates; the CronWorkflows."""
    sql = {"sql": "SELECT a, b FROM t", "db": "postgresql+psycopg://u@db/hr", "work_dir": "gs://w"}
    train_sql = {**{k: v for k, v in train_values.items() if k != "data"}, **sql, "label": "b"}
    predict_sql = {
        **{k: v for k, v in predict_values.items() if k not in ("data", "output")},
        **sql,
        "output_table": "scored",
    }
    schedule = Schedule(("0 3 * * *",))
    return [
        *render_objects("train", train_values),
        *render_objects("train", {**train_values, "image": "zoo:1"}),
        *render_objects("train", train_sql),
        *render_objects("predict", predict_values),
        *render_objects("predict", predict_sql),
        *render_objects("evaluate", {**predict_sql, "label": "c"}),
        *render_objects("train", train_values, kind="cron", schedule=schedule),
        *install_objects(),
    ]


def _workflow_specs(objects: list[dict]) -> list[dict]:
    return [o["spec"] for o in objects if o["kind"] in ("Workflow", "WorkflowTemplate")]


def _description(obj: dict) -> str:
    return obj["metadata"]["annotations"][DESCRIPTION_ANNOTATION]


def test_every_step_pod_of_ours_passes_pod_security_restricted(train_values, predict_values):
    checked = set()
    for spec in _workflow_specs(_objects(train_values, predict_values)):
        for template in spec["templates"]:
            if "container" not in template and "script" not in template:
                continue
            problems = restricted_violations(argo_pod_spec(template, spec))
            if template["name"] == "build-image":
                # kaniko runs as root: the one step that cannot, and the description says so.
                root = "runAsNonRoot is not true (on the container or the pod)"
                assert f"container main: {root}" in problems
                continue
            assert problems == [], template["name"]
            container = template["container"]
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            mounts = {v["mountPath"]: v["name"] for v in container["volumeMounts"]}
            assert {"name": mounts["/tmp"], "emptyDir": {}} in template["volumes"]
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert env["HOME"] == env["TMPDIR"] == "/tmp"
            checked.add(template["name"])
    every_step = {
        s.name
        for name in PIPELINES
        for s in pipeline(name).all_steps()
        if s.runs_on(Engine.ARGO) and s.name != "build-image"
    }
    assert checked == every_step


def test_the_image_build_step_states_what_it_needs(train_values):
    (with_build,) = render_objects("train", train_values)
    assert "Step build-image runs as root" in _description(with_build)
    assert "Pod Security 'restricted' refuses" in _description(with_build)
    (predict,) = render_objects("predict", {"data": "d", "trained_model": "m", "output": "o"})
    assert "runs as root" not in _description(predict)


def _cluster_spec(volumes: str) -> m.ClusterSpec:
    return m.ClusterSpec(
        job_name="train-1",
        image="gcr.io/p/zoo:1",
        master_addr="10.0.0.1:50001",
        namespace="ml",
        worker_resources=m.resources("cpu=1,memory=1Gi,gpu=1"),
        volumes=tuple(m.parse_volumes(volumes)),
        tls_secret="job-tls",
        service_account="workers",
    )


def _job_pods(spec: m.ClusterSpec) -> list[dict[str, Any]]:
    ps = [spec.ps_address(0)]
    return [m.ps_pod(spec, 0, 0, "a"), m.ps_pod(spec, 0, 1, "b"), m.worker_pod(spec, 3, ps, "c")]


def test_every_job_pod_passes_pod_security_restricted():
    volumes = (
        "claim_name=data,mount_path=/data;secret=key,mount_path=/key;empty_dir=x,mount_path=/x"
    )
    for pod in _job_pods(_cluster_spec(volumes)):
        assert restricted_violations(pod["spec"]) == [], pod["metadata"]["name"]
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["HOME"] == env["TMPDIR"] == m.TMP_DIR
    # What "restricted" forbids, a user can still ask for; the check says what breaks it.
    (worker,) = _job_pods(_cluster_spec("host_path=/mnt/cache,mount_path=/cache"))[2:]
    assert restricted_violations(worker["spec"]) == ["volume volume-0 is a hostPath"]
    # A volume at /tmp takes the emptyDir's place (one mount per path).
    (worker,) = _job_pods(_cluster_spec("claim_name=scratch,mount_path=/tmp"))[2:]
    mounts = [v["mountPath"] for v in worker["spec"]["containers"][0]["volumeMounts"]]
    assert mounts.count("/tmp") == 1 and restricted_violations(worker["spec"]) == []


def test_the_check_refuses_a_pod_with_nothing_set():
    bare = {"containers": [{"name": "c", "image": "i"}], "volumes": [{"name": "v", "nfs": {}}]}
    assert restricted_violations(bare) == [
        "volume v is of a kind restricted forbids: {'nfs'}",
        "container c: allowPrivilegeEscalation is not false",
        "container c: runAsNonRoot is not true (on the container or the pod)",
        "container c: seccompProfile is unset (on the container and the pod)",
        "container c: capabilities.drop lacks ALL",
    ]


def test_no_service_account_unless_given_or_made_by_install(train_values):
    (wf,) = render_objects("train", train_values)
    assert "serviceAccountName" not in wf["spec"]
    assert "Runs as the namespace's default ServiceAccount" in _description(wf)
    assert "`elasticdl render install` creates a ServiceAccount" in _description(wf)
    given = ArgoOptions(service_account="ml.jobs")
    (wf,) = render_objects("train", train_values, options=given)
    assert wf["spec"]["serviceAccountName"] == "ml.jobs"
    assert "Runs as ServiceAccount ml.jobs, given when it was rendered." in _description(wf)
    objects = install_objects()
    templates = [o for o in objects if o["kind"] == "WorkflowTemplate"]
    (account,) = [o for o in objects if o["kind"] == "ServiceAccount"]
    assert len(templates) == 3 and account["metadata"]["name"] == "elasticdl"
    for template in templates:
        assert template["spec"]["serviceAccountName"] == "elasticdl"
        assert "which `elasticdl render install` creates" in _description(template)
    (binding,) = [o for o in install_objects(given) if o["kind"] == "RoleBinding"]
    assert binding["subjects"][0]["name"] == "ml.jobs"


def test_the_output_artifact_is_asked_for_not_assumed(train_values):
    (wf,) = render_objects("train", train_values)
    publish = next(t for t in wf["spec"]["templates"] if t["name"] == "publish")
    assert "artifacts" not in publish["outputs"]
    assert [p["name"] for p in publish["outputs"]["parameters"]] == ["trained_model"]
    assert "no artifact repository is needed" in _description(wf)
    (wf,) = render_objects("train", train_values, options=ArgoOptions(output_artifact=True))
    publish = next(t for t in wf["spec"]["templates"] if t["name"] == "publish")
    assert [a["name"] for a in publish["outputs"]["artifacts"]] == ["trained_model"]
    assert "needs an artifact repository configured in Argo" in _description(wf)


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_parameter_descriptions_speak_of_parameters_not_flags(name):
    (template,) = render_objects(name, {}, kind="template")
    params = template["spec"]["arguments"]["parameters"]
    names = {p["name"] for p in params}
    for param in params:
        flags = set(re.findall(r"--([a-z][a-z0-9_]*)", param["description"]))
        assert not flags & names, (param["name"], param["description"])
    descriptions = {p["name"]: p["description"] for p in params}
    assert 'needs "db" and "work_dir"' in descriptions["sql"]
    # The command line's help keeps the flags.
    assert "--db" in pipeline(name).param("sql").description


def test_the_default_image_is_the_release_of_this_version():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    release = re.match(r"\d+(\.\d+)*", version)[0]
    (template,) = render_objects("train", {}, kind="template")
    params = {p["name"]: p.get("value") for p in template["spec"]["arguments"]["parameters"]}
    assert params["elasticdl_image"] == f"elasticdl/elasticdl:{release}"
    assert "dev" not in params["elasticdl_image"]
