"""The Argo objects built from the definitions: DAG, robustness settings, images, cron, RBAC."""

from __future__ import annotations

import ast
import re
from typing import Any

import pytest

from elasticdl.workflows.argo import ArgoOptions, Schedule
from elasticdl.workflows.render import SEMAPHORE, install_objects, render_objects
from elasticdl.workflows.retry import INFRA_EXPRESSION


def _templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = obj["spec"]
    return {t["name"]: t for t in spec["templates"]}


def _tasks(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in _templates(obj)["main"]["dag"]["tasks"]}


def test_train_workflow_dag_order_conditions_and_images(train_values):
    (wf,) = render_objects("train", train_values)
    assert wf["kind"] == "Workflow" and wf["metadata"]["generateName"] == "elasticdl-train-"
    tasks = _tasks(wf)
    assert list(tasks) == [
        "resolve-image",
        "build-image",
        "sql-to-recordio",
        "sql-to-recordio-validation",
        "train",
        "publish",
        "update-latest",
    ]
    assert "when" not in tasks["resolve-image"]
    assert tasks["build-image"]["when"] == "{{=workflow.parameters.image == ''}}"
    assert tasks["sql-to-recordio"]["when"] == "{{=workflow.parameters.sql != ''}}"
    validation = tasks["sql-to-recordio-validation"]["when"]
    assert validation == "{{=workflow.parameters.validation_sql != ''}}"
    assert tasks["update-latest"]["when"] == "{{=workflow.parameters.versioned == 'true'}}"
    assert tasks["build-image"]["depends"] == "resolve-image"
    assert tasks["train"]["depends"] == (
        "resolve-image && build-image && sql-to-recordio && sql-to-recordio-validation"
    )
    assert tasks["publish"]["depends"] == "train"
    assert tasks["update-latest"]["depends"] == "publish"
    # The job image: resolve-image's (always runs), never the skippable build's output.
    resolved = {"resolve_image_image": "{{tasks.resolve-image.outputs.parameters.image}}"}
    for name in ("build-image", "train", "publish"):
        arguments = {p["name"]: p["value"] for p in tasks[name]["arguments"]["parameters"]}
        assert arguments == resolved, name
    templates = _templates(wf)
    assert templates["resolve-image"]["container"]["args"] == [
        "image",
        "--image={{workflow.parameters.image}}",
        "--repository={{workflow.parameters.image_repository}}",
        "--tag={{workflow.name}}",
        "--image_file=/tmp/elasticdl/outputs/image",
    ]
    assert templates["train"]["container"]["image"] == "{{inputs.parameters.resolve_image_image}}"
    assert (
        "--image={{inputs.parameters.resolve_image_image}}"
        in (templates["publish"]["container"]["args"])
    )
    assert templates["train"]["container"]["command"] == ["python", "-m", "elasticdl.steps.train"]
    assert templates["sql-to-recordio"]["container"]["image"] == (
        "{{workflow.parameters.elasticdl_image}}"
    )


def test_kaniko_step_pushes_by_run_name_and_reports_the_digest(train_values):
    (wf,) = render_objects("train", train_values)
    kaniko = _templates(wf)["build-image"]
    container = kaniko["container"]
    assert container["image"] == "{{workflow.parameters.kaniko_image}}"
    assert container["command"] == ["/kaniko/executor"]
    assert container["args"] == [
        "--context={{workflow.parameters.zoo_context}}",
        "--dockerfile={{workflow.parameters.dockerfile}}",
        "--destination={{inputs.parameters.resolve_image_image}}",
        "--digest-file=/tmp/elasticdl/outputs/digest",
        "--image-name-with-digest-file=/tmp/elasticdl/outputs/image",
        "--cache=true",
        "--cache-repo={{workflow.parameters.cache_repo}}",
    ]
    outputs = {p["name"]: p["valueFrom"]["path"] for p in kaniko["outputs"]["parameters"]}
    assert outputs == {
        "digest": "/tmp/elasticdl/outputs/digest",
        "image": "/tmp/elasticdl/outputs/image",
    }
    volumes = {v["name"]: v for v in kaniko["volumes"]}
    assert volumes["docker-config"]["secret"] == {
        "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
        "optional": True,
        "secretName": "{{workflow.parameters.docker_config_secret}}",
    }
    assert volumes["outputs"] == {"emptyDir": {}, "name": "outputs"}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"docker-config": "/kaniko/.docker", "outputs": "/tmp/elasticdl/outputs"}


def test_robustness_settings(train_values):
    options = ArgoOptions(deadline_seconds=7200, job_deadline_seconds=3600, retry_limit=2)
    (wf,) = render_objects("train", train_values, options=options)
    spec = wf["spec"]
    assert spec["activeDeadlineSeconds"] == 7200
    assert spec["podGC"] == {"strategy": "OnPodSuccess"}
    assert spec["ttlStrategy"] == {"secondsAfterFailure": 604800, "secondsAfterSuccess": 86400}
    assert spec["onExit"] == "cleanup"
    assert "serviceAccountName" not in spec  # the namespace's default (test_fresh_namespace)
    templates = _templates(wf)
    assert templates["train"]["activeDeadlineSeconds"] == "3600"  # IntOrString: a string
    assert templates["train"]["container"]["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"}
    }
    for name, template in templates.items():
        if name == "main":
            assert "retryStrategy" not in template and "activeDeadlineSeconds" not in template
            continue
        assert template["retryStrategy"] == {
            "backoff": {"duration": "30s", "factor": "2"},
            "expression": INFRA_EXPRESSION,
            "limit": "2",
            "retryPolicy": "Always",
        }
    # The exit handler derives the job's label from the same job name the master gets (the
    # workflow's name), with the master's own function (see steps/cleanup.py).
    cleanup = templates["cleanup"]["container"]
    assert cleanup["command"] == ["python", "-m", "elasticdl.steps.cleanup"]
    assert cleanup["image"] == "{{workflow.parameters.elasticdl_image}}"
    assert cleanup["args"] == ["--job_name={{workflow.name}}", "--namespace={{workflow.namespace}}"]
    master = templates["train"]["container"]["args"]
    assert "--job_name={{workflow.name}}" in master
    assert "--pod_namespace={{workflow.namespace}}" in master


def _evaluate(node: ast.AST) -> Any:
    """A tiny evaluator for the boolean expression (constants, lists, and/or/not, ==, !=, in)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List):
        return [_evaluate(e) for e in node.elts]
    if isinstance(node, ast.BoolOp):
        values = [_evaluate(v) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _evaluate(node.left), _evaluate(node.comparators[0])
        op = node.ops[0]
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
        if isinstance(op, ast.In):
            return left in right
    raise ValueError(f"unexpected expression part {ast.dump(node)}")


def test_retry_expression_retries_infrastructure_failures_only():
    """The expression, evaluated the way Argo's expr does, on the attempts Argo reports."""

    def retried(status: str, exit_code: str, message: str) -> bool:
        expr = INFRA_EXPRESSION
        expr = expr.replace("lastRetry.status", repr(status))
        expr = expr.replace("asInt(lastRetry.exitCode)", exit_code)
        regex = re.search(r"matches '([^']*)'", expr).group(1)
        expr = expr.replace(
            f"lastRetry.message matches '{regex}'", repr(bool(re.search(regex, message)))
        )
        expr = expr.replace("lastRetry.message contains 'OOMKilled'", repr("OOMKilled" in message))
        expr = expr.replace("||", " or ").replace("&&", " and ").replace("!(", " not (")
        return _evaluate(ast.parse(expr, mode="eval").body)

    assert retried("Error", "-1", "pod deleted during operation")
    assert retried("Failed", "-1", "The node was low on resource: memory. Container main ...")
    assert retried("Failed", "143", "Pod was terminated in response to imminent node shutdown.")
    assert retried("Failed", "137", "main: Error (exit code 137)")
    assert retried("Failed", "-1", "Preempted in order to admit critical pod")
    assert not retried("Failed", "137", "main: OOMKilled (exit code 137)")
    assert not retried("Failed", "1", "main: Error (exit code 1)")
    assert not retried("Failed", "2", "main: Error (exit code 2)")


def test_templates_describe_parameters_and_list_choices():
    (template,) = render_objects("train", {"num_workers": "4"}, kind="template")
    assert template["kind"] == "WorkflowTemplate"
    assert template["metadata"]["name"] == "elasticdl-train"
    params = {p["name"]: p for p in template["spec"]["arguments"]["parameters"]}
    assert all(p["description"] for p in params.values())
    assert params["num_workers"]["value"] == "4"
    assert "value" not in params["model_def"] and "value" not in params["output"]
    assert params["versioned"]["enum"] == ["false", "true"]
    assert params["instance_manager"]["enum"] == ["local", "kubernetes"]
    assert params["instance_manager"]["value"] == "kubernetes"
    assert params["worker_resource_request"]["value"] == "cpu=1,memory=4096Mi"
    assert params["image_pull_policy"]["enum"] == ["IfNotPresent", "Always", "Never"]
    assert "enum" not in params["data"]
    (predict,) = render_objects("predict", {}, kind="template")
    assert predict["metadata"]["name"] == "elasticdl-predict"
    params = {p["name"]: p for p in predict["spec"]["arguments"]["parameters"]}
    assert params["output_format"]["enum"] == ["recordio", "csv"]


def test_predict_workflow_runs_in_the_trained_models_image(predict_values):
    (wf,) = render_objects("predict", predict_values)
    tasks = _tasks(wf)
    assert list(tasks) == ["sql-to-recordio", "resolve-image", "predict", "write-back"]
    assert tasks["predict"]["depends"] == "sql-to-recordio && resolve-image"
    assert tasks["predict"]["arguments"]["parameters"] == [
        {"name": "resolve_image_image", "value": "{{tasks.resolve-image.outputs.parameters.image}}"}
    ]
    templates = _templates(wf)
    assert templates["predict"]["container"]["image"] == "{{inputs.parameters.resolve_image_image}}"
    assert templates["resolve-image"]["container"]["args"][0] == "image"
    assert tasks["write-back"]["when"] == "{{=workflow.parameters.output_table != ''}}"


def test_cron_runs_the_template_versioned_without_overlap(train_values):
    schedule = Schedule(("0 3 * * *", "30 15 * * 1-5"), timezone="Europe/Berlin")
    values = {**train_values, "checkpoint_steps": "50", "warm_start": "true"}
    (cron,) = render_objects("train", values, kind="cron", schedule=schedule)
    spec = cron["spec"]
    assert cron["kind"] == "CronWorkflow" and cron["metadata"]["name"] == "elasticdl-train-cron"
    assert spec["schedules"] == ["0 3 * * *", "30 15 * * 1-5"] and "schedule" not in spec
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["timezone"] == "Europe/Berlin"
    assert spec["startingDeadlineSeconds"] == 600
    assert spec["workflowSpec"]["workflowTemplateRef"] == {"name": "elasticdl-train"}
    args = {p["name"]: p["value"] for p in spec["workflowSpec"]["arguments"]["parameters"]}
    assert args["versioned"] == "true" and args["warm_start"] == "true"
    assert "num_workers" not in args  # defaults stay the template's
    with pytest.raises(ValueError, match="needs --schedule"):
        render_objects("train", train_values, kind="cron", schedule=Schedule(()))
    with pytest.raises(ValueError, match="leave --versioned out"):
        render_objects(
            "train", {**train_values, "versioned": "false"}, kind="cron", schedule=schedule
        )


def test_versioned_runs_write_under_runs_and_warm_start_reads_latest(train_values):
    (wf,) = render_objects("train", train_values)
    args = _templates(wf)["train"]["container"]["args"]
    assert (
        "--output={{=workflow.parameters.versioned == 'true' ? workflow.parameters.output"
        " + '/runs/' + workflow.name : workflow.parameters.output}}"
    ) in args
    assert (
        "--init_from_latest={{=workflow.parameters.warm_start == 'true' ? "
        "workflow.parameters.output + '/LATEST' : ''}}"
    ) in args


def test_semaphore_caps_concurrent_runs(train_values):
    options = ArgoOptions(semaphore=SEMAPHORE)
    (wf,) = render_objects("train", train_values, options=options)
    assert wf["spec"]["synchronization"] == {
        "semaphores": [{"configMapKeyRef": {"key": "jobs", "name": "elasticdl-limits"}}]
    }
    objects = install_objects(max_concurrent_jobs=3)
    configmap = objects[-1]
    assert configmap["kind"] == "ConfigMap" and configmap["data"] == {"jobs": "3"}
    assert all("synchronization" in o["spec"] for o in objects[:2])


def test_install_has_both_templates_and_least_privilege_rbac():
    objects = install_objects(ArgoOptions(namespace="ml"))
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert kinds == [
        ("WorkflowTemplate", "elasticdl-train"),
        ("WorkflowTemplate", "elasticdl-predict"),
        ("WorkflowTemplate", "elasticdl-evaluate"),
        ("ServiceAccount", "elasticdl"),
        ("Role", "elasticdl"),
        ("RoleBinding", "elasticdl"),
        ("NetworkPolicy", "elasticdl-job-pods"),
    ]
    assert all(o["metadata"]["namespace"] == "ml" for o in objects)
    role = objects[4]
    rules = {tuple(r["resources"]): set(r["verbs"]) for r in role["rules"]}
    assert rules == {
        ("pods",): {"create", "get", "list", "watch", "delete", "deletecollection", "patch"},
        ("services", "configmaps"): {
            "create",
            "get",
            "list",
            "watch",
            "delete",
            "deletecollection",
        },
        ("secrets",): {"create", "delete", "deletecollection"},  # the job's secret; no reads
        ("networkpolicies",): {"create", "delete", "deletecollection"},  # the job's own
        ("workflowtaskresults",): {"create", "patch"},
    }
    assert "ClusterRole" not in str(objects)
    train = next(o for o in objects if o["metadata"]["name"] == "elasticdl-train")
    (master,) = [t for t in train["spec"]["templates"] if t["name"] == "train"]
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef") for e in master["container"]["env"]}
    assert env["MY_POD_IP"] == {"fieldPath": "status.podIP"} and "MY_POD_UID" in env
    binding = objects[5]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "elasticdl", "namespace": "ml"}
    ]


def _walk(node: Any, path: str = ""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}[{i}]")
    yield path, node


@pytest.mark.parametrize("kind", ["workflow", "template"])
@pytest.mark.parametrize("name", ["train", "predict"])
def test_no_shell_no_input_artifacts_no_argo_labels(name, kind, train_values, predict_values):
    values = train_values if name == "train" else predict_values
    (obj,) = render_objects(name, values if kind == "workflow" else {}, kind=kind)
    for template in obj["spec"]["templates"]:
        assert "artifacts" not in template.get("inputs", {}), "data is passed as URLs"
        container = template.get("container")
        if container:
            argv = container["command"] + container.get("args", [])
            assert argv[0].rsplit("/", 1)[-1] not in {"sh", "bash", "ash", "dash"}
            assert "-c" not in container["command"]
            assert all(isinstance(a, str) for a in argv)
    for path, node in _walk(obj):
        if path.endswith(".labels") and isinstance(node, dict):
            assert not any(k.startswith("workflows.argoproj.io/") for k in node)
