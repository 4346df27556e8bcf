"""Leases in the Kubernetes store: each broker's registration (created, renewed every third of its
duration, taken over when expired), the controller Lease (`campaign`, `is_controller`), controlled
shutdown's announcement and the producer-id block Lease."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_objects as ko
from broker.metadata.kube_reflector import LEASES, REQUEST_TIMEOUT_S
from broker.metadata.store import (BrokerRegistration, ClusterIdMismatch, Conflict, DuplicateBroker, MetadataError,
                                   QuorumView, StoreUnavailable)

log = logging.getLogger(__name__)

RENEW_DEADLINE = 2 / 3      # of the Lease duration: the controller stops before the Lease can expire
PRODUCER_ID_ATTEMPTS = 20  # compare-and-swap tries for one block before giving up (retriable)


class KubeLeases:
    """Part of KubernetesMetadataStore (metadata/kube_store.py), whose state it uses."""

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
