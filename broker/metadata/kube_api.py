"""Connecting to the Kubernetes API as kubectl does, and what its failures mean to the store.

Inside a pod the service account's token and CA are used (in-cluster config) and the namespace
defaults to the pod's own; outside, KUBECONFIG (or ~/.kube/config) and its current context's
namespace. Every API call goes through `call`, which turns "cannot reach the API server" (refused
connections, timeouts, 5xx, 429) into the retriable `StoreUnavailable`; other API errors stay
`ApiException` for the caller to interpret (404, 409, 422).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata.store import StoreUnavailable

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# The API server answers these when it is overloaded or restarting: try again later.
RETRIABLE_STATUS = frozenset({0, 429, 500, 502, 503, 504})

T = TypeVar("T")


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and SERVICE_ACCOUNT_NAMESPACE.exists()


async def connect() -> tuple[client.ApiClient, str]:
    """An API client and the namespace it defaults to (the pod's, or the kubeconfig context's)."""
    configuration = client.Configuration()
    if in_cluster():
        config.load_incluster_config(client_configuration=configuration)
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    else:
        path = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        loader = await config.load_kube_config(config_file=path, client_configuration=configuration,
                                               persist_config=False)
        namespace = (loader.current_context or {}).get("context", {}).get("namespace") or "default"
    return client.ApiClient(configuration=configuration), namespace


async def call(awaitable: Awaitable[T]) -> T:
    """Await one API call; an unreachable or unhealthy API server raises StoreUnavailable."""
    try:
        return await awaitable
    except ApiException as e:
        if e.status in RETRIABLE_STATUS:
            detail = (e.body or "")[:300] if isinstance(e.body, str) else ""
            raise StoreUnavailable(f"Kubernetes API: {e.status} {e.reason} {detail}".rstrip()) from None
        raise
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
        raise StoreUnavailable(f"Kubernetes API unreachable: {e or type(e).__name__}") from None
