"""The flags and the API client of the commands that reach a job on Kubernetes by its name
(`elasticdl scale JOB`, `elasticdl status JOB`)."""

from __future__ import annotations

import argparse
from typing import Any


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", default="", help="default: the kubeconfig context's")
    parser.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube")
    parser.add_argument("--context", default=None, help="a kubeconfig context")


def core_api(args: argparse.Namespace) -> tuple[Any, str]:
    """(CoreV1Api, namespace) from the flags; ValueError (one line) without a configuration."""
    from kubernetes import client

    from elasticdl.runtime.k8s.manager import current_namespace, load_api_client

    try:
        api_client = load_api_client(args.kubeconfig, args.context)
    except Exception as err:  # noqa: BLE001 - kubernetes.config raises several kinds
        raise ValueError(f"no Kubernetes configuration to reach the cluster: {err}") from None
    return client.CoreV1Api(api_client), args.namespace or current_namespace(args.kubeconfig)
