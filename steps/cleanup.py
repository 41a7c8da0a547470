"""The exit step of both pipelines on Argo: delete what the elastic job left behind.

    python -m elasticdl.steps.cleanup --job_name=<the workflow's name> [--namespace=NS]

With `--instance_manager kubernetes` the master creates its parameter-server and worker pods,
a Service per parameter server and a ConfigMap, each labelled ``elasticdl-job-name=<prefix>``
where ``<prefix>`` is `runtime.k8s.manifests.name_prefix` of the job name: the name made a
DNS label of at most 40 characters (dots become dashes; a longer name, say the run
``<cron name>-<timestamp>`` of a CronWorkflow or a long ``--job_name``, keeps its start and
gets a hash). The master deletes these objects when it ends, and their ownerReferences to its
pod let Kubernetes collect them once that pod is deleted; but the pod of a master that failed
stays (``podGC: OnPodSuccess`` keeps failed pods for debugging) and so would its workers,
still holding their nodes. This step deletes them by the very label value the master used,
derived with the same function: a ``kubectl delete -l elasticdl-job-name={{workflow.name}}``
would miss every job whose workflow name is not already its own prefix.

Pods, then Services, then the ConfigMap are listed by the label and deleted one by one (the
pods with their own grace period, so a worker may finish its minibatch), without waiting for
them to go; one already gone is fine. Transient API failures (429, 5xx, a broken connection)
are retried a few times with backoff. With `--instance_manager local` there is nothing to
delete. Needs list and delete on pods, services and configmaps (the Role in `rbac.py`).

Exit status 0 when everything is deleted (or there was nothing), 1 when the API refused (one
line saying what and why, e.g. a Role without ``delete``), 2 for bad input.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("elasticdl.steps.cleanup")

KINDS = (("pods", "pod"), ("services", "service"), ("configmaps", "config_map"))
"""(resource, the client's method suffix), in the order they are deleted."""
_TRANSIENT = {429, 500, 502, 503, 504}
ATTEMPTS = 4


class CleanupError(RuntimeError):
    """The API refused to list or delete; the message is one line."""


@dataclass
class CleanupResult:
    namespace: str
    selector: str
    deleted: dict[str, list[str]] = field(default_factory=dict)
    """resource -> names deleted (or already being deleted)."""

    def summary(self) -> str:
        counts = ", ".join(f"{len(names)} {res}" for res, names in self.deleted.items())
        return f"deleted {counts} labelled {self.selector} in namespace {self.namespace}"


def job_selector(job_name: str) -> str:
    """The label selector of every object the master of job `job_name` creates."""
    from elasticdl.runtime.k8s import manifests

    return manifests.job_selector(manifests.name_prefix(job_name))


def _status(err: BaseException) -> int | None:
    return getattr(err, "status", None)


def _reason(err: BaseException) -> str:
    """One line from an ApiException (the Status message when the body has one)."""
    import json

    body = getattr(err, "body", None)
    if body:
        try:
            message = json.loads(body).get("message", "")
        except (ValueError, AttributeError):
            message = ""
        if message:
            return " ".join(str(message).split())
    reason = getattr(err, "reason", None) or str(err)
    return " ".join(str(reason).split())


def _call(what: str, call: Callable[[], Any], sleep: Callable[[float], None]) -> Any:
    """`call()`, retried on transient failures; None when the object is gone (404)."""
    from kubernetes.client.rest import ApiException
    from urllib3.exceptions import HTTPError

    delay = 1.0
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call()
        except ApiException as err:
            status = _status(err)
            if status == 404:
                return None
            if status not in _TRANSIENT or attempt == ATTEMPTS:
                raise CleanupError(f"{what}: {status} {_reason(err)}") from None
        except (HTTPError, OSError) as err:
            if attempt == ATTEMPTS:
                raise CleanupError(f"{what}: {_reason(err)}") from None
        log.warning("%s failed (attempt %d of %d); retrying", what, attempt, ATTEMPTS)
        sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def run(
    job_name: str,
    namespace: str = "",
    api_client: Any = None,
    sleep: Callable[[float], None] = time.sleep,
) -> CleanupResult:
    """Delete the pods, Services and ConfigMaps of job `job_name` in `namespace` (default:
    this pod's). ValueError for bad input, CleanupError when the API refuses."""
    if not job_name.strip():
        raise ValueError("--job_name is empty: give the job's name (the workflow's name)")
    from kubernetes import client

    from elasticdl.runtime.k8s.manager import current_namespace, load_api_client

    selector = job_selector(job_name)
    namespace = namespace or current_namespace()
    api = client.CoreV1Api(api_client if api_client is not None else load_api_client())
    result = CleanupResult(namespace, selector)
    for resource, kind in KINDS:
        listing = _call(
            f"list {resource} ({selector}) in namespace {namespace}",
            lambda kind=kind: getattr(api, f"list_namespaced_{kind}")(
                namespace, label_selector=selector
            ),
            sleep,
        )
        names = sorted(item.metadata.name for item in (listing.items if listing else []))
        for name in names:
            _call(
                f"delete {kind.replace('_', '')} {name} in namespace {namespace}",
                lambda kind=kind, name=name: getattr(api, f"delete_namespaced_{kind}")(
                    name, namespace
                ),
                sleep,
            )
        result.deleted[resource] = names
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--job_name",
        required=True,
        help="the job's name as the master was given it (on Argo: the workflow's name)",
    )
    parser.add_argument("--namespace", default="", help="default: this pod's namespace")


def run_from_args(args: argparse.Namespace) -> CleanupResult:
    return run(args.job_name, args.namespace)


def _finish(args: argparse.Namespace, result: CleanupResult) -> int:
    print(result.summary())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from elasticdl.steps.step_main import BAD_INPUT, run_step

    return run_step(
        "elasticdl.steps.cleanup",
        "cleanup",
        add_arguments,
        run_from_args,
        _finish,
        argv,
        failures={ValueError: BAD_INPUT, CleanupError: 1},
    )


if __name__ == "__main__":
    sys.exit(main())
