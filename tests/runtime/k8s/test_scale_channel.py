"""Resizing a job on Kubernetes: `request_scale` (what `elasticdl scale JOB` does) and the
master's `ConfigMapScaleListener`, through the official client and the loopback fake API
server. The job loop is played by this test: it takes the requests from the inbox and answers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fake_kube import FakeKube, fake_kube
from kubernetes import client

from elasticdl import cli
from elasticdl.runtime.k8s.scale import (
    ANNOTATION_ANSWER,
    ANNOTATION_REQUEST,
    ANNOTATION_RESIZABLE,
    ANNOTATION_WORKERS,
    ConfigMapScaleListener,
    ScaleRequestError,
    config_map_of,
    request_scale,
)
from elasticdl.runtime.master.scaling import ScaleInbox, ScaleRefused

JOB = "Train-Job_7"
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
                "metadata": {
                    "name": CONFIG_MAP,
                    "labels": {"elasticdl-job-name": "train-job-7"},
                    "annotations": {ANNOTATION_RESIZABLE: "true"},
                },
                "data": {"job.json": "{}"},
            },
        )
        yield fake


@pytest.fixture
def api(kube: FakeKube) -> client.CoreV1Api:
    return client.CoreV1Api(kube.api_client())


class JobLoop:
    """Answers what reaches the inbox as a job with `min_workers` would."""

    def __init__(self, inbox: ScaleInbox, min_workers: int = 2) -> None:
        self.inbox = inbox
        self.min_workers = min_workers
        self.target = 2
        self.seen: list[tuple[int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            for request in self.inbox.take():
                self.seen.append((request.workers, request.source))
                if request.workers < self.min_workers:
                    request.answer(error=f"cannot scale to {request.workers} worker(s): below")
                else:
                    before, self.target = self.target, request.workers
                    request.answer(f"scaled from {before} to {request.workers} worker(s)")

    def stop(self) -> None:
        self._stop.set()


@pytest.fixture
def listening(api: client.CoreV1Api) -> Iterator[tuple[ConfigMapScaleListener, JobLoop]]:
    inbox = ScaleInbox()
    loop = JobLoop(inbox)
    listener = ConfigMapScaleListener(api, "team-a", CONFIG_MAP, inbox, poll_s=0.1).start()
    yield listener, loop
    listener.stop()
    loop.stop()


def annotations(kube: FakeKube) -> dict[str, str]:
    return dict(kube.get("configmaps", CONFIG_MAP, "team-a")["metadata"].get("annotations", {}))


def test_the_config_map_is_named_after_the_job():
    assert config_map_of(JOB) == CONFIG_MAP


def test_a_request_is_applied_and_answered(api, kube, listening):
    _, loop = listening
    answer = request_scale(api, "team-a", JOB, 4, wait_s=20)
    assert answer == "scaled from 2 to 4 worker(s)"
    assert loop.seen == [(4, f"configmap {CONFIG_MAP}")]
    found = annotations(kube)
    assert found[ANNOTATION_WORKERS] == "4"
    assert json.loads(found[ANNOTATION_ANSWER]) == {
        "workers": 4,
        "request": found[ANNOTATION_REQUEST],
        "accepted": True,
        "message": "scaled from 2 to 4 worker(s)",
    }
    # The same size asked again is a new request, answered again.
    assert request_scale(api, "team-a", JOB, 4, wait_s=20) == "scaled from 4 to 4 worker(s)"
    assert len(loop.seen) == 2


def test_a_refusal_comes_back_as_scale_refused(api, listening):
    with pytest.raises(ScaleRefused, match=r"cannot scale to 1 worker\(s\): below"):
        request_scale(api, "team-a", JOB, 1, wait_s=20)


def annotate(kube: FakeKube, **values: str | None) -> None:
    """`kubectl annotate configmap ... --overwrite` (None: `key-`, removed)."""
    names = {"workers": ANNOTATION_WORKERS, "request": ANNOTATION_REQUEST}
    names["answer"] = ANNOTATION_ANSWER
    patch = {"metadata": {"annotations": {names[k]: v for k, v in values.items()}}}
    assert kube.patch("configmaps", "team-a", CONFIG_MAP, patch)[0] == 200


def answer_of(kube: FakeKube) -> dict[str, Any]:
    return json.loads(annotations(kube).get(ANNOTATION_ANSWER, "{}"))


def test_kubectl_annotate_works_too(kube, listening):
    _, loop = listening
    annotate(kube, workers="3")
    assert kube.wait_for(lambda: answer_of(kube).get("workers") == 3, timeout=20)
    assert answer_of(kube)["accepted"] is True and answer_of(kube)["request"] == ""
    annotate(kube, workers="three")
    assert kube.wait_for(lambda: answer_of(kube).get("workers") == "three", timeout=20)
    answer = answer_of(kube)
    assert answer["accepted"] is False and "is not a whole number" in answer["message"]
    annotate(kube, workers="3", request="r2")
    assert kube.wait_for(lambda: answer_of(kube).get("request") == "r2", timeout=20)
    assert loop.seen == [(3, f"configmap {CONFIG_MAP}")] * 2


def test_a_request_is_applied_once_and_its_lost_answer_written_again(api, kube, listening):
    listener, loop = listening
    request_scale(api, "team-a", JOB, 3, wait_s=20)
    first = annotations(kube)[ANNOTATION_ANSWER]
    annotate(kube, answer=None)  # the answer's write failed, or someone removed it
    assert kube.wait_for(lambda: annotations(kube).get(ANNOTATION_ANSWER) == first, timeout=20)
    listener.poll_once()
    assert len(loop.seen) == 1, "the same request is never applied twice"


def test_a_request_replaced_before_the_master_took_it_is_superseded(api, kube):
    # No master listens: a second asker replaces the first one's request.
    def replace_soon() -> None:
        kube.wait_for(lambda: annotations(kube).get(ANNOTATION_WORKERS) == "3", timeout=20)
        annotate(kube, workers="5", request="someone-else")

    thread = threading.Thread(target=replace_soon, daemon=True)
    thread.start()
    with pytest.raises(ScaleRequestError, match=r"superseded: another request \(for 5 workers"):
        request_scale(api, "team-a", JOB, 3, wait_s=20)
    thread.join(5)


def test_a_job_whose_master_takes_no_requests_cannot_be_resized(api, kube):
    annotate(kube)  # nothing
    patch = {"metadata": {"annotations": {ANNOTATION_RESIZABLE: None}}}
    kube.patch("configmaps", "team-a", CONFIG_MAP, patch)
    with pytest.raises(ScaleRequestError, match="cannot be resized: its master does not take"):
        request_scale(api, "team-a", JOB, 3, wait_s=5)
    assert ANNOTATION_WORKERS not in annotations(kube), "nothing was asked"


def test_no_such_job(api):
    with pytest.raises(ScaleRequestError, match="no running job 'other' in namespace 'team-a'"):
        request_scale(api, "team-a", "other", 3, wait_s=1)


def test_no_answer_in_time(api, kube):
    with pytest.raises(ScaleRequestError, match="did not answer within 1 s; the request stays"):
        request_scale(api, "team-a", JOB, 3, wait_s=1)
    assert annotations(kube)[ANNOTATION_WORKERS] == "3"


def test_the_cli_on_kubernetes(kube, listening, tmp_path, monkeypatch, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_for(kube))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    args = ["scale", JOB, "--kubeconfig", str(kubeconfig), "--namespace", "team-a"]
    assert cli.main([*args, "--workers", "5"]) == 0
    assert capsys.readouterr().out.strip() == "scaled from 2 to 5 worker(s)"
    assert cli.main([*args, "--workers", "1"]) == 1
    assert "elasticdl: scale refused: cannot scale to 1 worker(s)" in capsys.readouterr().err
    assert cli.main(["scale", "gone", "--kubeconfig", str(kubeconfig), "--workers", "2"]) == 2
    assert "no running job 'gone' in namespace 'default'" in capsys.readouterr().err


def kubeconfig_for(kube: FakeKube) -> str:
    host: Any = kube.api_client().configuration.host
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": host}}],
            "users": [{"name": "fake", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
    )
