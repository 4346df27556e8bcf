"""One JSON document of a fleet kept in one ConfigMap, watched by every broker and written with
compare-and-set: the shape of the cluster's ACLs (kube_acls.py).

The ConfigMap (label flotilla.io/cluster=<cluster>, owned by the KafkaCluster when the brokers know
its uid) holds the document under one data key. `on_document` gets every version that parses (None
when the ConfigMap is absent); a write reads the ConfigMap, applies a function to its document and
replaces it carrying the resourceVersion read (create-if-absent the first time), reading again
when another writer won. One object, watched with a name field selector, needs RBAC on that name.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from typing import Any, Mapping

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_api
from broker.metadata import kube_objects as ko
from broker.metadata.store import Conflict, StoreUnavailable

log = logging.getLogger(__name__)

CAS_ATTEMPTS = 8
REQUEST_TIMEOUT_S = 10
WATCH_TIMEOUT_S = 240


class ConfigMapDocument:
    def __init__(self, metadata_store, name: str, data_key: str, what: str,
                 on_document: Callable[[dict | None], None]) -> None:
        self._meta = metadata_store  # its namespace and cluster name, known once it has started
        self.name = name
        self.data_key = data_key
        self.what = what  # for log lines: "ACLs"
        self._on_document = on_document
        self._api: client.ApiClient | None = None
        self._core: client.CoreV1Api | None = None
        self._task: asyncio.Task | None = None
        self._rv: str | None = None
        self.namespace: str | None = None

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

    def _document(self, obj: Mapping[str, Any] | None) -> dict | None:
        raw = (obj.get("data") or {}).get(self.data_key) if obj else None
        return json.loads(raw) if raw else None

    def _apply(self, obj: Mapping[str, Any] | None) -> None:
        rv = None if obj is None else obj["metadata"].get("resourceVersion")
        if obj is not None and self._rv is not None and rv is not None and _older(rv, self._rv):
            return  # we wrote something newer already
        self._rv = rv
        try:
            doc = self._document(obj)
            self._on_document(doc)
        except (ValueError, KeyError, TypeError) as e:
            log.error("%s: ConfigMap %s/%s does not parse (%s); keeping those in force",
                      self.what, self.namespace, self.name, e)

    async def _relist(self) -> str:
        listing = await kube_api.call(self._core.list_namespaced_config_map(
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
                    async for ev in w.stream(self._core.list_namespaced_config_map, self.namespace,
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
                    log.info("%s: watch broke (%s %s); listing again", self.what, e.status, e.reason)
                rv = None
            except Exception as e:
                log.info("%s: watch broke (%s); listing again", self.what, e or type(e).__name__)
                rv = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def update(self, change: Callable[[dict | None], dict]) -> dict:
        """Write `change(current document)` with compare-and-set; returns the document written."""
        for _ in range(CAS_ATTEMPTS):
            try:
                current = await kube_api.call(self._core.read_namespaced_config_map(
                    self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S))
                current = self._api.sanitize_for_serialization(current)
            except ApiException as e:
                if e.status != 404:
                    raise StoreUnavailable(f"{self.what}: {e.status} {e.reason}") from None
                current = None
            new = change(self._document(current))
            data = {self.data_key: json.dumps(new, sort_keys=True)}
            try:
                if current is None:
                    body = {"apiVersion": "v1", "kind": "ConfigMap", "data": data, "metadata": {
                        "name": self.name, "namespace": self.namespace,
                        "labels": ko.labels(self._meta.cluster_name, **{ko.CREATED_BY_LABEL: ko.CREATED_BY_FLEET})}}
                    owners = ko.owner_references(self._meta.cluster_name, getattr(self._meta, "owner_uid", None))
                    if owners:  # deleted with the KafkaCluster
                        body["metadata"]["ownerReferences"] = owners
                    written = await kube_api.call(self._core.create_namespaced_config_map(
                        self.namespace, body, _request_timeout=REQUEST_TIMEOUT_S))
                else:
                    body = {**current, "data": data}  # carries metadata.resourceVersion: compare-and-set
                    written = await kube_api.call(self._core.replace_namespaced_config_map(
                        self.name, self.namespace, body, _request_timeout=REQUEST_TIMEOUT_S))
            except ApiException as e:
                if e.status == 409:
                    continue  # someone else wrote first (or created it): read again
                raise StoreUnavailable(f"{self.what}: {e.status} {e.reason}") from None
            self._apply(self._api.sanitize_for_serialization(written))
            return new
        raise Conflict(f"{self.what}: {CAS_ATTEMPTS} concurrent writers won in a row; try again")


def _older(rv: str, than: str) -> bool:
    try:
        return int(rv) < int(than)
    except ValueError:
        return False
