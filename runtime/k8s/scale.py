"""Resizing a running job on Kubernetes: annotations on the job's ConfigMap.

The channel (both ends):

* asking: `request_scale(api, namespace, job_name, workers)` (what `elasticdl scale JOB
  --workers N` does) checks that the job's ConfigMap `<job>-config` exists and is marked
  `elasticdl.org/resizable` (a training job's master marks it; prediction jobs cannot be
  resized), then sets `elasticdl.org/num-workers: "N"` with a fresh request id in
  `elasticdl.org/num-workers-request`, removing the previous answer in the same merge patch,
  and waits for the answer that echoes its id.
* answering: the master's `ConfigMapScaleListener` polls the ConfigMap (every `poll_s`),
  hands each new request to the job's `ScaleInbox`, and writes the answer as JSON in
  `elasticdl.org/num-workers-answer`: {"workers": N, "request": id, "accepted": bool,
  "message": "..."}.

A request is new when its (size, request id) differs from the last one answered: asking again
for the same size is a new request. With kubectl, give a new id to repeat a size:
`kubectl annotate configmap JOB-config elasticdl.org/num-workers=4
elasticdl.org/num-workers-request=$(date +%s) --overwrite`. A request replaced by another
before the master took it is reported as superseded to its asker. An answer whose write failed
is written again at the next poll; the request is not applied twice.

Polling, not a watch: a resize is rare and a few seconds of latency do not matter, while a
poll survives API server restarts without any resync logic.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from elasticdl.runtime.k8s import manifests
from elasticdl.runtime.master.scaling import ScaleInbox, ScaleRefused

log = logging.getLogger("elasticdl.k8s.scale")

ANNOTATION_WORKERS = "elasticdl.org/num-workers"
ANNOTATION_REQUEST = "elasticdl.org/num-workers-request"
ANNOTATION_ANSWER = "elasticdl.org/num-workers-answer"
ANNOTATION_RESIZABLE = "elasticdl.org/resizable"
POLL_S = 2.0


class ScaleRequestError(RuntimeError):
    """A resize request that could not be delivered or was not answered; one line."""


def config_map_of(job_name: str) -> str:
    """The name of the ConfigMap of job `job_name` (where resize requests go)."""
    return manifests.config_map_name(manifests.name_prefix(job_name))


class ConfigMapScaleListener:
    """Passes the resize requests annotated on one ConfigMap to a job's `ScaleInbox`, and
    answers its status requests."""

    def __init__(
        self,
        api: client.CoreV1Api,
        namespace: str,
        name: str,
        inbox: ScaleInbox,
        poll_s: float = POLL_S,
        status: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        """`status`: the job's live report, written for status requests (status_channel.py)."""
        self._api = api
        self._status = status
        self._status_answered = ""
        self._namespace = namespace
        self._name = name
        self._inbox = inbox
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._answered: tuple[str, str] | None = None
        self._answer_text = ""
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
        if self._status is not None:
            from elasticdl.runtime.k8s.status_channel import answer_status

            self._status_answered = answer_status(
                self._api,
                self._namespace,
                self._name,
                annotations,
                self._status,
                self._status_answered,
            )
        value = annotations.get(ANNOTATION_WORKERS, "").strip()
        key = (value, annotations.get(ANNOTATION_REQUEST, ""))
        if not value:
            return
        if key == self._answered:
            if annotations.get(ANNOTATION_ANSWER) != self._answer_text:
                self._write_answer()  # the last write failed, or someone removed it
            return
        try:
            workers = int(value)
        except ValueError:
            self._answer(key, value, False, f"{ANNOTATION_WORKERS}={value!r} is not a whole number")
            return
        request = self._inbox.submit(workers, f"configmap {self._name}")
        while not request.wait(0.5):
            if self._stop.is_set():
                return
        self._answer(key, workers, not request.error, request.error or request.message)

    def _answer(
        self, key: tuple[str, str], workers: int | str, accepted: bool, message: str
    ) -> None:
        """Remember `key` as answered (never applied again), then write the answer."""
        self._answered = key
        self._answer_text = json.dumps(
            {"workers": workers, "request": key[1], "accepted": accepted, "message": message}
        )
        self._write_answer()

    def _write_answer(self) -> None:
        body = {"metadata": {"annotations": {ANNOTATION_ANSWER: self._answer_text}}}
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
    annotations = job_annotations(api, namespace, name, job_name) or {}
    if annotations.get(ANNOTATION_RESIZABLE) != "true":
        raise ScaleRequestError(
            f"job {job_name!r} cannot be resized: its master does not take resize requests "
            f"(configmap {name} is not marked {ANNOTATION_RESIZABLE}; only training jobs can be)"
        )
    request_id = uuid.uuid4().hex[:12]
    body = {
        "metadata": {
            "annotations": {
                ANNOTATION_WORKERS: str(workers),
                ANNOTATION_REQUEST: request_id,
                ANNOTATION_ANSWER: None,
            },
        }
    }
    try:
        api.patch_namespaced_config_map(name, namespace, body)
    except ApiException as err:
        raise ScaleRequestError(
            f"could not annotate configmap {name}: HTTP {err.status} {err.reason}"
        ) from None
    if wait_s <= 0:
        return f"asked job {job_name} for {workers} worker(s) (request {request_id})"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        sleep(0.5)
        found = job_annotations(api, namespace, name, job_name, ended=True)
        if found is None:
            continue  # a transient read failure: try again
        answer = _parse_answer(found.get(ANNOTATION_ANSWER))
        if answer is not None and answer.get("request") == request_id:
            if not answer.get("accepted"):
                raise ScaleRefused(str(answer.get("message", "refused")))
            return str(answer.get("message", ""))
        if found.get(ANNOTATION_REQUEST) != request_id:
            raise ScaleRequestError(
                f"superseded: another request (for {found.get(ANNOTATION_WORKERS)} workers) "
                "replaced this one before the master took it"
            )
    raise ScaleRequestError(
        f"job {job_name!r} did not answer within {wait_s:.0f} s; the request stays on "
        f"configmap {name} and the master takes it when it can"
    )


def job_annotations(
    api: client.CoreV1Api, namespace: str, name: str, job_name: str, ended: bool = False
) -> dict[str, str] | None:
    """The job's ConfigMap's annotations (ScaleRequestError, one line, when it cannot be
    read). `ended`: while waiting for an answer (404: the job has ended; another failure:
    None, to read again). Status requests read them too (status_channel.py)."""
    try:
        cm = api.read_namespaced_config_map(name, namespace)
    except ApiException as err:
        if err.status == 404 and ended:
            raise ScaleRequestError(f"configmap {name} is gone: the job has ended") from None
        if ended:
            return None
        if err.status == 404:
            raise ScaleRequestError(
                f"no running job {job_name!r} in namespace {namespace!r} (configmap {name} "
                "not found); check the job name and --namespace (a job whose workers are "
                "local processes: --master HOST:PORT)"
            ) from None
        raise ScaleRequestError(
            f"could not read configmap {name}: HTTP {err.status} {err.reason}"
        ) from None
    return dict(cm.metadata.annotations or {})


def _parse_answer(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
