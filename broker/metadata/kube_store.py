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
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import random
import time
from typing import Any

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_api
from broker.metadata import kube_objects as ko
from broker.metadata.lease_clock import LeaseClock
from broker.metadata.store import (NO_TOPIC_ID, BrokerRegistration, ClusterIdMismatch, Conflict, DuplicateBroker, MetadataError,
                                   MetadataImage, MetadataStore, QuorumView, StoreUnavailable, TopicExists,
                                   TopicRecord, TopicTooLarge, UnknownTopic)

log = logging.getLogger(__name__)

RENEW_DEADLINE = 2 / 3      # of the Lease duration: the controller stops before the Lease can expire
# Of the Lease duration after its last renewal was sent: a broker stops taking writes as a leader.
# Another broker judges the Lease expired no sooner than one duration after it *saw* that renewal
# (by its own clock), which it cannot see before it was sent; the remaining tenth covers clock
# rates that differ by up to 10% over one Lease (docs/replication.md, "Timing assumptions").
LEADER_FENCE_AT = 0.9
REQUEST_TIMEOUT_S = 5.0     # one API call; beyond it the API server counts as unreachable
# A KafkaTopic near etcd's 1.5 MiB limit takes the API server (schema validation, conversion, etcd)
# far longer than a Lease: its write gets more time per byte, not a false "unreachable".
TOPIC_WRITE_S_PER_MIB = 20.0


def topic_write_timeout(body: dict[str, Any]) -> float:
    """The request timeout for writing `body`: REQUEST_TIMEOUT_S plus time for its size."""
    size = len(json.dumps(body, separators=(",", ":")))
    return REQUEST_TIMEOUT_S + TOPIC_WRITE_S_PER_MIB * size / (1 << 20)
WATCH_TIMEOUT_S = 60        # the API server ends each watch after about this long; we resume it
RETRY_MAX_S = 2.0
PRODUCER_ID_ATTEMPTS = 20  # compare-and-swap tries for one block before giving up (retriable)
START_TIMEOUT_S = 10.0      # one start() waits this long for a first answer (the broker then tries again)

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


class KubernetesMetadataStore(MetadataStore):
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

    def _put_topic_object(self, name: str, obj: dict[str, Any]) -> None:
        rec = ko.record_from_topic(obj, self.default_partitions, self.default_replication_factor)
        old = self._topic_objs.get(name)
        if old is not None and ko.topic_name_of(old) != rec.name:
            self._drop_topic_object(name)  # spec.topicName was edited: the old name is gone
        elif old is not None:
            rec = self._kept(name, old, obj, rec)
        elif rec.name in self._detached:
            rec = self._adopt(name, rec)
        holder = self._object_of.get(rec.name)
        if holder is not None and holder != name:
            # Two KafkaTopics claim one topic name: the older object keeps it.
            first = self._topic_objs[holder]["metadata"].get("creationTimestamp", "")
            if (first, holder) <= (obj["metadata"].get("creationTimestamp", ""), name):
                if name not in self._shadowed:
                    log.warning("KafkaTopic %s names topic %r, which KafkaTopic %s already holds; ignored",
                                name, rec.name, holder)
                self._topic_objs[name] = obj
                self._shadowed.add(name)
                if ko.conflict_status(obj, holder, rec.name) is not None:
                    self._conflicts.add(name)
                    self._repair_soon()
                return
            self._shadowed.add(holder)
            self._conflicts.add(holder)
        self._shadowed.discard(name)
        self._conflicts.discard(name)
        self._topic_objs[name] = obj
        self._object_of[rec.name] = name
        self._set_topic(rec.name, rec)
        self._check_status(name, obj, rec)

    def _check_status(self, name: str, obj: dict[str, Any], rec: TopicRecord, always: bool = False) -> None:
        """If the status does not show the topic as it is in force yet (a new spec generation, a
        spec Kafka refuses, an object of an older version), the controller writes it. Only the
        controller looks (a new one looks at every topic once, in `campaign`); not for a topic it
        is about to assign anyway (that write carries the status)."""
        if not self._status_subresource or not (always or self._is_acting_controller()):
            return
        planning = rec.problem is None and (rec.assignment is None or len(rec.assignment) < rec.partitions)
        if not planning and not ko.status_current(obj, rec):
            self._repairs.add(rec.name)
            self._repair_soon()

    def _is_acting_controller(self) -> bool:
        return self._controller_node is not None and self.is_controller(self._controller_node)

    def _kept(self, name: str, old: dict[str, Any], obj: dict[str, Any], rec: TopicRecord) -> TopicRecord:
        """Defence in depth behind the CRD's status subresource and CEL rules (an older CRD has
        neither): the same object (same uid) whose status lost the topic id we know, or has
        another, or lost or shortened its assignment, is not a new topic; taking it as one would
        delete every replica's data and restart the leader epochs at 0. The image keeps the known
        id and assignment and the controller writes them back (`_repair_status`). Only a deleted
        object, or one re-created (a new uid), ends a topic."""
        known = self._topics.get(rec.name)
        if known is None or self._object_of.get(rec.name) != name or known.topic_id == NO_TOPIC_ID \
                or old["metadata"].get("uid") != obj["metadata"].get("uid"):
            return rec
        lost = rec.topic_id != known.topic_id or (known.assignment is not None and (
            rec.assignment is None or len(rec.assignment) < len(known.assignment)))
        if not lost:
            self._repairs.discard(rec.name)
            return rec
        if rec.name not in self._repairs:
            log.warning("KafkaTopic %s: status lost or changed topic %r's id or assignment (resourceVersion %s); "
                        "keeping id %s and the known assignment, to be written back", name, rec.name,
                        rec.version, ko.topic_id_text(known.topic_id))
        self._repairs.add(rec.name)
        self._repair_soon()
        return dataclasses.replace(rec, topic_id=known.topic_id, assignment=known.assignment)

    def _adopt(self, name: str, rec: TopicRecord) -> TopicRecord:
        """A KafkaTopic for a detached topic (the one the controller writes, or a user's): it holds
        the topic, with its id and assignment; a different topic id is another topic."""
        det = self._detached.pop(rec.name)
        if rec.topic_id not in (NO_TOPIC_ID, det.topic_id):
            return rec
        if rec.topic_id == NO_TOPIC_ID or rec.assignment is None:
            self._repairs.add(rec.name)  # its status is written next (`_kept` protects it meanwhile)
            self._repair_soon()
        log.info("KafkaTopic %s holds detached topic %r (id %s) again", name, rec.name, ko.topic_id_text(det.topic_id))
        return dataclasses.replace(rec, topic_id=det.topic_id, assignment=rec.assignment or det.assignment)

    def _repair_soon(self) -> None:
        """The controller (only it, so brokers do not race) writes back kept or lagging statuses,
        the ResourceConflict of shadowed KafkaTopics, and KafkaTopics for detached topics."""
        if not (self._repairs or self._conflicts) or self._controller_node is None \
                or not self.is_controller(self._controller_node):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for topic in list(self._repairs):
            work = self._recreate(topic) if topic in self._detached else self._repair_status(topic)
            task = loop.create_task(work, name=f"metadata-repair-{topic}")
            self._repair_tasks.add(task)
            task.add_done_callback(self._repair_tasks.discard)
        self._repairs.clear()
        for name in list(self._conflicts):
            task = loop.create_task(self._write_conflict(name), name=f"metadata-conflict-{name}")
            self._repair_tasks.add(task)
            task.add_done_callback(self._repair_tasks.discard)
        self._conflicts.clear()

    async def _write_conflict(self, name: str) -> None:
        """Ready=False, reason ResourceConflict, on a KafkaTopic naming a topic another holds."""
        obj = self._topic_objs.get(name)
        if obj is None or name not in self._shadowed:
            return
        topic = ko.topic_name_of(obj)
        holder = self._object_of.get(topic)
        status = ko.conflict_status(obj, holder or "?", topic) if holder else None
        if status is None:
            return
        body = json.loads(json.dumps(obj))
        body["metadata"].pop("managedFields", None)
        body["status"] = status
        try:
            written = await self._write_topic(name, body, subresource=True)
        except Conflict:
            return  # a newer version arrived: looked at again
        except (StoreUnavailable, MetadataError) as e:
            log.warning("KafkaTopic %s: conflict not written to status yet: %s", name, e)
            self._conflicts.add(name)
            return
        if name in self._shadowed:
            self._topic_objs[name] = written

    async def _repair_status(self, topic: str) -> None:
        rec = self._topics.get(topic)
        if rec is None:
            return
        name = self._object_of.get(topic)
        obj = self._topic_objs.get(name) if name else None
        if obj is not None and ko.status_current(obj, rec) and ko.brokers_part(self._record(obj)) == ko.brokers_part(rec):
            return  # already written (by a leader's write meanwhile)
        try:
            await self.update_topic(rec)
            log.debug("KafkaTopic status of %r written (topic id %s)", topic, ko.topic_id_text(rec.topic_id))
        except Conflict:
            pass  # a newer version arrived: _kept looks at it again
        except (StoreUnavailable, MetadataError) as e:
            log.warning("KafkaTopic status of %r not written back yet: %s", topic, e)
            self._repairs.add(topic)  # tried again at the next campaign

    def _drop_topic_object(self, name: str, detach: bool = False) -> None:
        """Forget a KafkaTopic. With `detach` (a deletion seen by the watch), one annotated
        flotilla.io/managed=false leaves its topic in the image, detached: the resource went,
        the topic stays, and the controller writes a KafkaTopic of its own for it."""
        obj = self._topic_objs.pop(name, None)
        self._shadowed.discard(name)
        if obj is None:
            return
        topic = ko.topic_name_of(obj)
        if self._object_of.get(topic) != name:
            return
        del self._object_of[topic]
        rec = self._topics.pop(topic)
        self._changed.add(topic)
        # The oldest other object claiming the same name (see _put_topic_object) takes over.
        claims = sorted((self._topic_objs[o]["metadata"].get("creationTimestamp", ""), o) for o in self._shadowed
                        if ko.topic_name_of(self._topic_objs[o]) == topic)
        if claims:
            self._put_topic_object(claims[0][1], self._topic_objs[claims[0][1]])
        elif detach and ko.is_detached(obj) and rec.topic_id != NO_TOPIC_ID:
            log.info("KafkaTopic %s (flotilla.io/managed=false) deleted: topic %r is kept, detached", name, topic)
            self._detached[topic] = rec
            self._set_topic(topic, rec)
            self._repairs.add(topic)
            self._repair_soon()

    def _owner_check(self, name: str, obj: dict[str, Any]) -> None:
        """A KafkaTopic owned by the KafkaCluster was deleted: by a user (the topic goes), or by the
        garbage collector because the KafkaCluster is being deleted. Then the brokers stop soon
        and their volumes are kept (storage.deleteClaim false): the partitions stay on disk, the
        topic stays in the image meanwhile, and nothing is deleted. Until the KafkaCluster is read
        the topic stays too (a deletion a moment late, never data deleted by mistake)."""
        task = asyncio.get_running_loop().create_task(self._owner_checked(name, obj), name=f"metadata-owner-{name}")
        self._repair_tasks.add(task)
        task.add_done_callback(self._repair_tasks.discard)

    async def _owner_gone(self) -> bool:
        try:
            owner = await self._call(self._objects.get_namespaced_custom_object(
                ko.GROUP, ko.VERSION, self.namespace, ko.CLUSTER_PLURAL, self.cluster_name,
                _request_timeout=REQUEST_TIMEOUT_S))
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        meta = owner.get("metadata") or {}
        return meta.get("uid") != self.owner_uid or bool(meta.get("deletionTimestamp"))

    async def _owner_checked(self, name: str, obj: dict[str, Any]) -> None:
        delay = 0.2
        while True:
            try:
                gone = await self._owner_gone()
                break
            except (StoreUnavailable, ApiException) as e:
                log.warning("KafkaTopic %s deleted; cannot read KafkaCluster %s yet (%s): its topic is kept "
                            "until then", name, self.cluster_name, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S * 5)
        if self._topic_objs.get(name) is not obj:
            return  # created again (or dropped) meanwhile
        if gone:
            log.warning("KafkaTopic %s deleted with KafkaCluster %s: topic %r keeps its partitions on this "
                        "broker's volumes", name, self.cluster_name, ko.topic_name_of(obj))
            return
        self._drop_topic_object(name, detach=True)
        self._publish_now()

    async def _recreate(self, topic: str) -> None:
        """Write a KafkaTopic of the brokers' own for a detached topic (spec first; its status
        follows once the object is seen, see _adopt). 409: an object of that name exists already."""
        rec = self._detached.get(topic)
        if rec is None:
            return
        body = ko.topic_object(self.cluster_name, dataclasses.replace(rec, version=0), owner_uid=self.owner_uid)
        try:
            obj = await self._call(self._objects.create_namespaced_custom_object(
                *TOPICS[:2], self.namespace, TOPICS[2], body, _request_timeout=topic_write_timeout(body)))
        except ApiException as e:
            if e.status != 409:
                log.warning("KafkaTopic for detached topic %r not written yet: %s %s", topic, e.status, e.reason)
                self._repairs.add(topic)
            return
        except StoreUnavailable as e:
            log.warning("KafkaTopic for detached topic %r not written yet: %s", topic, e)
            self._repairs.add(topic)
            return
        self._applied("topics", obj)

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

    # -- writes: topics ----------------------------------------------------------------------
    def _check_size(self, rec: TopicRecord) -> None:
        limit = self.max_partitions(rec.replication_factor)
        if rec.partitions > limit:
            raise TopicTooLarge(
                f"topic {rec.name!r}: {rec.partitions} partitions exceed the {limit} that one KafkaTopic "
                f"can hold at replication factor {rec.replication_factor} (etcd's object size limit)")

    def max_partitions(self, replication_factor: int) -> int:
        return ko.max_partitions(replication_factor)

    def _applied(self, kind: str, obj: dict[str, Any]) -> None:
        """Apply a write's answer now, so the writer reads its own write. The watch may have
        delivered the same change first; its image is then still pending: publish it now."""
        if self._apply(kind, "MODIFIED", obj) or self._dirty:
            self._publish_now()

    def _record(self, obj: dict[str, Any]) -> TopicRecord:
        return ko.record_from_topic(obj, self.default_partitions, self.default_replication_factor)

    async def create_topic(self, rec: TopicRecord) -> TopicRecord:
        """One POST. The API server drops status from a create (the status subresource), so the
        topic id goes in the annotation flotilla.io/topic-id too: every broker reads it from there
        until the controller's first assignment writes status.topicId (the same id)."""
        if rec.name in self._topics:
            raise TopicExists(rec.name)
        self._check_size(rec)
        body = ko.topic_object(self.cluster_name, rec, owner_uid=self.owner_uid)
        try:
            obj = await self._call(self._objects.create_namespaced_custom_object(
                *TOPICS[:2], self.namespace, TOPICS[2], body, _request_timeout=topic_write_timeout(body)))
        except ApiException as e:
            if e.status == 409:
                raise TopicExists(rec.name) from None
            raise MetadataError(f"creating KafkaTopic for {rec.name!r}: {e.status} {e.reason}: {e.body}") from None
        self._applied("topics", obj)
        return self._record(obj)

    async def update_topic(self, rec: TopicRecord) -> TopicRecord:
        """A compare-and-set of the topic on rec.version: one write of the KafkaTopic's /status
        (topic id, partitions, configs in force, assignment, Ready). Spec is never written: it is
        whoever created the resource's (see kube_objects)."""
        name = self._object_of.get(rec.name)
        if name is None:
            raise UnknownTopic(rec.name)
        self._check_size(rec)
        body = ko.topic_object(self.cluster_name, rec, base=self._topic_objs[name])
        obj = await self._write_topic(name, body, subresource=True)
        self._applied("topics", obj)
        return self._record(obj)

    async def _write_topic(self, name: str, body: dict[str, Any], subresource: bool = False) -> dict[str, Any]:
        """One PUT of a KafkaTopic (its /status with `subresource`), CAS on the body's resourceVersion.
        A CRD without the status subresource (installed before it had one: `helm upgrade` does not
        update CRDs) answers 404 for /status: then the whole object is written, as before."""
        try:
            if subresource and self._status_subresource:
                return await self._call(self._objects.replace_namespaced_custom_object_status(
                    *TOPICS[:2], self.namespace, TOPICS[2], name, body, _request_timeout=topic_write_timeout(body)))
            return await self._call(self._objects.replace_namespaced_custom_object(
                *TOPICS[:2], self.namespace, TOPICS[2], name, body, _request_timeout=topic_write_timeout(body)))
        except ApiException as e:
            if e.status == 409:
                raise Conflict(f"KafkaTopic {name} changed since version {body['metadata'].get('resourceVersion')}") from None
            if e.status == 404 and subresource and self._status_subresource:
                obj = await self._write_topic(name, body)  # 404 again: the object is gone
                self._status_subresource = False
                log.warning("metadata: the KafkaTopic CRD has no status subresource; apply crds/ of this "
                            "version (kubectl apply --server-side -f crds/) so users' writes cannot drop status")
                return obj
            if e.status == 404:
                raise UnknownTopic(ko.topic_name_of(body)) from None
            raise MetadataError(f"updating KafkaTopic {name}: {e.status} {e.reason}: {e.body}") from None

    async def delete_topic(self, name: str) -> TopicRecord:
        obj_name = self._object_of.get(name)
        if obj_name is None:
            raise UnknownTopic(name)
        rec = self._topics[name]
        self._deleting.add(obj_name)
        try:
            marks = ko.delete_topics_marks(self._topic_objs.get(obj_name), rec)
            if marks:
                # DeleteTopics deletes a detached topic too, and an internal one (as Kafka does):
                # say so on the object first, so that no broker takes the deletion for a detach and
                # the admission policy on internal topics lets it through (JSON patch: no CAS needed).
                await self._call(self._objects.patch_namespaced_custom_object(
                    *TOPICS[:2], self.namespace, TOPICS[2], obj_name, marks, _request_timeout=REQUEST_TIMEOUT_S))
            await self._call(self._objects.delete_namespaced_custom_object(
                *TOPICS[:2], self.namespace, TOPICS[2], obj_name, _request_timeout=REQUEST_TIMEOUT_S))
        except ApiException as e:
            if e.status != 404:
                raise MetadataError(f"deleting KafkaTopic {obj_name}: {e.status} {e.reason}: {e.body}") from None
            if self._object_of.get(name) != obj_name:  # deleted by someone else meanwhile
                raise UnknownTopic(name) from None
        finally:
            self._deleting.discard(obj_name)
        # Unless the watch got there first: drop it now, remembering the version we deleted so that
        # a late event of an older version cannot revive it.
        if self._object_of.get(name) == obj_name:
            key = f"topics/{obj_name}"
            if _rv_newer(rec.version, self._known_rv.get(key)):
                self._known_rv[key] = str(rec.version)
            self._drop_topic_object(obj_name)
            self._dirty = True
        if self._dirty:
            self._publish_now()
        return rec

    # -- writes: Leases ----------------------------------------------------------------------
    async def _write_lease(self, verb: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST or PUT one Lease; 409 (exists / changed since read) -> Conflict."""
        try:
            if verb == "create":
                obj = await self._call(self._objects.create_namespaced_custom_object(
                    *LEASES[:2], self.namespace, LEASES[2], body, _request_timeout=REQUEST_TIMEOUT_S))
            else:
                obj = await self._call(self._objects.replace_namespaced_custom_object(
                    *LEASES[:2], self.namespace, LEASES[2], name, body, _request_timeout=REQUEST_TIMEOUT_S))
        except ApiException as e:
            if e.status in (404, 409):
                raise Conflict(f"Lease {name}: {e.reason}") from None
            raise
        self._applied("leases", obj)
        return obj

    async def _read_lease(self, name: str) -> dict[str, Any] | None:
        try:
            obj = await self._call(self._objects.get_namespaced_custom_object(
                *LEASES[:2], self.namespace, LEASES[2], name, _request_timeout=REQUEST_TIMEOUT_S))
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        self._applied("leases", obj)
        return obj

    async def register_broker(self, reg: BrokerRegistration) -> None:
        name = ko.broker_lease_name(self.cluster_name, reg.node_id)
        for other, obj in self._leases.items():
            theirs = (obj["metadata"].get("annotations") or {}).get(ko.CLUSTER_ID_ANNOTATION)
            if theirs and theirs != self.cluster_id and other != name and self._clock.live(other):
                raise ClusterIdMismatch(
                    f"broker Lease {self.namespace}/{other} of cluster {self.cluster_name!r} is held by a broker "
                    f"with cluster.id {theirs}, not {self.cluster_id}: this broker belongs to another cluster")
        cur = await self._read_lease(name)
        if cur is None:
            verb = "create"
        else:
            holder = ko.lease_spec(cur).get("holderIdentity")
            if holder and holder != reg.incarnation and self._clock.live(name):
                renewed = ko.lease_spec(cur).get("renewTime")
                raise DuplicateBroker(
                    f"node.id {reg.node_id} is held by broker process {holder} (Lease {self.namespace}/{name}, "
                    f"renewed {renewed}); it expires {self.lease_seconds}s after its last renewal")
            verb = "replace"
        body = ko.broker_lease(self.cluster_name, self.cluster_id, reg, self.lease_seconds, base=cur,
                               owner_uid=self.owner_uid)
        sent = time.monotonic()
        try:
            await self._write_lease(verb, name, body)
        except Conflict:
            raise DuplicateBroker(f"node.id {reg.node_id}: another process registered it at the same time") from None
        self._registration = reg
        self._renewed(sent)
        if self._renewer is None:
            self._renewer = asyncio.create_task(self._renew_loop(), name="metadata-broker-lease")
        self._publish_now()

    async def _renew_loop(self) -> None:
        """Keep this broker's Lease renewed; if another process took it over, stop and say so."""
        period = self.lease_duration_s / 3
        while self._registration is not None:
            await asyncio.sleep(period)
            reg = self._registration
            name = ko.broker_lease_name(self.cluster_name, reg.node_id)
            try:
                cur = self._leases.get(name) or await self._read_lease(name)
                if cur is None or ko.lease_spec(cur).get("holderIdentity") != reg.incarnation:
                    self._registration_lost(name, cur)
                    return
                sent = time.monotonic()
                try:
                    await self._write_lease("replace", name, ko.broker_lease(
                        self.cluster_name, self.cluster_id, reg, self.lease_seconds, base=cur, owner_uid=self.owner_uid))
                    self._renewed(sent)
                except Conflict:
                    cur = await self._read_lease(name)  # our copy was stale; check who holds it
                    if cur is None or ko.lease_spec(cur).get("holderIdentity") != reg.incarnation:
                        self._registration_lost(name, cur)
                        return
            except (StoreUnavailable, ApiException) as e:
                log.warning("metadata: cannot renew broker Lease %s: %s", name, e)

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

    def _registration_lost(self, name: str, cur: dict[str, Any] | None) -> None:
        holder = ko.lease_spec(cur).get("holderIdentity") if cur else None
        log.error("metadata: broker Lease %s is no longer ours (holder now %s); this broker is fenced",
                  name, holder)
        self._registration = None
        self.registration_lost.set()

    async def campaign(self, node_id: int) -> bool:
        name = ko.controller_lease_name(self.cluster_name)
        started = time.monotonic()
        cur = self._leases.get(name) if self._connected["leases"] else None
        if cur is None:
            cur = await self._read_lease(name)
        holder = ko.controller_from_lease(cur) if cur else None
        if cur is not None and holder is not None and holder != node_id and self._clock.live(name):
            self._controller_until = 0.0
            return False
        body = ko.controller_lease(self.cluster_name, node_id, self.lease_seconds, base=cur,
                                   delete_topic_enable=self.delete_topic_enable, owner_uid=self.owner_uid)
        try:
            await self._write_lease("create" if cur is None else "replace", name, body)
        except Conflict:
            self._controller_until = 0.0
            return False
        newly = self._controller_node != node_id
        self._controller_node = node_id
        self._controller_until = started + RENEW_DEADLINE * self.lease_duration_s
        self._publish_now()
        if newly:  # statuses that lagged while another broker was the controller
            for name, obj_name in list(self._object_of.items()):
                self._check_status(obj_name, self._topic_objs[obj_name], self._topics[name], always=True)
        self._repair_soon()
        return True

    async def resign(self, node_id: int) -> None:
        """Hand the controller Lease back now, if held (a stopping broker): another broker takes
        it at its next campaign instead of waiting for it to expire."""
        if self._controller_node != node_id or self._api is None:
            return
        self._controller_until = 0.0
        self._controller_node = None
        name = ko.controller_lease_name(self.cluster_name)
        cur = self._leases.get(name)
        if cur and ko.controller_from_lease(cur) == node_id:
            try:
                await self._write_lease("replace", name, ko.controller_lease(
                    self.cluster_name, None, 1, base=cur, delete_topic_enable=self.delete_topic_enable,
                    owner_uid=self.owner_uid))
            except (Conflict, ApiException):
                pass  # someone else holds it already

    async def announce_shutdown(self) -> None:
        """Annotate this broker's Lease as shutting down (renewals keep the annotation): the
        controller moves its leaderships away and takes it out of ISRs (controlled shutdown)."""
        reg = self._registration
        if reg is None or self._api is None:
            return
        reg = dataclasses.replace(reg, shutting_down=True)
        self._registration = reg
        name = ko.broker_lease_name(self.cluster_name, reg.node_id)
        cur = self._leases.get(name) or await self._read_lease(name)
        for _ in range(3):
            if cur is None or ko.lease_spec(cur).get("holderIdentity") != reg.incarnation:
                return  # not ours any more (fenced): nothing to announce
            try:
                await self._write_lease("replace", name, ko.broker_lease(
                    self.cluster_name, self.cluster_id, reg, self.lease_seconds, base=cur, owner_uid=self.owner_uid))
                return
            except Conflict:  # a renewal got there first
                cur = await self._read_lease(name)

    def is_controller(self, node_id: int) -> bool:
        """True until the renew deadline after our last successful campaign, and only while the
        Lease as we last saw it still names us (a takeover seen by the watch ends it at once)."""
        if self._controller_node != node_id or time.monotonic() >= self._controller_until:
            return False
        lease = self._leases.get(ko.controller_lease_name(self.cluster_name))
        return lease is not None and ko.controller_from_lease(lease) == node_id

    def quorum(self) -> QuorumView:
        """The controller Lease's holder and epoch (leaseTransitions + 1: how many times the Lease
        was taken), and each live broker with when we last saw its Lease renewed (wall clock)."""
        now_s, now_ms = time.time(), int(time.time() * 1000)
        lease = self._leases.get(ko.controller_lease_name(self.cluster_name))
        epoch = int(ko.lease_spec(lease).get("leaseTransitions") or 0) + 1 if lease else 0
        voters = {}
        for node_id in self.image.brokers:
            ago = self._clock.seen_ago(ko.broker_lease_name(self.cluster_name, node_id))
            voters[node_id] = -1 if ago is None else min(int((now_s - ago) * 1000), now_ms)
        return QuorumView(self._live_controller(), epoch, voters)

    async def allocate_producer_ids(self, block_size: int) -> int:
        name = ko.producer_ids_lease_name(self.cluster_name)
        for _ in range(PRODUCER_ID_ATTEMPTS):
            try:
                cur = await self._read_lease(name)  # from the API server: the CAS needs the latest
            except ApiException as e:
                raise MetadataError(f"Lease {self.namespace}/{name}: {e.status} {e.reason}") from None
            start = ko.producer_id_block_end(cur)
            try:
                await self._write_lease("create" if cur is None else "replace", name,
                                        ko.producer_ids_lease(self.cluster_name, start + block_size, base=cur,
                                                              owner_uid=self.owner_uid))
            except ApiException as e:
                raise MetadataError(f"Lease {self.namespace}/{name}: {e.status} {e.reason}") from None
            except Conflict:
                await asyncio.sleep(random.uniform(0, 0.05))  # another broker took a block meanwhile
                continue
            return start
        raise StoreUnavailable(f"Lease {self.namespace}/{name}: no producer-id block after "
                               f"{PRODUCER_ID_ATTEMPTS} compare-and-swap attempts")
