"""Resizing a running job on Kubernetes: an annotation on the job's ConfigMap.

The channel (both ends):

* asking: `request_scale(api, namespace, job_name, workers)` (what `elasticdl scale JOB
  --workers N` does) sets `elasticdl.org/num-workers: "N"` on the ConfigMap `<job>-config` and
  removes the previous answer in the same merge patch, then waits for the master's answer.
  `kubectl annotate configmap <job>-config elasticdl.org/num-workers=N --overwrite` works too.
* answering: the master's `ConfigMapScaleListener` polls the ConfigMap (every `poll_s`),
  hands each new request to the job's `ScaleInbox`, and writes the answer as JSON in
  `elasticdl.org/num-workers-answer`: {"workers": N, "accepted": bool, "message": "..."}.

A request is new when its value differs from the last one answered, or when there is no
answer (so asking twice for the same size is answered twice). Polling, not a watch: a resize
is rare and a few seconds of latency do not matter, while a poll survives API server restarts
without any resync logic.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from elasticdl.runtime.k8s import manifests
from elasticdl.runtime.master.scaling import ScaleInbox, ScaleRefused

log = logging.getLogger("elasticdl.k8s.scale")

ANNOTATION_WORKERS = "elasticdl.org/num-workers"
ANNOTATION_ANSWER = "elasticdl.org/num-workers-answer"
POLL_S = 2.0


class ScaleRequestError(RuntimeError):
    """A resize request that could not be delivered or was not answered; one line."""


def config_map_of(job_name: str) -> str:
    """The name of the ConfigMap of job `job_name` (where resize requests go)."""
    return manifests.config_map_name(manifests.name_prefix(job_name))


class ConfigMapScaleListener:
    """Passes the resize requests annotated on one ConfigMap to a job's `ScaleInbox`."""

    def __init__(
        self,
        api: client.CoreV1Api,
        namespace: str,
        name: str,
        inbox: ScaleInbox,
        poll_s: float = POLL_S,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._name = name
        self._inbox = inbox
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._answered = ""
        self._thread = threading.Thread(target=self._loop, name="k8s-scale", daemon=True)

    def start(self) -> ConfigMapScaleListener:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                self.poll_once()
            except Exception as err:  # noqa: BLE001 - the job goes on; the next poll retries
                log.warning("resize requests on configmap %s: %s", self._name, err)

    def poll_once(self) -> None:
        """Read the ConfigMap; answer a new request there (waits for the job's answer)."""
        try:
            cm = self._api.read_namespaced_config_map(self._name, self._namespace)
        except ApiException as err:
            if err.status == 404:
                return  # not created yet, or gone at the end of the job
            raise
        annotations = dict(cm.metadata.annotations or {})
        value = annotations.get(ANNOTATION_WORKERS, "").strip()
        if not value or (value == self._answered and ANNOTATION_ANSWER in annotations):
            return
        self._answered = value
        try:
            workers = int(value)
        except ValueError:
            self._answer(value, False, f"{ANNOTATION_WORKERS}={value!r} is not a whole number")
            return
        request = self._inbox.submit(workers, f"configmap {self._name}")
        while not request.wait(0.5):
            if self._stop.is_set():
                return
        self._answer(workers, not request.error, request.error or request.message)

    def _answer(self, workers: int | str, accepted: bool, message: str) -> None:
        answer = json.dumps({"workers": workers, "accepted": accepted, "message": message})
        body = {"metadata": {"annotations": {ANNOTATION_ANSWER: answer}}}
        self._api.patch_namespaced_config_map(self._name, self._namespace, body)


def request_scale(
    api: client.CoreV1Api,
    namespace: str,
    job_name: str,
    workers: int,
    wait_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Ask job `job_name`'s master for `workers` workers; its answer. ScaleRefused when it
    says no; ScaleRequestError when the request cannot be delivered or is not answered.

    `wait_s` 0: do not wait for the answer (returns what was asked)."""
    name = config_map_of(job_name)
    body = {
        "metadata": {
            "annotations": {ANNOTATION_WORKERS: str(workers), ANNOTATION_ANSWER: None},
        }
    }
    try:
        api.patch_namespaced_config_map(name, namespace, body)
    except ApiException as err:
        if err.status == 404:
            raise ScaleRequestError(
                f"no running job {job_name!r} in namespace {namespace!r} (configmap {name} "
                "not found); check the job name and --namespace"
            ) from None
        raise ScaleRequestError(
            f"could not annotate configmap {name}: HTTP {err.status} {err.reason}"
        ) from None
    if wait_s <= 0:
        return f"asked job {job_name} for {workers} worker(s)"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        sleep(0.5)
        answer = _read_answer(api, namespace, name)
        if answer is None:
            continue
        if answer.get("workers") != workers:
            continue
        if not answer.get("accepted"):
            raise ScaleRefused(str(answer.get("message", "refused")))
        return str(answer.get("message", ""))
    raise ScaleRequestError(
        f"job {job_name!r} did not answer within {wait_s:.0f} s; the request stays on "
        f"configmap {name} and the master takes it when it can"
    )


def _read_answer(api: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        cm = api.read_namespaced_config_map(name, namespace)
    except ApiException as err:
        if err.status == 404:
            raise ScaleRequestError(f"configmap {name} is gone: the job has ended") from None
        return None
    text = (cm.metadata.annotations or {}).get(ANNOTATION_ANSWER)
    if not text:
        return None
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
