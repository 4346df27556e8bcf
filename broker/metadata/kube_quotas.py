"""Client quotas of a fleet in the Kubernetes API: one ConfigMap per cluster.

`<cluster>-client-quotas` (label flotilla.io/cluster=<cluster>, owned by the KafkaCluster when the
brokers know its uid) holds every dynamic quota as
the JSON document the file backend writes (data key `quotas.json`). Every broker watches it, so
an AlterClientQuotas answered by any broker is applied by all of them as soon as their watch
delivers the change (well under a second on a healthy API server). Writes are compare-and-set on
the ConfigMap's resourceVersion (a lost race reads again and reapplies the one entity's change);
the first write creates the ConfigMap (create-if-absent). One object, not one per entity: quotas
are few and small, and one watch with a name field selector needs RBAC on one object name only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from typing import Any, Mapping

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_api
from broker.metadata import kube_objects as ko
from broker.metadata.client_quotas import ClientQuotaStore, QuotaEntity, _from_doc, _to_doc, apply_changes
from broker.metadata.store import Conflict, StoreUnavailable

log = logging.getLogger(__name__)

DATA_KEY = "quotas.json"
CAS_ATTEMPTS = 8
REQUEST_TIMEOUT_S = 10
WATCH_TIMEOUT_S = 240


def config_map_name(cluster_name: str) -> str:
    return f"{cluster_name}-client-quotas"


def parse_config_map(obj: Mapping[str, Any] | None) -> dict[QuotaEntity, dict[str, float]]:
    if not obj:
        return {}
    raw = (obj.get("data") or {}).get(DATA_KEY)
    return _from_doc(json.loads(raw)) if raw else {}


class KubernetesClientQuotaStore(ClientQuotaStore):
    def __init__(self, metadata_store) -> None:
        super().__init__()
        self._meta = metadata_store  # its namespace and cluster name, known once it has started
        self._api: client.ApiClient | None = None
        self._core: client.CoreV1Api | None = None
        self._task: asyncio.Task | None = None
        self._rv: str | None = None
        self.name = config_map_name(metadata_store.cluster_name)
        self.namespace: str | None = None

    async def start(self) -> None:
        self._api, default_ns = await kube_api.connect()
        self.namespace = self._meta.namespace or default_ns
        self._core = client.CoreV1Api(self._api)
        list_rv = await self._relist()
        self._task = asyncio.create_task(self._watch(list_rv), name="metadata-watch-client-quotas")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._api is not None:
            await self._api.close()
            self._api = None

    # -- reads -------------------------------------------------------------------------------

    def _apply(self, obj: Mapping[str, Any] | None) -> None:
        rv = None if obj is None else obj["metadata"].get("resourceVersion")
        if obj is not None and self._rv is not None and rv is not None and _older(rv, self._rv):
            return  # we wrote something newer already
        self._rv = rv
        try:
            quotas = parse_config_map(obj)
        except (ValueError, KeyError, TypeError) as e:
            log.error("client quotas: ConfigMap %s/%s does not parse (%s); keeping the quotas in force",
                      self.namespace, self.name, e)
            return
        if quotas != {e: dict(v) for e, v in self.quotas.items()}:
            log.info("client quotas: %d entit%s from %s", len(quotas), "y" if len(quotas) == 1 else "ies", self.name)
            self._publish(quotas)

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
                    log.info("client quotas: watch broke (%s %s); listing again", e.status, e.reason)
                rv = None
            except Exception as e:
                log.info("client quotas: watch broke (%s); listing again", e or type(e).__name__)
                rv = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    # -- writes ------------------------------------------------------------------------------

    async def alter(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        for _ in range(CAS_ATTEMPTS):
            try:
                current = await kube_api.call(self._core.read_namespaced_config_map(
                    self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S))
                current = self._api.sanitize_for_serialization(current)
            except ApiException as e:
                if e.status != 404:
                    raise StoreUnavailable(f"client quotas: {e.status} {e.reason}") from None
                current = None
            new = apply_changes(parse_config_map(current), entity, changes)
            data = {DATA_KEY: json.dumps(_to_doc(new), sort_keys=True)}
            try:
                if current is None:
                    body = {"apiVersion": "v1", "kind": "ConfigMap", "data": data, "metadata": {
                        "name": self.name, "namespace": self.namespace,
                        "labels": ko.labels(self._meta.cluster_name, **{ko.CREATED_BY_LABEL: ko.CREATED_BY_FLEET})}}
                    owners = ko.owner_references(self._meta.cluster_name, getattr(self._meta, "owner_uid", None))
                    if owners:  # deleted with the KafkaCluster, as the fleet's Leases and KafkaTopics
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
                raise StoreUnavailable(f"client quotas: {e.status} {e.reason}") from None
            self._apply(self._api.sanitize_for_serialization(written))
            return
        raise Conflict(f"client quotas: {CAS_ATTEMPTS} concurrent writers won in a row; try again")


def _older(rv: str, than: str) -> bool:
    try:
        return int(rv) < int(than)
    except ValueError:
        return False
