"""`elasticdl render` and `elasticdl lint` through their argparse definitions."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
import yaml

from elasticdl.render_command import add_lint_command, add_render_command, run

SCHEMAS = Path(__file__).parent.parent / "data" / "argo-schemas"
GOLDEN = Path(__file__).parent.parent / "data" / "golden"
TRAIN = [
    "--model_def=regressor.DNN",
    "--data=gs://b/train/*.recordio",
    "--output=gs://b/models/m",
    "--image=gcr.io/p/zoo@sha256:" + "c" * 64,
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elasticdl")
    commands = parser.add_subparsers(dest="command", required=True)
    add_render_command(commands)
    add_lint_command(commands)
    return parser


def elasticdl(capsys, *argv: str, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    status = run(_parser().parse_args(list(argv)))
    out, err = capsys.readouterr()
    return status, out, err


def test_render_each_kind(capsys, monkeypatch):
    monkeypatch.setenv("ELASTICDL_ARGO_SCHEMAS", str(SCHEMAS))
    status, out, err = elasticdl(capsys, "render", "train", *TRAIN, "--num_workers=3")
    assert (status, err) == (0, "")
    (wf,) = yaml.safe_load_all(out)
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert wf["kind"] == "Workflow" and params["num_workers"] == "3"
    status, out, _ = elasticdl(
        capsys,
        "render",
        "train",
        *TRAIN,
        "--kind=cron",
        "--schedule=0 3 * * *",
        "--schedule=@daily",
        "--timezone=Asia/Tokyo",
        "--warm_start=true",
        "--checkpoint_steps=100",
        "--name=nightly",
        "--argo_version=3.7",
    )
    (cron,) = yaml.safe_load_all(out)
    assert status == 0 and cron["metadata"]["name"] == "nightly"
    assert cron["spec"]["schedules"] == ["0 3 * * *", "@daily"]
    assert cron["spec"]["timezone"] == "Asia/Tokyo"
    status, out, _ = elasticdl(capsys, "render", "predict", "--kind=template", "--semaphore")
    (template,) = yaml.safe_load_all(out)
    assert template["metadata"]["name"] == "elasticdl-predict"
    assert "synchronization" in template["spec"]
    status, out, _ = elasticdl(
        capsys,
        "render",
        "install",
        "--namespace=ml",
        "--max_concurrent_jobs=2",
        "--no_output_artifact",
    )
    kinds = [d["kind"] for d in yaml.safe_load_all(out)]
    assert status == 0
    assert kinds == ["WorkflowTemplate"] * 3 + [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
        "ConfigMap",
    ]
    assert "artifacts" not in out
    # What render prints, lint accepts (from stdin, both Argo versions).
    status, lint_out, lint_err = elasticdl(
        capsys, "lint", "-", "--argo_version=all", stdin=out, monkeypatch=monkeypatch
    )
    assert (status, lint_out) == (0, "") and "no problems" in lint_err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["render", "train", "--data=d"], "missing required --model_def, --output"),
        ([*["render", "train"], *TRAIN, "--params={{workflow.name}}"], "contains '{{'"),
        ([*["render", "train"], *TRAIN, "--kind=cron"], "needs --schedule"),
        ([*["render", "train"], *TRAIN, "--schedule=@daily"], "applies to --kind cron only"),
        (
            [*["render", "train"], *TRAIN, "--kind=cron", "--schedule=@daily", "--timezone=Moon/X"],
            "'Moon/X' is not an IANA time zone",
        ),
        ([*["render", "train"], *TRAIN, "--deadline_seconds=0"], "--deadline_seconds must be > 0"),
        (["render", "install", "--max_concurrent_jobs=0"], "must be >= 1"),
        (
            [*["render", "train"], *TRAIN, "--data=data/train"],
            "--data 'data/train': the worker pods cannot reach a local path",
        ),
        (
            ["render", "predict", "--trained_model=gs://b/m", "--data=gs://b/d", "--output=/tmp/p"],
            "--output '/tmp/p': the worker pods cannot reach a local path",
        ),
    ],
)
def test_render_errors_are_one_line(capsys, argv, message):
    status, out, err = elasticdl(capsys, *argv)
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err
    assert err.startswith("elasticdl render: error: ")


def test_a_local_path_on_a_shared_volume_is_taken(capsys):
    volume = "--volume=claim_name=data,mount_path=/mnt/data"
    status, out, err = elasticdl(
        capsys,
        "render",
        "train",
        *TRAIN[:1],
        *TRAIN[3:],
        volume,
        "--data=/mnt/data/train",
        "--output=/mnt/data/models/m",
    )
    assert (status, err) == (0, ""), err
    assert "/mnt/data/train" in out


def test_lint_prints_one_line_per_problem_and_exits_1(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ELASTICDL_ARGO_SCHEMAS", str(SCHEMAS))
    status, _, _ = elasticdl(capsys, "lint", *map(str, sorted(GOLDEN.glob("*.yaml"))))
    assert status == 0
    text = (GOLDEN / "workflow_train.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        text.replace("onExit: cleanup", "onExit: clean-up").replace(
            "retryPolicy: Always", "retryPolicy: Sometimes"
        )
    )
    status, out, err = elasticdl(capsys, "lint", str(bad))
    lines = out.strip().splitlines()
    assert status == 1 and "problem(s)" in err
    assert any("spec.onExit: unknown template 'clean-up'" in line for line in lines)
    assert any("retryPolicy: 'Sometimes' is not one of" in line for line in lines)
    assert all(
        line.startswith(f"{bad}: document 1 (Workflow elasticdl-train-): ") for line in lines
    )
    status, out, _ = elasticdl(capsys, "lint", str(tmp_path / "missing.yaml"))
    assert status == 1 and "cannot read" in out


def test_render_validates_what_it_prints_and_refuses_passwords(capsys):
    status, out, err = elasticdl(capsys, "render", "train", *TRAIN, "--master_cpu=two")
    assert status == 2 and "--master_cpu 'two' is not a Kubernetes quantity" in err
    status, out, err = elasticdl(
        capsys, "render", "train", *TRAIN, "--kind=cron", "--schedule=@daily", "--name=Nightly_Run"
    )
    assert status == 2 and out == ""
    assert "does not validate" in err and "'Nightly_Run' is not a valid Kubernetes name" in err
    status, out, err = elasticdl(
        capsys,
        "render",
        "predict",
        "--sql=SELECT a FROM t",
        "--db=postgresql://u:secret@h/db",
        "--work_dir=gs://b/w",
        "--trained_model=gs://b/m",
        "--output_table=t2",
    )
    assert status == 2 and out == "" and "--db_secret NAME:KEY" in err and "secret@" not in err


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        ("--service_account", "x{{workflow.name}}", "contains '{{'"),
        ("--service_account", "Bad_Account", "is not a ServiceAccount name"),
        ("--service_account", "a" * 254, "is not a ServiceAccount name"),
        ("--namespace", "ns{{=sprig.env('HOME')}}", "contains '{{'"),
        ("--namespace", "team.a", "is not a namespace name"),
        ("--namespace", "a" * 64, "is not a namespace name"),
    ],
)
@pytest.mark.parametrize("what", [["train", *TRAIN], ["install"]])
def test_render_checks_the_service_account_and_namespace(capsys, what, flag, value, expected):
    status, out, err = elasticdl(capsys, "render", *what, f"{flag}={value}")
    assert (status, out) == (2, "") and expected in err and err.count("\n") == 1


def test_render_takes_a_valid_service_account_and_namespace(capsys):
    argv = ["render", "train", *TRAIN, "--service_account=ml.jobs", "--namespace=team-a"]
    status, out, err = elasticdl(capsys, *argv)
    (doc,) = yaml.safe_load_all(out)
    assert status == 0 and doc["spec"]["serviceAccountName"] == "ml.jobs"
    assert doc["metadata"]["namespace"] == "team-a"
