"""Asking a training job on Kubernetes for its live report (`elasticdl status JOB`), through
annotations on the job's ConfigMap, as resize requests go (scale.py).

* asking: `request_status(api, namespace, job_name)` sets `elasticdl.org/status-request` to a
  fresh id and waits until `elasticdl.org/status` holds {"request": id, "status": {...}}.
* answering: the master's `ConfigMapScaleListener` (scale.py, polling every 2 s) calls
  `answer_status` with the annotations it read: a request id not answered yet gets the live
  report (runtime/master/live_status.py) written.

Only a training job's master answers; it marks its ConfigMap `elasticdl.org/resizable`. The
report is no secret of the job's (progress, workers, failures, metrics): whoever may annotate
the ConfigMap may read it, as with resizing.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from elasticdl.runtime.k8s.scale import (
    ANNOTATION_RESIZABLE,
    ScaleRequestError,
    config_map_of,
    job_annotations,
)

ANNOTATION_STATUS_REQUEST = "elasticdl.org/status-request"
ANNOTATION_STATUS = "elasticdl.org/status"
POLL_S = 0.5


class StatusRequestError(RuntimeError):
    """The request could not be delivered or was not answered; one line."""


def answer_status(
    api: client.CoreV1Api,
    namespace: str,
    name: str,
    annotations: dict[str, str],
    report: Callable[[], dict[str, Any]],
    answered: str,
) -> str:
    """Write `report()` on ConfigMap `name` for a request not answered yet (`answered`: the
    last id answered); returns the id answered now, or `answered`."""
    request = annotations.get(ANNOTATION_STATUS_REQUEST, "")
    if not request or request == answered:
        return answered
    text = json.dumps({"request": request, "status": report()}, default=str)
    body = {"metadata": {"annotations": {ANNOTATION_STATUS: text}}}
    api.patch_namespaced_config_map(name, namespace, body)
    return request


def request_status(
    api: client.CoreV1Api,
    namespace: str,
    job_name: str,
    wait_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The live report of job `job_name`; StatusRequestError when it cannot be asked or does
    not answer within `wait_s`."""
    name = config_map_of(job_name)
    try:
        annotations = job_annotations(api, namespace, name, job_name) or {}
    except ScaleRequestError as err:
        raise StatusRequestError(str(err)) from None
    if annotations.get(ANNOTATION_RESIZABLE) != "true":
        raise StatusRequestError(
            f"job {job_name!r} does not answer status requests (configmap {name} is not "
            f"marked {ANNOTATION_RESIZABLE}: only a training job's master answers)"
        )
    request = uuid.uuid4().hex[:12]
    body = {"metadata": {"annotations": {ANNOTATION_STATUS_REQUEST: request}}}
    try:
        api.patch_namespaced_config_map(name, namespace, body)
    except ApiException as err:
        raise StatusRequestError(
            f"could not annotate configmap {name}: HTTP {err.status} {err.reason}"
        ) from None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        sleep(POLL_S)
        try:
            found = job_annotations(api, namespace, name, job_name, ended=True)
        except ScaleRequestError as err:
            raise StatusRequestError(str(err)) from None
        answer = _parse(found.get(ANNOTATION_STATUS) if found else None)
        if answer is not None and answer.get("request") == request:
            return dict(answer.get("status") or {})
    raise StatusRequestError(f"job {job_name!r} did not answer within {wait_s:g} s")


def _parse(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
