"""KubernetesClientQuotaStore's glue over kube_document.py: the ConfigMap's document is the file
backend's, a write applies one entity's change to the document as read, a deleted ConfigMap means
no quotas, and a document that does not parse keeps the quotas in force."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from broker.metadata.client_quotas import PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, QuotaEntity, to_doc
from broker.metadata.kube_quotas import KubernetesClientQuotaStore, config_map_name
from broker.metadata.store import StoreUnavailable


def _store():
    store = KubernetesClientQuotaStore(SimpleNamespace(cluster_name="demo", namespace="kafka"))
    stored: dict = {"doc": None}

    async def update(change):  # what KubeDocument.update does, without the API server
        try:
            new = change(stored["doc"])
        except ValueError as e:
            raise StoreUnavailable(str(e)) from None
        stored["doc"] = new
        store._on_document(new)  # what the watch delivers
        return new

    store.document.update = update
    return store, stored


def test_names_the_configmap_and_key():
    store, _ = _store()
    assert store.document.name == store.name == config_map_name("demo") == "demo-client-quotas"
    assert (store.document.kind, store.document.data_key) == ("ConfigMap", "quotas.json")


def test_alter_writes_the_file_backends_document_and_publishes():
    store, stored = _store()
    seen = []
    store.subscribe(seen.append)
    alice = QuotaEntity.user_client("alice")
    asyncio.run(store.alter(alice, {PRODUCER_BYTE_RATE: 1024, REQUEST_PERCENTAGE: 50}))
    assert stored["doc"] == to_doc({alice: {PRODUCER_BYTE_RATE: 1024.0, REQUEST_PERCENTAGE: 50.0}})
    assert dict(store.quotas[alice]) == {PRODUCER_BYTE_RATE: 1024.0, REQUEST_PERCENTAGE: 50.0}
    asyncio.run(store.alter(alice, {PRODUCER_BYTE_RATE: None}))  # one key removed, the other kept
    assert dict(store.quotas[alice]) == {REQUEST_PERCENTAGE: 50.0} and len(seen) == 2
    store._on_document(stored["doc"])  # the watch repeating what we wrote: nobody told again
    assert len(seen) == 2
    store._on_document(None)  # the ConfigMap deleted: no quotas
    assert dict(store.quotas) == {} and len(seen) == 3


def test_a_document_that_does_not_parse_keeps_the_quotas_in_force():
    store, stored = _store()
    alice = QuotaEntity.user_client("alice")
    asyncio.run(store.alter(alice, {PRODUCER_BYTE_RATE: 1024}))
    store._on_document({"quotas": [{"entity": "garbage"}]})
    assert dict(store.quotas[alice]) == {PRODUCER_BYTE_RATE: 1024.0}
    stored["doc"] = {"quotas": [{"no entity": 1}]}
    with pytest.raises(StoreUnavailable):
        asyncio.run(store.alter(alice, {PRODUCER_BYTE_RATE: 1}))
