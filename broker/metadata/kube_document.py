"""One JSON document of a fleet's metadata in one named Kubernetes object (a ConfigMap or a Secret),
watched by every broker and written with compare-and-set: the cluster's SCRAM credentials (a Secret,
broker/metadata/kube_scram_store.py), ACLs (a ConfigMap, kube_acls.py) and client quotas (a
ConfigMap, kube_quotas.py).

The object `<name>` (label flotilla.io/cluster, owned by the KafkaCluster when the brokers know
its uid) holds the document under one data key (a Secret's data base64-encoded, as Secrets are).
`start` lists it and then watches it by name (a field selector: RBAC can grant the one object
name), calling `on_change(document or None)` for every version it sees, in order; `update(fn)`
reads it, writes `fn(document)` with the read resourceVersion (a lost race reads again) and the
first write creates it (create-if-absent). One object per kind of data, not one per entry: the
documents are small (credentials, quotas) and one watch keeps every broker within about a second.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_api
from broker.metadata import kube_objects as ko
from broker.metadata.store import Conflict, StoreUnavailable

log = logging.getLogger(__name__)

CAS_ATTEMPTS = 8
REQUEST_TIMEOUT_S = 10
WATCH_TIMEOUT_S = 240


class KubeDocument:
    def __init__(self, metadata_store, kind: str, name: str, data_key: str,
                 on_change: Callable[[dict | None], None]) -> None:
        """`metadata_store`: the KubernetesMetadataStore (namespace, cluster name, owner uid)."""
        assert kind in ("ConfigMap", "Secret"), kind
        self._meta = metadata_store
        self.kind, self.name, self.data_key = kind, name, data_key
        self._on_change = on_change
        self._api: client.ApiClient | None = None
        self._core: client.CoreV1Api | None = None
        self._task: asyncio.Task | None = None
        self._rv: str | None = None
        self.namespace: str | None = None

    def _calls(self, verb: str):
        suffix = "config_map" if self.kind == "ConfigMap" else "secret"
        return getattr(self._core, f"{verb}_namespaced_{suffix}")

    async def start(self) -> None:
        self._api, default_ns = await kube_api.connect()
        self.namespace = self._meta.namespace or default_ns
        self._core = client.CoreV1Api(self._api)
        list_rv = await self._relist()
        self._task = asyncio.create_task(self._watch(list_rv), name=f"metadata-watch-{self.name}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._api is not None:
            await self._api.close()
            self._api = None

    # -- the document in an object -----------------------------------------------------------

    def document_of(self, obj: Mapping[str, Any] | None) -> dict | None:
        return document_of(self.kind, self.data_key, obj)

    def _data(self, document: dict) -> dict[str, str]:
        return object_data(self.kind, self.data_key, document)

    # -- reads -------------------------------------------------------------------------------

    def _apply(self, obj: Mapping[str, Any] | None) -> None:
        rv = None if obj is None else obj["metadata"].get("resourceVersion")
        if obj is not None and self._rv is not None and rv is not None and _older(rv, self._rv):
            return  # we wrote something newer already
        self._rv = rv
        try:
            document = self.document_of(obj)
        except (ValueError, TypeError) as e:
            log.error("%s %s/%s does not parse (%s); keeping what is in force", self.kind, self.namespace, self.name, e)
            return
        self._on_change(document)

    async def _relist(self) -> str:
        listing = await kube_api.call(self._calls("list")(
            self.namespace, field_selector=f"metadata.name={self.name}", _request_timeout=REQUEST_TIMEOUT_S))
        items = self._api.sanitize_for_serialization(listing.items) if listing.items else []
        self._apply(items[0] if items else None)
        return listing.metadata.resource_version

    async def _watch(self, rv: str | None) -> None:
        backoff = 0.1
        while True:
            try:
                if rv is None:
                    rv = await self._relist()
                    backoff = 0.1
                w = watch.Watch()
                try:
                    async for ev in w.stream(self._calls("list"), self.namespace,
                                             field_selector=f"metadata.name={self.name}", resource_version=rv,
                                             timeout_seconds=WATCH_TIMEOUT_S + random.randint(0, 10),
                                             _request_timeout=WATCH_TIMEOUT_S + 30):
                        rv = w.resource_version or rv
                        if ev["type"] in ("ADDED", "MODIFIED"):
                            self._apply(ev["raw_object"])
                        elif ev["type"] == "DELETED":
                            self._rv = None
                            self._apply(None)
                finally:
                    await w.close()
            except asyncio.CancelledError:
                raise
            except ApiException as e:
                if e.status != 410:
                    log.info("%s %s: watch broke (%s %s); listing again", self.kind, self.name, e.status, e.reason)
                rv = None
            except Exception as e:
                log.info("%s %s: watch broke (%s); listing again", self.kind, self.name, e or type(e).__name__)
                rv = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    # -- writes ------------------------------------------------------------------------------

    async def update(self, change: Callable[[dict | None], dict]) -> dict:
        """Write `change(current document)`, compare-and-set; applied here before returning, and
        returned."""
        for _ in range(CAS_ATTEMPTS):
            try:
                current = await kube_api.call(self._calls("read")(
                    self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S))
                current = self._api.sanitize_for_serialization(current)
            except ApiException as e:
                if e.status != 404:
                    raise StoreUnavailable(f"{self.kind} {self.name}: {e.status} {e.reason}") from None
                current = None
            try:
                new = change(self.document_of(current))
                data = self._data(new)
            except ValueError as e:
                raise StoreUnavailable(f"{self.kind} {self.name} does not parse: {e}") from None
            try:
                if current is None:
                    body = {"apiVersion": "v1", "kind": self.kind, "data": data, "metadata": {
                        "name": self.name, "namespace": self.namespace,
                        "labels": ko.labels(self._meta.cluster_name, **{ko.CREATED_BY_LABEL: ko.CREATED_BY_FLEET})}}
                    owners = ko.owner_references(self._meta.cluster_name, getattr(self._meta, "owner_uid", None))
                    if owners:  # deleted with the KafkaCluster, as the fleet's Leases and KafkaTopics
                        body["metadata"]["ownerReferences"] = owners
                    if self.kind == "Secret":
                        body["type"] = "Opaque"
                    written = await kube_api.call(self._calls("create")(
                        self.namespace, body, _request_timeout=REQUEST_TIMEOUT_S))
                else:
                    body = {**current, "data": data}  # carries metadata.resourceVersion: compare-and-set
                    written = await kube_api.call(self._calls("replace")(
                        self.name, self.namespace, body, _request_timeout=REQUEST_TIMEOUT_S))
            except ApiException as e:
                if e.status == 409:
                    continue  # someone else wrote first (or created it): read again
                raise StoreUnavailable(f"{self.kind} {self.name}: {e.status} {e.reason}") from None
            self._apply(self._api.sanitize_for_serialization(written))
            return new
        raise Conflict(f"{self.kind} {self.name}: {CAS_ATTEMPTS} concurrent writers won in a row; try again")


def document_of(kind: str, data_key: str, obj: Mapping[str, Any] | None) -> dict | None:
    """The parsed document of an object as the API returns it; ValueError if it does not parse.
    Also used by the operator, which writes its own SCRAM credential into the same Secret."""
    raw = ((obj or {}).get("data") or {}).get(data_key)
    if not raw:
        return None
    if kind == "Secret":
        raw = base64.b64decode(raw, validate=True).decode()
    return json.loads(raw)


def object_data(kind: str, data_key: str, document: dict) -> dict[str, str]:
    """The object's `data` holding `document` (a Secret's base64-encoded)."""
    text = json.dumps(document, sort_keys=True)
    return {data_key: base64.b64encode(text.encode()).decode() if kind == "Secret" else text}


def _older(rv: str, than: str) -> bool:
    try:
        return int(rv) < int(than)
    except ValueError:
        return False
