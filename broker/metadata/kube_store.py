"""Cluster metadata on the Kubernetes API: Leases and KafkaTopic resources (see kube_objects.py).

Reads: `start` lists the cluster's Leases and KafkaTopics, then one watch per kind keeps a local
copy current and republishes the immutable image after each batch of events (a change reaches
every broker as fast as the API server streams it). A watch that expires (410 Gone) or breaks is
followed by a fresh list. While the API server cannot be reached the image keeps serving what it
last saw, and broker liveness is frozen: nobody can renew a Lease then, so nobody is dropped for
it (see LeaseClock.restart).

Writes, each a single API call and so a single compare-and-swap:
- create-if-absent: create_topic (POST; 409 -> TopicExists), register_broker (POST of the broker's
  Lease, or a CAS takeover of an expired one; a live one of another incarnation -> DuplicateBroker);
- compare-and-set: update_topic (PUT of spec and/or of /status with the record's version as
  resourceVersion; 409 -> Conflict),
  campaign (acquire or renew the controller Lease with a PUT on the resourceVersion we read),
  allocate_producer_ids (read the producer-id Lease, PUT it with the block's end; 409 -> again);
- delete_topic (DELETE).
Each write's answer is applied to the local copy at once, so a caller reads its own write.
An unreachable API server makes every write raise StoreUnavailable (retriable).

The broker's own Lease is renewed in the background every third of its duration. The controller
Lease is renewed only by `campaign` (the controller calls it in a loop); `is_controller` turns
false when RENEW_DEADLINE of the duration has passed since the last successful campaign, before
any other broker can acquire it.

This module holds the lifecycle, the image, whether the view is current and the lease-lapse clock;
the list-and-watch reflector is kube_reflector.py, KafkaTopic objects and the topic writes
kube_topics.py, the Leases kube_leases.py (parts of one class, KubernetesMetadataStore).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_api
from broker.metadata import kube_objects as ko
from broker.metadata.kube_leases import KubeLeases
from broker.metadata.kube_reflector import LEASES, REQUEST_TIMEOUT_S, RETRY_MAX_S, KubeReflector
from broker.metadata.kube_topics import KubeTopics, topic_write_timeout  # noqa: F401 (part of this module's API)
from broker.metadata.lease_clock import LeaseClock
from broker.metadata.store import (BrokerRegistration, Conflict, MetadataError, MetadataImage, MetadataStore,
                                   StoreUnavailable, TopicRecord)

log = logging.getLogger(__name__)

# Of the Lease duration after its last renewal was sent: a broker stops taking writes as a leader.
# Another broker judges the Lease expired no sooner than one duration after it *saw* that renewal
# (by its own clock), which it cannot see before it was sent; the remaining tenth covers clock
# rates that differ by up to 10% over one Lease (docs/replication.md, "Timing assumptions").
LEADER_FENCE_AT = 0.9
START_TIMEOUT_S = 10.0      # one start() waits this long for a first answer (the broker then tries again)


class KubernetesMetadataStore(KubeReflector, KubeTopics, KubeLeases, MetadataStore):
    shared_by_fleet = True

    def __init__(self, *, cluster_id: str, cluster_name: str, namespace: str | None = None,
                 lease_duration_s: float = 15.0, default_partitions: int = 1,
                 default_replication_factor: int = 1, delete_topic_enable: bool = True,
                 owner_uid: str | None = None) -> None:
        super().__init__()
        self.cluster_id = cluster_id
        self.cluster_name = cluster_name
        self.owner_uid = owner_uid or None  # the KafkaCluster's uid: owner of what the brokers create
        self.namespace = namespace or None
        self.lease_seconds = max(1, math.ceil(lease_duration_s))
        self.lease_duration_s = float(self.lease_seconds)
        self._contact_s = max(1.0, self.lease_duration_s / 3)
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable  # published on the controller Lease
        self.image = MetadataImage.build(cluster_id, {}, None, {})
        self._api: client.ApiClient | None = None
        self._objects: client.CustomObjectsApi | None = None
        self._clock = LeaseClock()
        # Local copies, by object name.
        self._leases: dict[str, dict[str, Any]] = {}
        self._topic_objs: dict[str, dict[str, Any]] = {}
        self._topics: dict[str, TopicRecord] = {}
        self._changed: set[str] = set()            # topic names set or dropped since the last image
        self._object_of: dict[str, str] = {}       # topic name -> object name holding it
        self._shadowed: set[str] = set()           # objects naming a topic another object holds
        self._known_rv: dict[str, str] = {}        # "kind/object" -> newest resourceVersion applied
        self._connected = {"leases": False, "topics": False}
        self.relists = {"leases": 0, "topics": 0}  # lists after the first (watch expired or broke)
        self.expired_watches = {"leases": 0, "topics": 0}  # 410 Gone: resourceVersion too old
        self._contact_at = 0.0                     # monotonic time of the API server's last answer
        self._current = False                      # whether the view is current (see _judge_view)
        self._current_since: float | None = None   # monotonic time it last became current
        self._stale_since: float | None = None
        self._watches: dict[str, asyncio.Task] = {}
        self._probe: asyncio.Task | None = None
        self._dirty = False
        self._tasks: list[asyncio.Task] = []
        self._registration: BrokerRegistration | None = None
        self._renewed_sent_at: float | None = None  # monotonic send time of the last renewal that landed
        self._lapsed = False
        self._renewer: asyncio.Task | None = None
        self.registration_lost = asyncio.Event()
        self._controller_node: int | None = None
        self._controller_until = 0.0
        self._status_subresource = True  # until the API server says the CRD has none
        # Topics whose KafkaTopic lost what the brokers own (see _kept); the controller writes it back.
        self._repairs: set[str] = set()
        self._conflicts: set[str] = set()  # objects shadowed by an older one naming the same topic
        self._repair_tasks: set[asyncio.Task] = set()
        # Topics whose KafkaTopic annotated flotilla.io/managed=false was deleted: kept in the image
        # until a KafkaTopic holds them again (the controller writes one, `_recreate`).
        self._detached: dict[str, TopicRecord] = {}
        self._deleting: set[str] = set()  # objects our own delete_topic is deleting (never a detach)

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        self._api, default_ns = await kube_api.connect()
        self.namespace = self.namespace or default_ns
        self._objects = client.CustomObjectsApi(self._api)
        try:
            leases_rv, topics_rv = await self._first_lists()
        except ApiException as e:
            await self._api.close()
            self._api = None
            if e.status == 404:
                raise MetadataError(
                    f"the KafkaTopic resource ({ko.TOPIC_PLURAL}.{ko.GROUP}) is not installed: "
                    "apply the CRDs first (kubectl apply -f crds/)") from None
            if e.status in (401, 403):
                raise MetadataError(f"not allowed to read Leases and KafkaTopics in namespace "
                                    f"{self.namespace}: {e.reason}") from None
            raise
        except BaseException:
            await self._api.close()
            self._api = None
            raise
        self._publish_now()
        self._watches = {kind: asyncio.create_task(self._watch(kind, rv), name=f"metadata-watch-{kind}")
                         for kind, rv in (("leases", leases_rv), ("topics", topics_rv))}
        self._tasks = [*self._watches.values(),
                       asyncio.create_task(self._expiry_loop(), name="metadata-lease-expiry")]
        log.info("metadata: Kubernetes namespace %s, cluster %s: %d broker(s), %d topic(s)",
                 self.namespace, self.cluster_name, len(self.image.brokers), len(self.image.topics))

    async def _first_lists(self) -> tuple[str, str]:
        """The first view, retried while the API server is briefly unable to answer (it answers
        429 "storage is (re)initializing" right after a CRD is installed, 503 while starting)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        delay = 0.1
        warned = False
        while True:
            try:
                return await self._relist("leases"), await self._relist("topics")
            except StoreUnavailable as e:
                if time.monotonic() + delay > deadline:
                    raise  # the broker retries start() with its own back-off (metadata/store_wait.py)
                if not warned:  # one line per start(), not per quick retry
                    log.warning("metadata: waiting for the Kubernetes API: %s", e)
                    warned = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)

    async def close(self) -> None:
        tasks = self._tasks + list(self._repair_tasks) + [t for t in (self._renewer, self._probe) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks, self._renewer = [], None
        if self._api is None:
            return
        try:
            await asyncio.wait_for(self._release(), REQUEST_TIMEOUT_S)
        except (StoreUnavailable, ApiException, asyncio.TimeoutError) as e:
            log.warning("metadata: could not release Leases on close: %s", e)
        await self._api.close()
        self._api = None

    async def _release(self) -> None:
        """Hand back what this process holds, so others need not wait for expiry: the controller
        Lease (released, as client-go does) and this broker's Lease (deleted if still ours)."""
        if self._controller_node is not None:
            name = ko.controller_lease_name(self.cluster_name)
            cur = self._leases.get(name)
            if cur and ko.controller_from_lease(cur) == self._controller_node:
                self._controller_until = 0.0
                body = ko.controller_lease(self.cluster_name, None, 1, base=cur,
                                           delete_topic_enable=self.delete_topic_enable, owner_uid=self.owner_uid)
                try:
                    await self._write_lease("replace", name, body)
                except (Conflict, ApiException):
                    pass
        if self._registration is not None:
            name = ko.broker_lease_name(self.cluster_name, self._registration.node_id)
            cur = self._leases.get(name)
            if cur and ko.lease_spec(cur).get("holderIdentity") == self._registration.incarnation:
                try:
                    await self._call(self._objects.delete_namespaced_custom_object(
                        *LEASES[:2], self.namespace, LEASES[2], name,
                        body={"preconditions": {"resourceVersion": cur["metadata"]["resourceVersion"]}},
                        _request_timeout=REQUEST_TIMEOUT_S))
                except ApiException:
                    pass
            self._registration = None

    # -- the image ---------------------------------------------------------------------------
    def _live_brokers(self) -> dict[int, BrokerRegistration]:
        out: dict[int, BrokerRegistration] = {}
        for name, obj in self._leases.items():
            reg = ko.registration_from_lease(obj)
            if reg is not None and self._clock.live(name):
                out[reg.node_id] = reg
        return out

    def _live_controller(self) -> int | None:
        name = ko.controller_lease_name(self.cluster_name)
        obj = self._leases.get(name)
        if obj is None or not self._clock.live(name):
            return None
        return ko.controller_from_lease(obj)

    def _set_topic(self, name: str, rec: TopicRecord) -> None:
        self._topics[name] = rec
        self._changed.add(name)

    def _publish_now(self) -> None:
        """Publish what changed since the last image, at the cost of the change: the topics set or
        dropped since (`with_topics`, so subscribers look at those alone), and the live brokers and
        controller only if they differ. A Lease renewal that changes neither publishes nothing: no
        subscriber (the controller's planning, the replica manager) runs for it."""
        self._dirty = False
        image = self.image
        if self._judge_view():
            brokers, controller = self._live_brokers(), self._live_controller()
        else:  # stale view: keep who was live (nobody can renew now); see the module docstring
            brokers, controller = image.brokers, image.controller_id
        changed, self._changed = self._changed, set()
        puts = [self._topics[n] for n in changed if n in self._topics and image.topics.get(n) is not self._topics[n]]
        deletes = [n for n in changed if n not in self._topics and n in image.topics]
        if puts or deletes:
            image = image.with_topics(puts, deletes)
        if brokers != image.brokers or controller != image.controller_id:
            image = image.with_members(brokers, controller)
        if image is not self.image:
            self._publish(image)

    def _publish_soon(self) -> None:
        """Coalesce a burst of watch events into one new image."""
        if not self._dirty:
            self._dirty = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        if self._dirty:
            self._publish_now()

    async def _call(self, awaitable):
        """One API call; any answer but "unavailable" shows the API server is there."""
        try:
            result = await kube_api.call(awaitable)
        except ApiException:
            self._contact_at = time.monotonic()
            raise
        self._contact_at = time.monotonic()
        return result

    def _judge_view(self) -> bool:
        """Whether the local view is current: both watches running and an answer from the API
        server within a third of the Lease duration. Only then are Leases judged by time; when
        the view becomes current again after a gap, Leases live at its start are judged afresh
        (no one could renew, or we could not see it)."""
        now = time.monotonic()
        current = all(self._connected.values()) and now - self._contact_at < self._contact_s
        if current and not self._current:
            if self._stale_since is not None:
                self._clock.restart(self._stale_since)
                log.info("metadata: the Kubernetes API answers again and the watches listed afresh; "
                         "the view is current")
            self._stale_since = None
            self._current_since = now
        elif self._current and not current:
            self._stale_since = min(now, self._contact_at + self._contact_s)
            self._current_since = None
            log.warning("metadata: no answer from the Kubernetes API; serving the last image")
            self._restart_watches()
        self._current = current
        return current

    def current_since(self) -> float | None:
        return self._current_since if self._current else None

    def _restart_watches(self) -> None:
        """The view went stale: the watches' connections may be cut silently (their packets
        dropped, TCP still retransmitting), and one that later answers a probe's peer is no
        proof that they deliver again. Each watch starts over with a list; the view is current
        again only once both have listed (issue 35: a healed broker served stale leaderships for
        up to 16 s while its watches waited out TCP retransmission)."""
        for kind, task in list(self._watches.items()):
            if task.done():
                continue
            self._connected[kind] = False
            task.cancel()
            self._watches[kind] = asyncio.get_running_loop().create_task(
                self._watch_after(kind, task), name=f"metadata-watch-{kind}")
            self._tasks = [t for t in self._tasks if not t.done()] + [self._watches[kind]]

    async def _watch_after(self, kind: str, old: asyncio.Task) -> None:
        await asyncio.gather(old, return_exceptions=True)
        await self._watch(kind, None)

    async def _expiry_loop(self) -> None:
        """Drop brokers (and the controller) whose Leases expired by time, without any event, and
        probe the API server when nothing else has talked to it lately."""
        tick = min(0.5, self.lease_duration_s / 10)
        last = time.monotonic()
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            if now - last > tick + self._contact_s:
                # This process stalled (event loop blocked, machine suspended): renewals that
                # happened meanwhile were not seen yet, so judge Leases afresh from the stall.
                log.warning("metadata: event loop stalled for %.1fs", now - last - tick)
                self._clock.restart(last)
            last = now
            if time.monotonic() - self._contact_at > self._contact_s / 2 and (self._probe is None or self._probe.done()):
                self._probe = asyncio.create_task(self._probe_api())
            self._check_lapse()
            was_current = self._current
            if self._judge_view() != was_current or (self._current and (
                    self._live_brokers().keys() != self.image.brokers.keys()
                    or self._live_controller() != self.image.controller_id)):
                self._publish_now()

    async def _probe_api(self) -> None:
        try:
            await self._call(self._objects.get_namespaced_custom_object(
                *LEASES[:2], self.namespace, LEASES[2], ko.controller_lease_name(self.cluster_name),
                _request_timeout=self._contact_s))
        except (StoreUnavailable, ApiException):
            pass

    def _renewed(self, sent: float) -> None:
        self._renewed_sent_at = max(sent, self._renewed_sent_at or sent)
        if self._lapsed and not self.registration_may_have_lapsed():
            log.info("metadata: broker Lease renewed again")
            self._lapsed = False

    def registration_may_have_lapsed(self) -> bool:
        if self._renewed_sent_at is None:
            return False  # not registered yet: leads nothing
        return self._registration is None or (
            time.monotonic() >= self._renewed_sent_at + LEADER_FENCE_AT * self.lease_duration_s)

    def _check_lapse(self) -> None:
        """Tell subscribers, at every tick while this broker's registration may have lapsed (a
        leader answers its waiting writes then, instead of at their timeout)."""
        if not self.registration_may_have_lapsed():
            return
        if not self._lapsed:
            self._lapsed = True
            log.warning("metadata: broker Lease not renewed for %.1fs (%.0f%% of its duration): partitions "
                        "led here whose followers stop fetching take no writes until it is",
                        time.monotonic() - self._renewed_sent_at, 100 * LEADER_FENCE_AT)
        for cb in list(self._lapse_callbacks):
            try:
                cb()
            except Exception:
                log.exception("metadata: registration-lapse subscriber failed")


