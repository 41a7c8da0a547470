"""Every rendered object validates (strict CRD schemas for Argo 4.1.2 and 3.7.18, Argo's
published JSON Schema, the semantic lint, kubernetes-validate) and deserialises with the
argo-workflows SDK's models, and the validation catches what it should."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
from pathlib import Path

import pytest
from argo_workflows.api_client import ApiClient
from argo_workflows.exceptions import ApiTypeError
from argo_workflows.model.io_argoproj_workflow_v1alpha1_cron_workflow import (
    IoArgoprojWorkflowV1alpha1CronWorkflow,
)
from argo_workflows.model.io_argoproj_workflow_v1alpha1_workflow import (
    IoArgoprojWorkflowV1alpha1Workflow,
)
from argo_workflows.model.io_argoproj_workflow_v1alpha1_workflow_template import (
    IoArgoprojWorkflowV1alpha1WorkflowTemplate,
)

from elasticdl.workflows.argo import ArgoOptions, Schedule
from elasticdl.workflows.lint import lint_documents, lint_text
from elasticdl.workflows.render import SEMAPHORE, install_objects, render_objects, to_yaml
from elasticdl.workflows.schema import load_schema, published_errors, schema_errors, strict

SCHEMAS = Path(__file__).parent.parent / "data" / "argo-schemas"
PACKAGED = Path(__file__).parent.parent.parent / "workflows" / "schemas"
DIGESTS = {
    "v4.1.2/workflows": "50156b97798df0c38d1d9eb6ae37017850e79dfd3ed3636eb65f19064349539f",
    "v4.1.2/workflowtemplates": "000db338c1f7593cdca92dab907ba1c9dcc01e1c172c1b1021f883a15b6633db",
    "v4.1.2/cronworkflows": "aebd79c9073407613a2b2be8adf9acda2e0ccebb5022d6445325780d596a26fc",
    "v3.7.18/workflows": "3413dac0ded06111635c50bff0a8255c741f97043835cbceb4a7045511209bc9",
    "v3.7.18/workflowtemplates": "2d3a34fa76a70059f4c697487c0c667d827f4137db791c7349d5f2b0b068fd79",
    "v3.7.18/cronworkflows": "1c58f1f750fb7bef235f171e4a7425ef03d70e0293bca1b8e1f665d44f950b08",
}
PUBLISHED_DIGESTS = {
    "v4.1.2": "3f84c5722c48a5aa815fe69119a9375fc3635114f8046da20ede55a8596529f5",
    "v3.7.18": "7121a93025875991aa5372aa0c3f922797ba9af4899d9ed33c5b99d85aa6eb37",
}
"""sha256 of Argo's published api/jsonschema/schema.json, uncompressed (PROVENANCE.md)."""
VERSIONS = ["4", "3.7"]
SDK_MODELS = {
    "Workflow": IoArgoprojWorkflowV1alpha1Workflow,
    "WorkflowTemplate": IoArgoprojWorkflowV1alpha1WorkflowTemplate,
    "CronWorkflow": IoArgoprojWorkflowV1alpha1CronWorkflow,
}


def test_schema_copies_match_their_provenance_and_the_packaged_copies():
    for name, digest in DIGESTS.items():
        data = (SCHEMAS / f"{name}.openapiv3.json").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, name
        assert gzip.decompress((PACKAGED / f"{name}.openapiv3.json.gz").read_bytes()) == data
    for version, digest in PUBLISHED_DIGESTS.items():
        data = (SCHEMAS / version / "schema.json.gz").read_bytes()
        assert hashlib.sha256(gzip.decompress(data)).hexdigest() == digest, version
        assert (PACKAGED / version / "schema.json.gz").read_bytes() == data


def _all_objects(train_values, predict_values, options=None):
    options = options or ArgoOptions()
    schedule = Schedule(("0 3 * * *",), timezone="Europe/Berlin")
    cron_values = {**train_values, "checkpoint_steps": "100", "warm_start": "true"}
    sql_values = {
        **{k: v for k, v in train_values.items() if k != "data"},
        "sql": "SELECT a, b, c FROM t",
        "db": "postgresql+psycopg://u@db/hr",
        "db_secret": "hr-db:password",
        "label": "c",
        "work_dir": "gs://b/work",
    }
    predict_sql = {
        **{k: v for k, v in predict_values.items() if k not in ("data", "output")},
        "sql": "SELECT a, b FROM t",
        "db": "postgresql+psycopg://u@db/hr",
        "work_dir": "gs://b/work",
        "output_table": "scored",
    }
    return [
        *render_objects("train", train_values, options=options),  # with an image build
        *render_objects("train", {**train_values, "image": "zoo:1"}, options=options),
        *render_objects("train", sql_values, options=options),
        *render_objects("predict", predict_values, options=options),
        *render_objects("predict", predict_sql, options=options),
        *render_objects("evaluate", {**predict_sql, "label": "c", "eval_metrics": "AUC"}),
        *render_objects("train", cron_values, kind="cron", options=options, schedule=schedule),
        *render_objects("predict", predict_values, kind="cron", options=options, schedule=schedule),
        *install_objects(options, max_concurrent_jobs=2),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_rendered_object_validates_strictly(version, train_values, predict_values):
    options = ArgoOptions(argo_version=version, namespace="ml", semaphore=SEMAPHORE)
    objects = _all_objects(train_values, predict_values, options)
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == [
        "ConfigMap",
        "CronWorkflow",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
        "ServiceAccount",
        "Workflow",
        "WorkflowTemplate",
    ]
    problems = lint_documents(objects, argo_version=version, schema_dir=SCHEMAS)
    assert [str(p) for p in problems] == []
    # The same through YAML text, as `elasticdl lint` reads it.
    assert lint_text(to_yaml(objects), argo_version=version, schema_dir=SCHEMAS) == []


def test_rendered_argo_objects_deserialise_with_the_argo_sdk(train_values, predict_values):
    """What `get_workflow` & co. of the argo-workflows SDK do with a server's answer: its models
    check every field's type (IntOrString fields must be strings), and lose nothing."""
    client = ApiClient()
    objects = [o for o in _all_objects(train_values, predict_values) if o["kind"] in SDK_MODELS]
    assert sorted({o["kind"] for o in objects}) == sorted(SDK_MODELS)
    for obj in objects:
        model = client.deserialize(_Response(obj), (SDK_MODELS[obj["kind"]],), True)
        assert client.sanitize_for_serialization(model) == obj
    (wf,) = render_objects("train", train_values)
    wf["spec"]["templates"][1]["retryStrategy"]["limit"] = 3
    with pytest.raises(ApiTypeError, match="limit"):
        client.deserialize(_Response(wf), (IoArgoprojWorkflowV1alpha1Workflow,), True)


class _Response:
    """A server's answer as ApiClient.deserialize reads it."""

    def __init__(self, body: dict) -> None:
        self.data = json.dumps(body)


@pytest.mark.parametrize("version", VERSIONS)
def test_argo_published_schema_is_checked_as_published(version, train_values):
    """An integer in an IntOrString field passes the CRDs but not Argo's published schema, and
    `elasticdl lint` says so."""
    (wf,) = render_objects("train", train_values)
    assert published_errors(wf, version, schema_dir=SCHEMAS) == []
    bad = copy.deepcopy(wf)
    names = [t["name"] for t in bad["spec"]["templates"]]
    train = bad["spec"]["templates"][names.index("train")]
    train["activeDeadlineSeconds"] = 600
    train["retryStrategy"]["backoff"]["factor"] = 2
    assert schema_errors(bad, version, schema_dir=SCHEMAS) == []
    where = f"spec.templates[{names.index('train')}]"
    assert [p.message for p in lint_documents([bad], argo_version=version, schema_dir=SCHEMAS)] == [
        f"Argo JSON Schema: {where}.activeDeadlineSeconds: 600 is not of type 'string'",
        f"Argo JSON Schema: {where}.retryStrategy.backoff.factor: 2 is not of type 'string'",
    ]


def test_strict_mode_refuses_unknown_keys_that_lenient_mode_lets_through(train_values):
    (wf,) = render_objects("train", train_values)
    bad = copy.deepcopy(wf)
    bad["spec"]["templates"][2]["retryStategy"] = {"limit": 1}
    bad["spec"]["ttlStrategy"]["secondsAfterSuccess"] = "a day"
    for version in VERSIONS:
        lenient = schema_errors(bad, version, strict_mode=False, schema_dir=SCHEMAS)
        assert lenient == ["spec.ttlStrategy.secondsAfterSuccess: 'a day' is not of type 'integer'"]
        strict_lines = schema_errors(bad, version, schema_dir=SCHEMAS)
        assert sorted(strict_lines) == [
            "spec.templates[2]: Additional properties are not allowed "
            "('retryStategy' was unexpected)",
            *lenient,
        ]
    schema = load_schema("Workflow", "4", SCHEMAS)
    strict_schema = strict(schema)
    assert "additionalProperties" not in schema["properties"]["spec"]
    assert strict_schema["properties"]["spec"]["additionalProperties"] is False


def test_the_cron_form_per_version(train_values):
    schedule = Schedule(("0 3 * * *",))
    (cron,) = render_objects("train", train_values, kind="cron", schedule=schedule)
    legacy = copy.deepcopy(cron)
    legacy["spec"]["schedule"] = legacy["spec"].pop("schedules")[0]
    # Argo 4 removed `schedule:`; 3.7 takes either, so `schedules:` is what both accept.
    assert schema_errors(cron, "4", schema_dir=SCHEMAS) == []
    assert schema_errors(cron, "3.7", schema_dir=SCHEMAS) == []
    assert schema_errors(legacy, "3.7", schema_dir=SCHEMAS) == []
    errors = schema_errors(legacy, "4", schema_dir=SCHEMAS)
    assert any("'schedule' was unexpected" in e for e in errors)
    assert any("'schedules' is a required property" in e for e in errors)


def _lint(doc, **kwargs):
    return [p.message for p in lint_documents([doc], schema_dir=SCHEMAS, **kwargs)]


def test_semantic_lint_finds_unknown_templates_cycles_and_undeclared_parameters(train_values):
    (wf,) = render_objects("train", train_values)
    assert _lint(wf) == []
    bad = copy.deepcopy(wf)
    spec = bad["spec"]
    tasks = {t["name"]: t for t in spec["templates"][0]["dag"]["tasks"]}
    tasks["resolve-image"]["template"] = "no-such-template"
    tasks["train"]["depends"] = "build-image && sql-to-recordio && publish && ghost.Succeeded"
    tasks["publish"]["depends"] = "train.Finished"
    spec["onExit"] = "missing-handler"
    publish = next(t for t in spec["templates"] if t["name"] == "publish")
    publish["container"]["args"] += [
        "--a={{inputs.parameters.nope}}",
        "--b={{workflow.parameters.nope}}",
        "--c={{=workflow.parameters.also_nope + 'x'}}",
        "--d={{workflow.nmae}}",
        "--e={{workflow.name",
    ]
    tasks["sql-to-recordio"]["arguments"] = {
        "parameters": [{"name": "x", "value": "{{tasks.publish.outputs.parameters.image}}"}]
    }
    tasks["publish"]["arguments"]["parameters"][0]["value"] = (
        "{{tasks.train.outputs.parameters.zzz}}"
    )
    messages = _lint(bad)
    expected = [
        "unknown template 'missing-handler'",
        "unknown template 'no-such-template'",
        "depends on unknown task 'ghost'",
        "unknown task result 'Finished'",
        "dependency cycle: publish -> train -> publish",
        "undeclared input parameter 'nope'",
        "undeclared workflow parameter 'nope'",
        "undeclared workflow parameter 'also_nope'",
        "unknown workflow variable 'workflow.nmae'",
        "unbalanced '{{'",
        "uses task 'publish', which it does not depend on",
        "template 'train' has no output parameter 'zzz'",
    ]
    for fragment in expected:
        assert any(fragment in m for m in messages), (fragment, messages)


def test_lint_refuses_outputs_of_tasks_that_may_be_skipped(train_values):
    """The pattern Argo 4 has hung on: a task reading an output of a task that was skipped."""
    (wf,) = render_objects("train", train_values)
    assert _lint(wf) == []
    bad = copy.deepcopy(wf)
    tasks = {t["name"]: t for t in bad["spec"]["templates"][0]["dag"]["tasks"]}
    built = "{{tasks.build-image.outputs.parameters.image}}"
    tasks["train"]["arguments"]["parameters"][0]["value"] = built
    tasks["publish"]["arguments"]["parameters"][0]["value"] = (
        "{{=tasks['build-image'].outputs.parameters.digest}}"
    )
    # A task that runs only on a result of a skippable one is omitted with it.
    tasks["publish"]["depends"] = "train && sql-to-recordio.Succeeded"
    tasks["update-latest"]["arguments"] = {
        "parameters": [{"name": "x", "value": "{{tasks.publish.outputs.parameters.trained_model}}"}]
    }
    messages = _lint(bad)
    skipped = [m for m in messages if "may be skipped" in m]
    assert skipped == [
        "spec.templates[0].dag.tasks[4].arguments.parameters[0].value: uses an output of task "
        "'build-image', which may be skipped (it has a 'when'): Argo 4 can hang on this "
        "(argo-workflows #15837, #16793); take the value from one that always runs",
        "spec.templates[0].dag.tasks[5].arguments.parameters[0].value: uses an output of task "
        "'build-image', which may be skipped (it has a 'when'): Argo 4 can hang on this "
        "(argo-workflows #15837, #16793); take the value from one that always runs",
        "spec.templates[0].dag.tasks[6].arguments.parameters[0].value: uses an output of task "
        "'publish', which may be skipped (it depends on sql-to-recordio.Succeeded, and "
        "sql-to-recordio may be skipped): Argo 4 can hang on this (argo-workflows #15837, "
        "#16793); take the value from one that always runs",
    ]
    steps_template = {
        "name": "in-steps",
        "steps": [
            [{"name": "maybe", "template": "publish", "when": "{{workflow.parameters.sql}} != ''"}],
            [{"name": "next", "template": "cleanup", "arguments": {"parameters": [
                {"name": "x", "value": "{{steps.maybe.outputs.parameters.trained_model}}"}
            ]}}],
        ],
    }  # fmt: skip
    bad["spec"]["templates"].append(steps_template)
    messages = [m for m in _lint(bad) if "of step 'maybe'" in m]
    assert len(messages) == 1 and "may be skipped (it has a 'when')" in messages[0], messages


def test_lint_checks_crd_rules_cron_fields_and_template_references(train_values):
    (template,) = render_objects("train", {}, kind="template")
    (cron,) = render_objects("train", train_values, kind="cron", schedule=Schedule(("0 3 * * *",)))
    assert lint_documents([template, cron], schema_dir=SCHEMAS) == []
    bad_cron = copy.deepcopy(cron)
    bad_cron["metadata"]["name"] = "x" * 53
    bad_cron["spec"]["timezone"] = "Mars/Olympus"
    bad_cron["spec"]["concurrencyPolicy"] = "Sometimes"
    params = bad_cron["spec"]["workflowSpec"]["arguments"]["parameters"]
    params[:] = [p for p in params if p["name"] != "model_def"]
    params.append({"name": "num_wrokers", "value": "3"})
    params.append({"name": "instance_manager", "value": "yarn"})
    messages = [p.message for p in lint_documents([template, bad_cron], schema_dir=SCHEMAS)]
    for fragment in (
        "at most 52 characters",
        "'Mars/Olympus' is not an IANA time zone",
        "expected Allow, Forbid or Replace",
        "'num_wrokers' is not a parameter of template elasticdl-train",
        "instance_manager: 'yarn' is not one of its enum",
        "'model_def' is required by template elasticdl-train",
    ):
        assert any(fragment in m for m in messages), (fragment, messages)
    bad = copy.deepcopy(template)
    main = bad["spec"]["templates"][0]
    main["activeDeadlineSeconds"] = 10
    main["container"] = {"image": "x"}
    train = next(t for t in bad["spec"]["templates"] if t["name"] == "train")
    train["container"]["command"] = ["/bin/sh", "-c"]
    train["container"]["args"] = ["python -m elasticdl.steps.train"]
    main["dag"]["tasks"][1]["dependencies"] = ["build-image"]
    main["dag"]["tasks"][1]["depends"] = "build-image"
    messages = _lint(bad)
    for fragment in (
        "at most one template type",
        "activeDeadlineSeconds is only valid for leaf templates",
        "runs a shell with -c",
        "cannot use both 'depends' and 'dependencies'",
    ):
        assert any(fragment in m for m in messages), (fragment, messages)


def test_kubernetes_objects_validate_strictly_and_pods_keep_off_argo_labels():
    objects = [
        o
        for o in install_objects(ArgoOptions(namespace="ml"), max_concurrent_jobs=1)
        if o["kind"] != "WorkflowTemplate"
    ]
    assert lint_documents(objects, kubernetes_version="1.33") == []
    role = copy.deepcopy(objects[1])
    role["rules"][0]["verb"] = role["rules"][0].pop("verbs")
    messages = [p.message for p in lint_documents([role])]
    assert len(messages) == 1 and "verb" in messages[0]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "job-worker-0",
            "labels": {"elasticdl-job-name": "job", "workflows.argoproj.io/workflow": "w"},
        },
        "spec": {"containers": [{"name": "worker", "image": "elasticdl/elasticdl:1"}]},
    }
    messages = [p.message for p in lint_documents([pod])]
    assert messages == [
        "metadata.labels.workflows.argoproj.io/workflow: job pods must not carry Argo's labels"
    ]
    del pod["metadata"]["labels"]["workflows.argoproj.io/workflow"]
    assert lint_documents([pod]) == []


def test_lint_reports_bad_yaml_and_non_objects_in_one_line():
    assert [str(p) for p in lint_text("a: [1", source="x.yaml")][0].startswith(
        "x.yaml: not valid YAML"
    )
    assert [p.message for p in lint_text("- 1\n", source="x.yaml")] == [
        "not a Kubernetes object (no apiVersion or kind)"
    ]
    assert [p.message for p in lint_text("", source="x.yaml")] == ["no YAML documents"]
