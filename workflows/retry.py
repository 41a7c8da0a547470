"""Argo retry strategies: retry what the infrastructure did to a pod, never a code error.

Argo's `retryStrategy.expression` (v3.2+; `lastRetry.message` v3.5+) sees the last attempt's
`status` (its node phase), `exitCode` ("-1" when there is none) and `message`. How Argo sets
them (workflow/controller/operator.go):

* a pod deleted while it ran (node drained, spot VM reclaimed and its pods garbage-collected,
  `kubectl delete`) -> phase **Error**, "pod deleted during operation"; init or wait container
  failures and controller errors are Error too. All of these are retried.
* a pod the kubelet ended -> phase **Failed** with the pod's own message: eviction ("The node
  was low on resource: memory..."), graceful node shutdown ("...imminent node shutdown"),
  critical-pod preemption ("Preempted in order to admit critical pod"), admission rejection
  ("Pod was rejected: ..."). Retried.
* the main container exiting non-zero -> **Failed**, "main: <reason> (exit code N)". Retried only
  for 137/143 (SIGKILL/SIGTERM from outside) and not when the reason is OOMKilled: another
  attempt would run out of memory again. Exit 1 or 2 (our steps' code and input errors) is
  final.

`retryPolicy: Always` lets both phases reach the expression, which decides.
"""

from __future__ import annotations

from hera.workflows import RetryStrategy
from hera.workflows.models import Backoff

from elasticdl.workflows.steps import Retry

INFRA_MESSAGES = r"(?i)(low on resource|imminent node shutdown|preempted|pod was rejected)"

INFRA_EXPRESSION = (
    "lastRetry.status == 'Error' || (lastRetry.status == 'Failed' && ("
    "(asInt(lastRetry.exitCode) in [137, 143] && !(lastRetry.message contains 'OOMKilled'))"
    f" || lastRetry.message matches '{INFRA_MESSAGES}'))"
)


def retry_strategy(kind: Retry, limit: int) -> RetryStrategy | None:
    """The hera RetryStrategy for a step's retry kind (None: no retries).

    `limit` and `backoff.factor` are IntOrString fields, written as strings: Argo's published
    JSON Schema and its Python SDK take only strings there (workflows/schema.py)."""
    if kind is Retry.NONE or limit <= 0:
        return None
    return RetryStrategy(
        limit=str(limit),
        retry_policy="Always",
        expression=INFRA_EXPRESSION,
        backoff=Backoff(duration="30s", factor="2"),
    )
