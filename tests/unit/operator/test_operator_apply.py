"""The API helper: paths, server-side apply parameters, 404 handling (with a fake ApiClient)."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from flotilla_operator.clients.kube import ApiError, Kube, object_path


def test_object_path():
    assert object_path("ConfigMap", "ns", "c") == "/api/v1/namespaces/ns/configmaps/c"
    assert object_path("StatefulSet", "ns", "s") == "/apis/apps/v1/namespaces/ns/statefulsets/s"
    assert object_path("KafkaCluster", "ns", "k", "status") == "/apis/flotilla.io/v1alpha1/namespaces/ns/kafkaclusters/k/status"
    assert object_path("PodDisruptionBudget", "ns") == "/apis/policy/v1/namespaces/ns/poddisruptionbudgets"


class FakeApi:
    def __init__(self, fail: ApiException | None = None):
        self.calls = []
        self.fail = fail

    async def call_api(self, path, method, **kw):
        self.calls.append((method, path, kw))
        if self.fail:
            raise self.fail
        return {"echo": kw.get("body"), "items": [{"metadata": {"name": "x"}}]}

    async def close(self):
        pass


def _api_exception(status, message):
    exc = ApiException(status=status, reason="reason")
    exc.body = json.dumps({"message": message})
    return exc


async def test_apply_is_server_side_apply_with_field_manager():
    api = FakeApi()
    kube = Kube(api, "flotilla-operator")
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"}}
    out = await kube.apply(obj)
    method, path, kw = api.calls[0]
    assert (method, path) == ("PATCH", "/api/v1/namespaces/ns/services/s")
    assert kw["header_params"]["Content-Type"] == "application/apply-patch+yaml"
    assert ("fieldManager", "flotilla-operator") in kw["query_params"] and ("force", "true") in kw["query_params"]
    assert out["echo"] == obj


async def test_get_returns_none_on_404_and_raises_otherwise():
    assert await Kube(FakeApi(_api_exception(404, "not found")), "m").get("StatefulSet", "ns", "s") is None
    with pytest.raises(ApiError) as info:
        await Kube(FakeApi(_api_exception(403, "forbidden: no")), "m").get("StatefulSet", "ns", "s")
    assert info.value.status == 403 and "forbidden: no" in str(info.value)


async def test_patch_status_and_list():
    api = FakeApi()
    kube = Kube(api, "m")
    await kube.patch_status("KafkaCluster", "ns", "k", {"observedGeneration": 2})
    method, path, kw = api.calls[0]
    assert path.endswith("/kafkaclusters/k/status") and kw["header_params"]["Content-Type"] == "application/merge-patch+json"
    assert kw["body"] == {"status": {"observedGeneration": 2}}
    assert await kube.list("KafkaCluster") == [{"metadata": {"name": "x"}}]
    assert api.calls[-1][1] == "/apis/flotilla.io/v1alpha1/kafkaclusters"
    await kube.list("KafkaCluster", "ns")
    assert api.calls[-1][1] == "/apis/flotilla.io/v1alpha1/namespaces/ns/kafkaclusters"
