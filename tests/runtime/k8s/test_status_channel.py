"""`elasticdl status JOB` on Kubernetes: `request_status` and the master's ConfigMap listener
answering with the live report, through the official client and the loopback fake API server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fake_kube import FakeKube, fake_kube
from kubernetes import client

from elasticdl import cli
from elasticdl.runtime.k8s.scale import ANNOTATION_RESIZABLE, ConfigMapScaleListener
from elasticdl.runtime.k8s.status_channel import (
    ANNOTATION_STATUS,
    StatusRequestError,
    request_status,
)
from elasticdl.runtime.master.scaling import ScaleInbox

JOB = "train-job-7"
CONFIG_MAP = "train-job-7-config"


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    with fake_kube() as fake:
        fake.create(
            "configmaps",
            "team-a",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CONFIG_MAP, "annotations": {ANNOTATION_RESIZABLE: "true"}},
                "data": {"job.json": "{}"},
            },
        )
        yield fake


@pytest.fixture
def api(kube: FakeKube) -> client.CoreV1Api:
    return client.CoreV1Api(kube.api_client())


class LiveJob:
    """A master's live report that changes as the job goes (each answer is the current one)."""

    def __init__(self) -> None:
        self.records = 0

    def report(self) -> dict[str, Any]:
        self.records += 128
        return {"job_name": JOB, "state": "training", "records": {"trained": self.records}}


@pytest.fixture
def live(api: client.CoreV1Api) -> Iterator[LiveJob]:
    job = LiveJob()
    listener = ConfigMapScaleListener(
        api, "team-a", CONFIG_MAP, ScaleInbox(), poll_s=0.1, status=job.report
    ).start()
    yield job
    listener.stop()


def test_each_request_gets_the_report_of_that_moment(api, kube, live):
    first = request_status(api, "team-a", JOB, wait_s=10)
    second = request_status(api, "team-a", JOB, wait_s=10)
    assert first == {"job_name": JOB, "state": "training", "records": {"trained": 128}}
    assert second["records"] == {"trained": 256}, "a new request, a fresh report"
    written = json.loads(
        kube.get("configmaps", CONFIG_MAP, "team-a")["metadata"]["annotations"][ANNOTATION_STATUS]
    )
    assert written["status"] == second


def test_a_job_that_does_not_answer(api):
    unmark = {"metadata": {"annotations": {ANNOTATION_RESIZABLE: None}}}
    api.patch_namespaced_config_map(CONFIG_MAP, "team-a", unmark)
    with pytest.raises(StatusRequestError, match="does not answer status requests"):
        request_status(api, "team-a", JOB, wait_s=1)
    with pytest.raises(StatusRequestError, match="no running job 'other'"):
        request_status(api, "team-a", "other", wait_s=1)


def test_no_answer_in_time(api):
    with pytest.raises(StatusRequestError, match="did not answer within 1 s"):
        request_status(api, "team-a", JOB, wait_s=1)


def test_the_cli_on_kubernetes(kube, live, tmp_path, monkeypatch, capsys):
    host: Any = kube.api_client().configuration.host
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": host}}],
                "users": [{"name": "fake", "user": {}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                "current-context": "fake",
            }
        )
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    args = ["status", JOB, "--kubeconfig", str(kubeconfig), "--namespace", "team-a", "--json"]
    assert cli.main(args) == 0
    assert json.loads(capsys.readouterr().out)["records"] == {"trained": 128}
    assert cli.main(["status", "--kubeconfig", str(kubeconfig)]) == 2
    assert "give the job's name (Kubernetes) or --master" in capsys.readouterr().err
