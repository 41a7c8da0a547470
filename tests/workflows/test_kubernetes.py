"""The pipelines run the elastic job on Kubernetes on Argo, and locally on this machine.

On Argo the master's step defaults to `--instance_manager kubernetes` and gets the Kubernetes
flags (pipeline parameters, Argo only), its pods' image (the job image) and namespace (the
workflow's); the local engine runs workers as processes and passes no Kubernetes flag; the
exit handler deletes what the master created by the label value the master used.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from fake_kube import fake_kube

from elasticdl.runtime.k8s import manifests as m
from elasticdl.runtime.k8s.options import KubernetesOptions
from elasticdl.runtime.k8s.options import add_arguments as add_kubernetes_arguments
from elasticdl.steps import cleanup
from elasticdl.workflows import PipelineError, predict_pipeline, run_local, train_pipeline
from elasticdl.workflows.definitions import JOB_LABEL
from elasticdl.workflows.local import step_parser
from elasticdl.workflows.rbac import ROLE_RULES
from elasticdl.workflows.render import render_objects
from elasticdl.workflows.steps import Engine
from elasticdl.workflows.values import LocalContext, evaluate

KUBERNETES_VALUES = {
    "worker_resource_request": "cpu=2,memory=8Gi,gpu=1",
    "worker_resource_limit": "cpu=4,memory=8Gi,gpu=1",
    "ps_resource_request": "cpu=1,memory=2Gi",
    "ps_resource_limit": "cpu=2,memory=4Gi",
    "worker_pod_priority": "high=0.5,low",
    "ps_pod_priority": "high",
    "node_selector": "cloud.google.com/gke-nodepool=ml,disk=ssd",
    "tolerations": "nvidia.com/gpu:NoSchedule;dedicated=ml:NoExecute",
    "volume": "claim_name=data,mount_path=/data,read_only=true;empty_dir=true,mount_path=/tmp/x",
    "image_pull_secrets": "regcred,other",
    "image_pull_policy": "Always",
    "pod_service_account": "elasticdl-worker",
    "termination_grace_period": "120",
}
PS_FLAGS = {"ps_resource_request", "ps_resource_limit", "ps_pod_priority"}


def _template(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in obj["spec"]["templates"] if t["name"] == name)


def _parameters(obj: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p.get("value") for p in obj["spec"]["arguments"]["parameters"]}


def _flags(args: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in args if a.startswith("--"))


# -- Argo ---------------------------------------------------------------------------------------


def test_the_rendered_train_step_runs_workers_as_pods_by_default(train_values):
    (wf,) = render_objects("train", train_values)
    assert _parameters(wf)["instance_manager"] == "kubernetes"
    args = _template(wf, "train")["container"]["args"]
    flags = _flags(args)
    assert flags["instance_manager"] == "{{workflow.parameters.instance_manager}}"
    for name in KUBERNETES_VALUES:
        assert flags[name] == f"{{{{workflow.parameters.{name}}}}}", name
    # The pods run the job image (what the master runs) in the workflow's namespace (the
    # Role's, and the one cleanup searches): fixed by the workflow, not parameters.
    assert flags["pod_image"] == _template(wf, "train")["container"]["image"]
    assert flags["pod_image"] == "{{inputs.parameters.resolve_image_image}}"
    assert flags["pod_namespace"] == "{{workflow.namespace}}"
    assert "pod_image" not in _parameters(wf) and "pod_namespace" not in _parameters(wf)
    # Defaults are the master's own (runtime/k8s/options.py).
    params = _parameters(wf)
    defaults = KubernetesOptions()
    assert params["worker_resource_request"] == defaults.worker_resource_request
    assert params["ps_resource_request"] == defaults.ps_resource_request
    assert params["image_pull_policy"] == defaults.image_pull_policy
    assert params["termination_grace_period"] == str(defaults.termination_grace_period)
    # The master finds its own pod (owner of the pods it creates, the address they dial).
    env = {e["name"] for e in _template(wf, "train")["container"]["env"]}
    assert {"MY_POD_NAME", "MY_POD_UID", "MY_POD_IP", "MY_POD_NAMESPACE"} <= env


def test_the_rendered_predict_step_runs_workers_as_pods_by_default(predict_values):
    (wf,) = render_objects("predict", predict_values)
    assert _parameters(wf)["instance_manager"] == "kubernetes"
    flags = _flags(_template(wf, "predict")["container"]["args"])
    assert flags["instance_manager"] == "{{workflow.parameters.instance_manager}}"
    assert flags["pod_image"] == "{{inputs.parameters.resolve_image_image}}"
    assert flags["pod_image"] == _template(wf, "predict")["container"]["image"]
    assert flags["pod_namespace"] == "{{workflow.namespace}}"
    for name in set(KUBERNETES_VALUES) - PS_FLAGS:
        assert flags[name] == f"{{{{workflow.parameters.{name}}}}}", name
    # Prediction has no parameter servers: no PS settings to offer.
    assert not PS_FLAGS & set(flags) and not PS_FLAGS & set(_parameters(wf))


def test_given_kubernetes_values_are_workflow_parameters(train_values, predict_values):
    (wf,) = render_objects("train", {**train_values, **KUBERNETES_VALUES})
    params = _parameters(wf)
    assert {k: params[k] for k in KUBERNETES_VALUES} == KUBERNETES_VALUES
    predict = {k: v for k, v in KUBERNETES_VALUES.items() if k not in PS_FLAGS}
    (wf,) = render_objects("predict", {**predict_values, **predict, "instance_manager": "local"})
    params = _parameters(wf)
    assert {k: params[k] for k in predict} == predict and params["instance_manager"] == "local"
    with pytest.raises(ValueError, match="unknown parameter.*ps_resource_request"):
        render_objects("predict", {**predict_values, "ps_resource_request": "cpu=1"})


def _argo_argv(pipeline, step_name: str, values: dict[str, str]) -> list[str]:
    """The step's argv as Argo substitutes it (the workflow namespace left empty; the image
    resolve-image names is --image)."""
    resolved = pipeline.resolve(values, engine=Engine.ARGO)
    ctx = LocalContext(
        params=resolved,
        run_id="wf-1",
        output_path=lambda n: f"/tmp/{n}",
        outputs={"resolve-image": {"image": values.get("image", "")}},
    )
    return [evaluate(a, ctx) for a in pipeline.step(step_name).argv_args(Engine.ARGO)]


def test_the_train_step_parses_the_kubernetes_flags_as_given(train_values):
    values = {**train_values, **KUBERNETES_VALUES, "image": "reg.example/zoo@sha256:1"}
    pipeline = train_pipeline()
    args = step_parser(pipeline.step("train")).parse_args(_argo_argv(pipeline, "train", values))
    assert args.instance_manager == "kubernetes" and args.job_name == "wf-1"
    options = KubernetesOptions.from_namespace(args)
    expected = {**KUBERNETES_VALUES, "termination_grace_period": 120}
    assert {k: getattr(options, k) for k in expected} == expected
    assert options.pod_image == "reg.example/zoo@sha256:1"
    spec = options.cluster_spec("wf-1", "10.0.0.1:50001", namespace="ml", env={})
    assert spec.worker_resources.limits["nvidia.com/gpu"] == "1"
    assert spec.node_selector == {"cloud.google.com/gke-nodepool": "ml", "disk": "ssd"}


def test_the_predict_step_parses_its_kubernetes_flags_as_given():
    """The predict step takes the master's Kubernetes flags (runtime/k8s/options.py) too;
    every flag it gets on Argo beyond its local argv is one of them."""
    values = {"data": "gs://b/d", "trained_model": "gs://b/m", "output": "gs://b/o"}
    values |= {k: v for k, v in KUBERNETES_VALUES.items() if k not in PS_FLAGS}
    pipeline = predict_pipeline()
    step = pipeline.step("predict")
    argv = _argo_argv(pipeline, "predict", values)
    parser = argparse.ArgumentParser()
    add_kubernetes_arguments(parser)
    extra = parser.parse_args(argv[len(step.args) :])
    assert [a.split("=", 1)[0] for a in argv[len(step.args) :]][:2] == [
        "--pod_image",
        "--pod_namespace",
    ]
    args = step_parser(step).parse_args(argv)
    assert args.instance_manager == "kubernetes"
    options = KubernetesOptions.from_namespace(args)
    assert options == KubernetesOptions.from_namespace(extra)
    expected: dict[str, object] = {k: v for k, v in KUBERNETES_VALUES.items() if k not in PS_FLAGS}
    expected["termination_grace_period"] = 120
    assert {k: getattr(options, k) for k in expected} == expected


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("worker_resource_request", "cpu=1,memory=4096", "has no unit"),
        ("worker_resource_limit", "cpus=2", "unknown resource 'cpus'"),
        ("ps_resource_request", "cpu=-1", "--ps_resource_request"),
        ("worker_pod_priority", "high=2", "not a share between 0 and 1"),
        ("ps_pod_priority", "high=0.5", "--ps_pod_priority 'high=0.5': not a PriorityClass"),
        ("node_selector", "pool", "--node_selector 'pool': 'pool' is not KEY=VALUE"),
        ("tolerations", "gpu:Sometimes", "--tolerations"),
        ("volume", "claim_name=c,mount_path=relative", "--volume"),
        ("image_pull_secrets", "Reg_Cred", "is not a Secret name"),
        ("image_pull_policy", "Sometimes", "expected one of IfNotPresent, Always, Never"),
        ("pod_service_account", "Worker SA", "not a ServiceAccount name"),
        ("tls_secret", "Job_TLS", "--tls_secret 'Job_TLS': not a Secret name"),
        ("tls", "yes please", "--tls"),
        ("termination_grace_period", "3601", "must be <= 3600"),
        ("termination_grace_period", "-1", "must be >= 0"),
    ],
)
def test_bad_kubernetes_values_are_refused_in_one_line(train_values, name, value, message):
    for kind in ("workflow", "template"):
        with pytest.raises(ValueError, match=message) as err:
            render_objects("train", {**train_values, name: value}, kind=kind)
        assert "\n" not in str(err.value)


def test_values_that_only_fail_together_are_refused_like_the_master_would(train_values):
    # What the master checks before it starts (cluster_spec), with its message, at render time.
    bad = {**train_values, "worker_resource_request": "cpu=2", "worker_resource_limit": "cpu=1"}
    with pytest.raises(ValueError, match="--worker_resource_limit 'cpu=1': cpu=1 is below"):
        render_objects("train", bad)
    gpus = {"ps_resource_request": "cpu=1,gpu=1", "ps_resource_limit": "cpu=1,gpu=2"}
    with pytest.raises(ValueError, match="must equal its request"):
        render_objects("train", {**train_values, **gpus})

    with pytest.raises(ValueError, match="--min_workers 3 is more than --num_workers 2"):
        render_objects("train", {**train_values, "num_workers": "2", "min_workers": "3"})
    (workflow,) = render_objects("train", {**train_values, "min_workers": "2"})
    assert "--min_workers={{workflow.parameters.min_workers}}" in str(workflow)


# -- the local engine --------------------------------------------------------------------------


def test_the_local_engine_runs_workers_here_and_refuses_kubernetes(fake_jobs, tmp_path):
    values = {"model_def": "m", "data": str(tmp_path / "d"), "output": str(tmp_path / "m")}
    run = run_local(train_pipeline(), values, run_id="r1", work_dir=str(tmp_path / "w"))
    assert run.succeeded, run.error
    ((_, args),) = fake_jobs.calls
    assert args.instance_manager == "local"
    # No Kubernetes flag reaches the local step: they mean nothing here.
    argv = run.step("train").argv
    assert "--instance_manager=local" in argv
    assert not [a for a in argv if a.split("=")[0][2:] in {*KUBERNETES_VALUES, "pod_image"}]
    assert args.pod_image == "" and args.worker_resource_request == "cpu=1,memory=4096Mi"
    for pipeline, given in (
        (train_pipeline(), values),
        (predict_pipeline(), {"data": "d", "trained_model": "m", "output": "o"}),
    ):
        with pytest.raises(PipelineError, match="--instance_manager kubernetes needs a cluster"):
            run_local(pipeline, {**given, "instance_manager": "kubernetes"})
        resolved = pipeline.resolve(given, engine=Engine.LOCAL)
        assert resolved["instance_manager"] == "local"
        assert pipeline.resolve(given, engine=Engine.ARGO, run_checks=False)[
            "instance_manager"
        ] == ("kubernetes")
    assert len(fake_jobs.calls) == 1  # refused before any step ran


def test_the_real_train_step_runs_local_workers_on_the_local_engine(
    tmp_path, monkeypatch, model_writer
):
    """The real step module (TrainingJob stood in for): no Kubernetes instance manager."""
    from elasticdl.runtime.master import training_job as job

    made = []

    class FakeTrainingJob:
        def __init__(self, options, instance_manager_factory=None):
            made.append(instance_manager_factory)
            self.options = options

        def run(self):
            model_writer(self.options.output)
            return types.SimpleNamespace(succeeded=True, output=self.options.output)

    monkeypatch.setattr(job, "TrainingJob", FakeTrainingJob)
    monkeypatch.delenv("MY_POD_IP", raising=False)
    values = {"model_def": "regressor.DNN", "data": str(tmp_path), "output": str(tmp_path / "m")}
    run = run_local(train_pipeline(), values, run_id="r1", work_dir=str(tmp_path / "w"))
    assert run.succeeded, run.error
    assert made == [None]  # TrainingJob's default: LocalInstanceManager (processes)


# -- cleanup -----------------------------------------------------------------------------------


def _create_job(api_client: Any, job_name: str, namespace: str = "default") -> m.ClusterSpec:
    """What the master of `job_name` creates: the ConfigMap, a PS Service and pod, workers."""
    from kubernetes import client

    spec = m.ClusterSpec(
        job_name=job_name, image="zoo:1", master_addr="10.0.0.1:50001", namespace=namespace
    )
    api = client.CoreV1Api(api_client)
    api.create_namespaced_config_map(namespace, m.config_map(spec, '{"job_name": "x"}'))
    api.create_namespaced_service(namespace, m.ps_service(spec, 0))
    api.create_namespaced_pod(namespace, m.ps_pod(spec, 0, 0, "l0"))
    for worker in (0, 1):
        api.create_namespaced_pod(
            namespace, m.worker_pod(spec, worker, [spec.ps_address(0)], f"w{worker}")
        )
    return spec


WORKFLOW_NAMES = (
    "elasticdl-train-x7k2p",
    # A CronWorkflow's run: longer than the 40 characters a prefix may have.
    "nightly-salary-model-training-cron-1767225600",
    # A name with dots (a DNS subdomain, not a label).
    "team.ml.elasticdl-train-abcde",
)


def _objects(prefix: str) -> dict[str, list[str]]:
    return {
        "pods": sorted([m.ps_pod_name(prefix, 0)] + [m.worker_pod_name(prefix, i) for i in (0, 1)]),
        "services": [m.ps_service_name(prefix, 0)],
        "configmaps": [m.config_map_name(prefix)],
    }


def test_cleanup_deletes_what_the_master_created_by_its_label():
    with fake_kube(command=lambda pod, kube: None, validate=False) as kube:
        other = _create_job(kube.api_client(), "elasticdl-train-other")
        specs = [_create_job(kube.api_client(), name) for name in WORKFLOW_NAMES]
        assert [s.prefix == s.job_name for s in specs] == [True, False, False]
        for name, spec in zip(WORKFLOW_NAMES, specs, strict=True):
            mine = f"{JOB_LABEL}={spec.prefix}"
            assert len(kube.pods(selector=mine)) == 3
            result = cleanup.run(name, "default", api_client=kube.api_client())
            assert result.selector == mine == m.job_selector(spec.prefix)
            assert result.deleted == _objects(spec.prefix)
            assert kube.pods(selector=mine) == []
        remaining = {r: kube.names(r) for r in ("pods", "services", "configmaps")}
        assert remaining == _objects(other.prefix)
        # Again (a retried exit handler, or a job that made nothing): nothing to do.
        again = cleanup.run(WORKFLOW_NAMES[1], "default", api_client=kube.api_client())
        assert again.deleted == {"pods": [], "services": [], "configmaps": []}


def test_cleanup_reports_a_refusal_in_one_line_and_retries_transient_failures(capsys):
    from kubernetes.client.rest import ApiException

    class Api:
        def __init__(self, failures):
            self.failures = list(failures)
            self.calls = 0

        def __getattr__(self, name):
            def call(*args, **kwargs):
                self.calls += 1
                if self.failures:
                    err = ApiException(status=self.failures.pop(0), reason="Forbidden")
                    err.body = '{"message": "pods is forbidden: User \\"x\\" cannot list"}'
                    raise err
                return types.SimpleNamespace(items=[])

            return call

    slept = []
    api = Api([503, 429])
    result = cleanup._call("list pods", lambda: api.list_namespaced_pod("ns"), slept.append)
    assert result.items == [] and api.calls == 3 and slept == [1.0, 2.0]
    with pytest.raises(cleanup.CleanupError, match=r"^list pods: 403 pods is forbidden"):
        cleanup._call("list pods", lambda: Api([403]).list_namespaced_pod("ns"), slept.append)
    gone = Api([404])
    assert cleanup._call("delete pod p", lambda: gone.delete_namespaced_pod("p"), print) is None
    with pytest.raises(ValueError, match="--job_name is empty"):
        cleanup.run(" ")
    assert cleanup.main(["--job_name=", "--namespace=ns"]) == 2
    assert capsys.readouterr().err.startswith("cleanup: error: --job_name is empty")


def test_cleanup_main_prints_what_it_deleted(monkeypatch, capsys):
    with fake_kube(command=lambda pod, kube: None, validate=False) as kube:
        _create_job(kube.api_client(), "wf-abcde", namespace="ml")
        monkeypatch.setattr(
            "elasticdl.runtime.k8s.manager.load_api_client", lambda: kube.api_client()
        )
        assert cleanup.main(["--job_name=wf-abcde", "--namespace=ml"]) == 0
        assert kube.names("pods", "ml") == []
    out = capsys.readouterr().out.strip()
    assert out == (
        "deleted 3 pods, 1 services, 1 configmaps labelled elasticdl-job-name=wf-abcde in "
        "namespace ml"
    )


def test_the_role_covers_the_master_and_the_cleanup():
    verbs = {res: set(rule["verbs"]) for rule in ROLE_RULES for res in rule["resources"]}
    master = {"create", "get", "list", "watch", "delete", "deletecollection"}
    for resource in ("pods", "services", "configmaps"):
        assert master <= verbs[resource], resource
    assert "patch" in verbs["pods"]


def test_cleanup_is_an_argo_only_python_step_in_the_runtime_image():
    for pipeline in (train_pipeline(), predict_pipeline()):
        step = pipeline.exit_step
        assert step.module == "elasticdl.steps.cleanup"
        assert not step.runs_on(Engine.LOCAL)
        assert sys.modules.get("elasticdl.steps.cleanup") is cleanup
        parser = step_parser(step)
        ctx = LocalContext(params={}, run_id="wf-1", output_path=lambda n: n)
        args = parser.parse_args([evaluate(a, ctx) for a in step.argv_args(Engine.ARGO)])
        assert args.job_name == "wf-1" and args.namespace == ""
    assert Path(cleanup.__file__).parent.name == "steps"


def test_engine_defaults_and_rules_are_checked_in_the_definition():
    import dataclasses

    from elasticdl.workflows.parameters import PipelineParam, Rule

    with pytest.raises(ValueError, match="default 'yarn' not in enum"):
        PipelineParam("im", "", default="local", enum=("local",), local_default="yarn")
    param = train_pipeline().param("instance_manager")
    assert (param.default_on(Engine.ARGO), param.default_on(Engine.LOCAL)) == (
        "kubernetes",
        "local",
    )
    with pytest.raises(PipelineError, match="unknown parameter nope"):
        dataclasses.replace(train_pipeline(), checks=(Rule(("nope",), lambda values: None),))
