"""Hostile parameter values: they must not break the YAML, become Argo template expressions,
or reach a shell.

Policy (see `values.check_user_value`): a value is data. It enters an object only as the value
of a workflow parameter; templates refer to it as ``{{workflow.parameters.x}}`` (or as a
variable inside an expr expression), each argv element is one ``--flag=value`` and no container
runs a shell. Argo has no escape for ``{{`` and re-scans substituted text in its second pass, so
a value containing ``{{`` is refused with one clear line.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from elasticdl.workflows import PipelineError, run_local, train_pipeline
from elasticdl.workflows.argo import Schedule
from elasticdl.workflows.definitions import KUBERNETES_FLAGS
from elasticdl.workflows.lint import lint_documents
from elasticdl.workflows.local import step_parser
from elasticdl.workflows.render import render_objects, to_yaml
from elasticdl.workflows.steps import Engine
from elasticdl.workflows.values import LocalContext, evaluate

HOSTILE = [
    'it\'s a "quoted" value',
    "line one\nline two\r\n\tindented",
    "$(rm -rf /); `id` && echo pwned | tee /etc/passwd > /dev/null &",
    "--help",
    "-rf",
    "{'hidden_units': [10, 20]} }} {x} { {",
    "key: value # not a comment\n- not: a list\n&anchor *alias !!python/object:os.system",
    "null",
    "~",
    "  spaced  ",
    "ünïcødé ✓ \u2028 \x85",
    "%s %(name)s ${HOME} $HOME \\n \\",
]


def _values(marker: str, hostile: str) -> dict[str, str]:
    return {
        "model_def": "regressor.DNN",
        "params": f"{marker}{hostile}",
        "data": f"gs://b/{marker}{hostile}",
        "output": f"gs://b/models/{marker}",
        "image": f"reg.example/zoo@sha256:{marker}",
        "label": "",
    }


def _strings(node: Any, path: str = "") -> list[tuple[str, str]]:
    if isinstance(node, str):
        return [(path, node)]
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in _strings(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [x for i, v in enumerate(node) for x in _strings(v, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("index", range(len(HOSTILE)))
@pytest.mark.parametrize("kind", ["workflow", "template", "cron"])
def test_hostile_values_stay_data(kind, index):
    hostile = HOSTILE[index]
    marker = f"MARK{index}X"
    schedule = Schedule(("0 3 * * *",)) if kind == "cron" else None
    objects = render_objects("train", _values(marker, hostile), kind=kind, schedule=schedule)
    text = to_yaml(objects)
    # The YAML is intact: it loads back to the very same objects, values byte for byte.
    assert list(yaml.safe_load_all(text)) == objects
    (obj,) = objects
    spec = obj["spec"]["workflowSpec"] if kind == "cron" else obj["spec"]
    params = {p["name"]: p.get("value") for p in spec["arguments"]["parameters"]}
    assert params["params"] == f"{marker}{hostile}"
    assert params["data"] == f"gs://b/{marker}{hostile}"
    # ... and it appears nowhere but as a parameter's value: not in an argv element, an
    # image, a `when` or an expression, where Argo or a shell could read it as code.
    for path, value in _strings(obj):
        if marker in value:
            assert re.fullmatch(r".*arguments\.parameters\[\d+\]\.value", path), path
    assert lint_documents(objects) == []


def test_argv_elements_take_the_whole_value_as_one_argument():
    """After Argo's (single) substitution each element is `--flag=<value>`, and the step's own
    parser reads the value back exactly, whatever it starts with or contains."""
    pipeline = train_pipeline()
    hostile = "--output=/etc; rm -rf / #\n$(id)"
    values = pipeline.resolve(
        {"model_def": "m", "params": hostile, "data": "-d", "output": "o"}, engine=Engine.LOCAL
    )
    ctx = LocalContext(params=values, run_id="run-1", output_path=lambda n: f"/tmp/{n}")
    argv = [evaluate(a, ctx) for a in pipeline.step("train").args]
    args = step_parser(pipeline.step("train")).parse_args(argv)
    assert args.params == hostile and args.training_data == "-d" and args.output == "o"
    (wf,) = render_objects(
        "train",
        {"model_def": "m", "params": hostile, "data": "-d", "output": "o", "image": "i"},
    )
    train = next(t for t in wf["spec"]["templates"] if t["name"] == "train")
    assert "--params={{workflow.parameters.params}}" in train["container"]["args"]


@pytest.mark.parametrize(
    "value",
    [
        "{{workflow.name}}",
        "{{inputs.parameters.image}}",
        "{{=sprig.env('HOME')}}",
        "x{{ y }}",
        "ok text {{",
    ],
)
def test_values_with_argo_tags_are_refused_in_one_line(value):
    for kind in ("workflow", "template", "cron"):
        schedule = Schedule(("0 3 * * *",)) if kind == "cron" else None
        with pytest.raises(ValueError, match=r"--params: the value contains '\{\{'") as err:
            render_objects(
                "train", _values("M", "") | {"params": value}, kind=kind, schedule=schedule
            )
        assert "\n" not in str(err.value)
    with pytest.raises(PipelineError, match="would evaluate as a template expression"):
        run_local(train_pipeline(), {"model_def": "m", "data": value, "output": "o"})


def test_no_container_runs_a_shell():
    for name in ("train", "predict"):
        (obj,) = render_objects(name, {}, kind="template")
        for template in obj["spec"]["templates"]:
            container = template.get("container")
            if container:
                assert container["command"][0] in {"python", "/kaniko/executor"}


# -- the Kubernetes parameters (Argo only) -------------------------------------------------------

KUBERNETES_HOSTILE = {
    # Values the master's parsers accept, with shell and YAML syntax inside.
    # (Object names, toleration keys and values are checked as Kubernetes names: the hostile
    # text rides in the mount paths, which are free text.)
    "volume": "claim_name=data,mount_path=/data/`id` && echo pwned $(rm -rf /);"
    "secret=s,mount_path=/s --help $HOME #c x'y\"z\n- c: d",
    "tolerations": "dedicated=ml:NoSchedule;nvidia.com/gpu:NoExecute",
}
KUBERNETES_PARAMS = KUBERNETES_FLAGS


@pytest.mark.parametrize("kind", ["workflow", "template", "cron"])
def test_hostile_kubernetes_values_stay_data(kind):
    schedule = Schedule(("0 3 * * *",)) if kind == "cron" else None
    values = {**_values("M", ""), **KUBERNETES_HOSTILE}
    objects = render_objects("train", values, kind=kind, schedule=schedule)
    assert list(yaml.safe_load_all(to_yaml(objects))) == objects
    (obj,) = objects
    spec = obj["spec"]["workflowSpec"] if kind == "cron" else obj["spec"]
    params = {p["name"]: p.get("value") for p in spec["arguments"]["parameters"]}
    for name, hostile in KUBERNETES_HOSTILE.items():
        assert params[name] == hostile
    for path, value in _strings(obj):
        if "echo pwned" in value or "--help $HOME" in value:
            assert re.fullmatch(r".*arguments\.parameters\[\d+\]\.value", path), path
    assert lint_documents(objects) == []


def test_the_train_step_reads_kubernetes_values_back_exactly():
    pipeline = train_pipeline()
    given = {"model_def": "m", "data": "d", "output": "o", "image": "-i", **KUBERNETES_HOSTILE}
    values = pipeline.resolve(given, engine=Engine.ARGO)
    ctx = LocalContext(
        params=values,
        run_id="run-1",
        output_path=lambda n: f"/tmp/{n}",
        outputs={"resolve-image": {"image": "-i"}},  # what resolve-image makes of --image
    )
    argv = [evaluate(a, ctx) for a in pipeline.step("train").argv_args(Engine.ARGO)]
    args = step_parser(pipeline.step("train")).parse_args(argv)
    assert args.volume == KUBERNETES_HOSTILE["volume"]
    assert args.tolerations == KUBERNETES_HOSTILE["tolerations"] and args.pod_image == "-i"


@pytest.mark.parametrize("name", KUBERNETES_PARAMS)
def test_kubernetes_values_with_argo_tags_are_refused_in_one_line(name):
    for kind in ("workflow", "template", "cron"):
        schedule = Schedule(("0 3 * * *",)) if kind == "cron" else None
        values = _values("M", "") | {name: "cpu=1,memory={{workflow.name}}"}
        with pytest.raises(ValueError, match=rf"--{name}: the value contains '\{{\{{'") as err:
            render_objects("train", values, kind=kind, schedule=schedule)
        assert "\n" not in str(err.value)
