"""What an API failure means to the store: unreachable or overloaded -> StoreUnavailable
(retriable); anything else stays an ApiException for the caller (404, 409, 422)."""

import asyncio

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_api
from broker.metadata.store import StoreUnavailable


async def _raise(exc):
    raise exc


@pytest.mark.parametrize("exc", [
    aiohttp.ClientConnectionError("connection refused"),
    aiohttp.ServerDisconnectedError(),
    asyncio.TimeoutError(),
    ConnectionResetError(),
    ApiException(status=503, reason="Service Unavailable"),
    ApiException(status=429, reason="Too Many Requests"),
    ApiException(status=500, reason="etcdserver: request timed out"),
])
async def test_unreachable_or_overloaded_is_retriable(exc):
    with pytest.raises(StoreUnavailable):
        await kube_api.call(_raise(exc))


@pytest.mark.parametrize("status", [404, 409, 422, 403])
async def test_answers_stay_api_exceptions(status):
    with pytest.raises(ApiException) as e:
        await kube_api.call(_raise(ApiException(status=status, reason="x")))
    assert e.value.status == status


async def test_a_value_passes_through():
    async def ok():
        return {"kind": "Lease"}
    assert await kube_api.call(ok()) == {"kind": "Lease"}


def test_outside_a_pod_by_default(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert not kube_api.in_cluster()
