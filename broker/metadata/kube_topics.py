"""KafkaTopic objects in the Kubernetes store: applying them to the local copy (with the repairs
a broker makes: adoption, status, owner checks, re-creation) and the topic writes (create, update,
delete), each a single API call and so a single compare-and-swap."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_objects as ko
from broker.metadata.kube_reflector import REQUEST_TIMEOUT_S, RETRY_MAX_S, TOPICS, _rv_newer
from broker.metadata.store import (NO_TOPIC_ID, Conflict, MetadataError, StoreUnavailable, TopicExists, TopicRecord,
                                   TopicTooLarge, UnknownTopic)

log = logging.getLogger(__name__)

# A KafkaTopic near etcd's 1.5 MiB limit takes the API server (schema validation, conversion, etcd)
# far longer than a Lease: its write gets more time per byte, not a false "unreachable".
TOPIC_WRITE_S_PER_MIB = 20.0


def topic_write_timeout(body: dict[str, Any]) -> float:
    """The request timeout for writing `body`: REQUEST_TIMEOUT_S plus time for its size."""
    size = len(json.dumps(body, separators=(",", ":")))
    return REQUEST_TIMEOUT_S + TOPIC_WRITE_S_PER_MIB * size / (1 << 20)


class KubeTopics:
    """Part of KubernetesMetadataStore (metadata/kube_store.py), whose state it uses."""

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
