"""The Kubernetes store's reflector: list each kind (Leases, KafkaTopics), then watch it from the
listed resourceVersion, applying every event to the local copy; a watch that expires (410 Gone) or
breaks is followed by a fresh list (kube_store.py restarts both when its view goes stale)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any

from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_objects as ko
from broker.metadata.store import StoreUnavailable

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 5.0     # one API call; beyond it the API server counts as unreachable
WATCH_TIMEOUT_S = 60        # the API server ends each watch after about this long; we resume it
RETRY_MAX_S = 2.0

LEASES = ("coordination.k8s.io", "v1", "leases")
TOPICS = (ko.GROUP, ko.VERSION, ko.TOPIC_PLURAL)


def _rv_newer(new: str, old: str | None) -> bool:
    """Whether resourceVersion `new` comes after `old`. They are etcd revisions (integers) in
    practice; if one ever is not, treat the newer event as newer."""
    if old is None:
        return True
    try:
        return int(new) > int(old)
    except ValueError:
        return new != old


class KubeReflector:
    """Part of KubernetesMetadataStore (metadata/kube_store.py), whose state it uses."""

    # -- applying objects to the local copy --------------------------------------------------
    def _apply(self, kind: str, event: str, obj: dict[str, Any]) -> bool:
        name = obj["metadata"]["name"]
        if event != "DELETED" and ko.cluster_of(obj) != self.cluster_name:
            # Another cluster's (lists and watches take the namespace's objects; membership is
            # decided here, by either cluster label): one that left this cluster is gone for it.
            held = self._leases if kind == "leases" else self._topic_objs
            if name not in held:
                return False
            event = "DELETED"
        rv = obj["metadata"].get("resourceVersion", "")
        key = f"{kind}/{name}"
        if not _rv_newer(rv, self._known_rv.get(key)):
            return False  # our own write already applied this (or a newer) version
        self._known_rv[key] = rv
        if event == "DELETED":
            # Nothing older can follow a deletion in the stream: forget the object entirely (only
            # our own deletes keep a tombstone until the watch catches up, see delete_topic).
            del self._known_rv[key]
        if kind == "leases":
            if event == "DELETED":
                self._leases.pop(name, None)
                self._clock.forget(name)
            else:
                self._leases[name] = obj
                spec = ko.lease_spec(obj)
                self._clock.observe(name, spec.get("holderIdentity") or "", spec.get("renewTime") or "",
                                    float(spec.get("leaseDurationSeconds") or self.lease_duration_s),
                                    ko.parse_time(spec.get("renewTime")))
        elif event == "DELETED":
            old = self._topic_objs.get(name)
            if old is not None and name not in self._deleting and ko.owned_by(old, self.owner_uid):
                self._owner_check(name, old)  # the garbage collector's, with the KafkaCluster?
            else:
                self._drop_topic_object(name, detach=name not in self._deleting)
        else:
            self._put_topic_object(name, obj)
        return True

    # -- list and watch ----------------------------------------------------------------------
    def _list_call(self, kind: str):
        group, version, plural = LEASES if kind == "leases" else TOPICS
        return self._objects.list_namespaced_custom_object, (group, version, self.namespace, plural)

    @staticmethod
    def _selector(kind: str) -> str | None:
        """What the API server filters: our Leases by their role label; KafkaTopics not at all (a
        user's names its cluster by flotilla.io/cluster or the older app.kubernetes.io/instance,
        and a selector cannot say "either"). `_apply` keeps this cluster's objects only."""
        return ko.LEASE_ROLE_LABEL if kind == "leases" else None

    async def _relist(self, kind: str) -> str:
        fn, args = self._list_call(kind)
        listing = await self._call(fn(*args, label_selector=self._selector(kind),
                                         _request_timeout=REQUEST_TIMEOUT_S * 2))
        list_rv = listing["metadata"]["resourceVersion"]
        items = {o["metadata"]["name"]: o for o in listing.get("items", [])}
        current = self._leases if kind == "leases" else self._topic_objs
        for name in [n for n in current if n not in items]:
            # Gone, unless we wrote it after the list was taken.
            self._apply(kind, "DELETED", {"metadata": {"name": name, "resourceVersion": list_rv}})
        for obj in items.values():
            self._apply(kind, "MODIFIED", obj)
        self._connected[kind] = True
        return list_rv

    def _lost(self, kind: str, why: Any) -> None:
        if self._connected[kind]:
            log.info("metadata: %s watch broke (%s); listing again", kind, why)
        self._connected[kind] = False

    async def _watch(self, kind: str, rv: str | None) -> None:
        fn, args = self._list_call(kind)
        backoff = 0.1
        while True:
            try:
                if rv is None:
                    rv = await self._relist(kind)
                    self.relists[kind] += 1
                    self._publish_soon()
                    backoff = 0.1
                w = watch.Watch(return_type="object")
                try:
                    async for ev in w.stream(fn, *args, label_selector=self._selector(kind),
                                             resource_version=rv, allow_watch_bookmarks=True,
                                             timeout_seconds=WATCH_TIMEOUT_S + random.randint(0, 10),
                                             _request_timeout=WATCH_TIMEOUT_S + 30):
                        rv = w.resource_version or rv
                        self._contact_at = time.monotonic()
                        if ev["type"] in ("ADDED", "MODIFIED", "DELETED") and \
                                self._apply(kind, ev["type"], ev["raw_object"]):
                            self._publish_soon()
                finally:
                    await w.close()
            except asyncio.CancelledError:
                raise
            except ApiException as e:
                if e.status == 410:  # our resourceVersion is too old: list again
                    log.info("metadata: %s watch expired; listing again", kind)
                    self.expired_watches[kind] += 1
                    rv = None
                    continue
                self._lost(kind, f"{e.status} {e.reason}")
                rv = None
            except (StoreUnavailable, OSError, asyncio.TimeoutError, Exception) as e:
                self._lost(kind, e or type(e).__name__)
                rv = None
            self._publish_soon()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_MAX_S)
