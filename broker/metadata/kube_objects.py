"""The Kubernetes objects that hold cluster metadata, and their translation to the store's records.

Pure functions, no I/O:
- a Lease per broker, `<cluster>-broker-<node id>`: holderIdentity is the broker process's
  incarnation, annotations carry its endpoints and rack (registration and liveness in one object);
- the controller Lease, `<cluster>-controller`: holderIdentity is the controller's node id;
- the producer-id Lease, `<cluster>-producer-ids`, never held: its annotation is the end of the
  last block of producer ids handed out (KIP-730), moved on by compare-and-swap;
- a KafkaTopic (flotilla.io/v1alpha1) per topic. `spec` (topicName, partitions, replicas, config)
  is whoever created the resource's alone: a user (kubectl, a GitOps tool) or, for a topic a Kafka
  client created (CreateTopics, auto-creation), the broker that served it, which writes spec once,
  at creation, and labels the object flotilla.io/created-by=fleet. After that the brokers write
  `status` only, through the status subresource: the topic as it is in force (topicName, topicId,
  partitions, replicationFactor, config, one assignment entry per partition: leader, leaderEpoch,
  replicas, isr, and addingReplicas/removingReplicas during a reassignment; counts of under-replicated and offline partitions) and a Ready condition, with
  the spec generation it reflects (observedGeneration). A user's write of the resource (kubectl
  replace or edit, a GitOps sync) cannot change status (the CRD's status subresource and CEL rules).

What the topic is (`record_from_topic`) when spec and status differ, i.e. which is the source of
truth: the newest of the two. A spec generation the brokers have not yet reflected
(observedGeneration behind metadata.generation) is a user's change and wins: its config is put in
force. Once reflected, changes made through Kafka's APIs (AlterConfigs, IncrementalAlterConfigs,
CreatePartitions) are written to status and stay in force until the user changes spec again; spec
is never rewritten to match. Partitions only grow: the larger of spec and status. A spec Kafka
would refuse (an unknown config key or a bad value, a replication factor other than the topic's)
leaves the topic as it is and shows Ready=False with Kafka's message (`problem`).

Every object carries the label flotilla.io/cluster=<cluster name> (objects made before it carry
app.kubernetes.io/instance, still read: `cluster_of`); several clusters can share a namespace. A
KafkaTopic made with kubectl needs one of the two. With the KafkaCluster's uid known
(flotilla.cluster.uid, set by the operator), what the brokers create (their Leases, fleet-created
KafkaTopics) names the KafkaCluster as owner, so deleting the KafkaCluster deletes them.

Size: etcd refuses objects over 1.5 MiB (its default --max-request-bytes). The assignment is what
grows with partitions, so `max_partitions` bounds a topic by the worst-case JSON size of one
partition entry (every number at its 32-bit maximum) within TOPIC_OBJECT_BUDGET, leaving the rest
for metadata, spec, configs, kubectl's last-applied annotation and managedFields.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from datetime import datetime, timezone
from typing import Any

from broker.metadata.names import broker_lease_name, controller_lease_name, producer_ids_lease_name  # noqa: F401
from broker.metadata.store import (NO_TOPIC_ID, BrokerRegistration, Endpoint, PartitionState,
                                   TopicRecord)

GROUP = "flotilla.io"
VERSION = "v1alpha1"
TOPIC_PLURAL = "kafkatopics"
TOPIC_KIND = "KafkaTopic"
CLUSTER_PLURAL = "kafkaclusters"

CLUSTER_LABEL = "flotilla.io/cluster"  # the cluster an object belongs to
# The label the cluster was named by before flotilla.io/cluster: Helm and Argo CD's label tracking
# overwrite it, so it is only read (objects written before), never written.
INSTANCE_LABEL = "app.kubernetes.io/instance"
# On objects the fleet creates on its own (a KafkaTopic for a topic a Kafka client created):
# nobody keeps them in Git; the brokers wrote their spec once, at creation.
CREATED_BY_LABEL = "flotilla.io/created-by"
CREATED_BY_FLEET = "fleet"
OWNER_KIND = "KafkaCluster"
LEASE_ROLE_LABEL = "flotilla.io/lease"  # "broker" or "controller"
NODE_ID_ANNOTATION = "flotilla.io/node-id"
ENDPOINTS_ANNOTATION = "flotilla.io/endpoints"
RACK_ANNOTATION = "flotilla.io/rack"
CLUSTER_ID_ANNOTATION = "flotilla.io/cluster-id"
# On a broker's Lease while it stops (controlled shutdown): the controller moves its leaderships
# away and takes it out of ISRs, and elects it leader of nothing.
SHUTTING_DOWN_ANNOTATION = "flotilla.io/shutting-down"
PRODUCER_ID_BLOCK_END_ANNOTATION = "flotilla.io/producer-id-block-end"
# On a KafkaTopic a broker creates: its topic id, until status.topicId holds it (status cannot be
# written by a create once the CRD has the status subresource).
TOPIC_ID_ANNOTATION = "flotilla.io/topic-id"
# On a KafkaTopic a broker creates for a CreateTopics with manual replica assignments: the replicas
# asked for, per partition (JSON list of lists), for the controller's first assignment.
REPLICA_ASSIGNMENT_ANNOTATION = "flotilla.io/replica-assignment"
# On a KafkaTopic: "false" detaches the topic from the resource; deleting the resource then keeps
# the topic (the brokers write a KafkaTopic of their own for it). Strimzi's strimzi.io/managed.
MANAGED_ANNOTATION = "flotilla.io/managed"
# On a KafkaTopic a broker deletes for DeleteTopics: the deletion is Kafka's own (the admission
# policy refusing users' deletions of internal topics lets it through).
DELETE_TOPICS_ANNOTATION = "flotilla.io/delete-topics"
# On the controller Lease: the controller's delete.topic.enable, read by the admission policy that
# refuses deleting KafkaTopics while it is false (crds/, docs/operator.md).
DELETE_TOPIC_ENABLE_ANNOTATION = "flotilla.io/delete-topic-enable"

ETCD_OBJECT_LIMIT = 1536 * 1024
TOPIC_OBJECT_BUDGET = 1024 * 1024
_INT32_MAX = 2 ** 31 - 1

_MAX_NAME = 253


# -- names (the Leases': names.py) --------------------------------------------------------------
def topic_object_name(cluster: str, topic: str) -> str:
    """A DNS-1123 object name for a Kafka topic name (which may hold '_', '.' and capitals).

    Names that need no change keep their spelling (`orders` -> `<cluster>-orders`); any other gets
    a hash of the real name appended so that different topics never share an object name
    (`__consumer_offsets` -> `<cluster>-consumer-offsets-<hash>`). The real name is spec.topicName.
    """
    clean = re.sub(r"[^a-z0-9]+", "-", topic.lower()).strip("-")
    name = f"{cluster}-{clean}"
    if clean == topic and len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(topic.encode()).hexdigest()[:10]
    room = _MAX_NAME - len(cluster) - len(digest) - 2
    clean = clean[:room].strip("-")
    return f"{cluster}-{clean}-{digest}" if clean else f"{cluster}-{digest}"


def labels(cluster: str, **extra: str) -> dict[str, str]:
    return {CLUSTER_LABEL: cluster, **extra}


def selector(cluster: str, **extra: str) -> str:
    return ",".join(f"{k}={v}" for k, v in labels(cluster, **extra).items())


def cluster_of(obj: dict[str, Any] | None) -> str | None:
    """The cluster an object belongs to: flotilla.io/cluster, else (an object written before that
    label) app.kubernetes.io/instance."""
    found = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return found.get(CLUSTER_LABEL) or found.get(INSTANCE_LABEL) or None


def owner_references(cluster: str, uid: str | None) -> list[dict[str, Any]]:
    """The KafkaCluster as owner of an object the brokers create (none without its uid): the
    garbage collector deletes the object with it. Not `controller` (the operator controls the
    KafkaCluster's own children) and no blockOwnerDeletion (it needs rights on the owner)."""
    if not uid:
        return []
    return [{"apiVersion": f"{GROUP}/{VERSION}", "kind": OWNER_KIND, "name": cluster, "uid": uid}]


def owned_by(obj: dict[str, Any] | None, uid: str | None) -> bool:
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(r.get("uid") == uid for r in refs)


# -- time --------------------------------------------------------------------------------------
def micro_time(when: datetime | None = None) -> str:
    """RFC 3339 with microseconds, as Lease renewTime/acquireTime are written."""
    return (when or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- topic ids ---------------------------------------------------------------------------------
def topic_id_text(topic_id: uuid.UUID) -> str:
    """Kafka's spelling of a topic id (URL-safe base64 without padding), as its tools print it."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_topic_id(text: str | None) -> uuid.UUID:
    if not text:
        return NO_TOPIC_ID
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except ValueError:
        return uuid.UUID(text)


# -- KafkaTopic --------------------------------------------------------------------------------
def config_text(value: Any) -> str:
    """A config value from YAML as Kafka's string (`true`, not `True`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def is_detached(obj: dict[str, Any] | None) -> bool:
    """A KafkaTopic annotated flotilla.io/managed: "false": its deletion is not the topic's."""
    ann = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return str(ann.get(MANAGED_ANNOTATION, "")).strip().lower() == "false"


def _pointer(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def delete_topics_marks(obj: dict[str, Any] | None, rec: TopicRecord) -> list[dict[str, Any]]:
    """The JSON patch a broker applies before deleting a KafkaTopic for DeleteTopics: a detached
    one loses flotilla.io/managed (its deletion is the topic's), an internal one is marked as
    DeleteTopics' (which Kafka allows). Empty: nothing to say, delete at once."""
    ops: list[dict[str, Any]] = []
    if obj is None:
        return ops
    if is_detached(obj):
        ops.append({"op": "remove", "path": _pointer(MANAGED_ANNOTATION)})
    if rec.is_internal:
        if not (obj.get("metadata") or {}).get("annotations"):
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        ops.append({"op": "add", "path": _pointer(DELETE_TOPICS_ANNOTATION), "value": "true"})
    return ops


def topic_name_of(obj: dict[str, Any]) -> str:
    return (obj.get("spec") or {}).get("topicName") or obj["metadata"]["name"]


# Problems a KafkaTopic's spec has (derived from it at every read), and the controller's (kept in
# status until it writes another): Ready=False with the reason.
INVALID_CONFIG = "InvalidConfig"
REPLICATION_FACTOR_CHANGE = "ReplicationFactorChange"
INVALID_REPLICATION_FACTOR = "InvalidReplicationFactor"
RESOURCE_CONFLICT = "ResourceConflict"
SPEC_PROBLEMS = frozenset({INVALID_CONFIG, REPLICATION_FACTOR_CHANGE})
CONTROLLER_PROBLEMS = frozenset({INVALID_REPLICATION_FACTOR})


def _spec_configs(raw: dict[str, Any]) -> tuple[dict[str, str], tuple[str, str] | None]:
    """spec.config as Kafka validates it: (the valid settings, the first problem or None)."""
    from broker import topic_config  # the broker's own rules for topic configs

    texts = {str(k): config_text(v) for k, v in raw.items()}
    try:
        return topic_config.validate(texts), None
    except topic_config.TopicConfigError as first:
        valid = {}
        for key, value in texts.items():
            try:
                valid.update(topic_config.validate({key: value}))
            except topic_config.TopicConfigError:
                pass
        return valid, (INVALID_CONFIG, f"spec.config: {first}")


def _status_problem(status: dict[str, Any]) -> tuple[str, str] | None:
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    if ready and ready.get("status") == "False" and ready.get("reason") in CONTROLLER_PROBLEMS:
        return ready["reason"], ready.get("message") or ""
    return None


def record_from_topic(obj: dict[str, Any], default_partitions: int = 1,
                      default_replicas: int = 1) -> TopicRecord:
    """The TopicRecord a KafkaTopic describes (see the module docstring for spec against status);
    one made with kubectl (no status yet) has the nil topic id and no assignment, for the
    controller to complete. The id is status.topicId, else the annotation a broker's create
    carries (see TOPIC_ID_ANNOTATION)."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    meta = obj.get("metadata") or {}
    raw_assignment = status.get("assignment")
    assignment = None
    if raw_assignment is not None:
        assignment = tuple(PartitionState(leader=int(p.get("leader", -1)),
                                          leader_epoch=int(p.get("leaderEpoch", 0)),
                                          replicas=tuple(int(r) for r in p.get("replicas") or ()),
                                          isr=tuple(int(r) for r in p.get("isr") or ()),
                                          adding=tuple(int(r) for r in p.get("addingReplicas") or ()),
                                          removing=tuple(int(r) for r in p.get("removingReplicas") or ()))
                           for p in raw_assignment)
    annotations = meta.get("annotations") or {}
    wanted, problem = _spec_configs(spec.get("config") or {})
    held = status.get("config")
    reflected = status.get("observedGeneration") is not None and status.get("observedGeneration") == meta.get("generation")
    if held is not None and (reflected or problem):
        configs = {str(k): config_text(v) for k, v in held.items()}  # in force (maybe changed through Kafka)
    else:
        configs = wanted  # a spec change not yet reflected: the user's, put in force
    partitions = max(int(spec.get("partitions") or default_partitions), int(status.get("partitions") or 0),
                     len(assignment or ()))
    factor = int(status.get("replicationFactor") or spec.get("replicas") or default_replicas)
    if problem is None and spec.get("replicas") and int(spec["replicas"]) != factor:
        problem = (REPLICATION_FACTOR_CHANGE,
                   f"spec.replicas is {spec['replicas']} but the topic has replication factor {factor}: "
                   "changing it needs a partition reassignment, which the fleet does not do")
    return TopicRecord(
        name=topic_name_of(obj),
        topic_id=parse_topic_id(status.get("topicId") or annotations.get(TOPIC_ID_ANNOTATION)),
        partitions=partitions,
        replication_factor=factor,
        configs=configs,
        assignment=assignment,
        version=meta["resourceVersion"],
        problem=problem or _status_problem(status),
        requested_replicas=_requested_replicas(annotations.get(REPLICA_ASSIGNMENT_ANNOTATION)),
    )


def _requested_replicas(text: str | None) -> tuple[tuple[int, ...], ...] | None:
    """The annotation a broker's create wrote for manual replica assignments; None if absent or
    not a list of lists of broker ids (then the controller places the partitions itself)."""
    if not text:
        return None
    try:
        return tuple(tuple(int(b) for b in r) for r in json.loads(text))
    except (ValueError, TypeError):
        return None


def brokers_part(rec: TopicRecord) -> tuple:
    """The part of its status no user's write may take away: the topic's id and assignment."""
    return rec.topic_id, rec.assignment


def _assignment_json(assignment: tuple[PartitionState, ...]) -> list[dict[str, Any]]:
    return [_partition_json(p) for p in assignment]


def _partition_json(p: PartitionState) -> dict[str, Any]:
    entry = {"leader": p.leader, "leaderEpoch": p.leader_epoch, "replicas": list(p.replicas), "isr": list(p.isr)}
    if p.adding or p.removing:  # a reassignment in progress (KIP-455): only then, to keep entries small
        entry["addingReplicas"] = list(p.adding)
        entry["removingReplicas"] = list(p.removing)
    return entry


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, status: str, reason: str, message: str, previous: list[dict[str, Any]] | None,
               generation: int | None, now: str | None) -> dict[str, Any]:
    old = next((c for c in previous or () if c.get("type") == kind), None)
    since = old["lastTransitionTime"] if old and old.get("status") == status and old.get("lastTransitionTime") \
        else (now or _now())
    out = {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}
    if generation is not None:
        out["observedGeneration"] = int(generation)
    return out


def ready_condition(rec: TopicRecord, previous: list[dict[str, Any]] | None = None,
                    now: str | None = None, generation: int | None = None) -> dict[str, Any]:
    """Ready is True once the topic has its id and every partition an assignment with a leader,
    and nothing in its spec is refused (rec.problem: False with Kafka's reason and message)."""
    complete = rec.assignment is not None and len(rec.assignment) >= rec.partitions
    offline = [i for i, p in enumerate(rec.assignment or ()) if p.leader < 0]
    if rec.problem is not None:
        status, (reason, message) = "False", rec.problem
    elif rec.topic_id == NO_TOPIC_ID or not complete:
        status, reason, message = "False", "Assigning", "waiting for the controller to assign partitions"
    elif offline:
        status, reason = "False", "PartitionsOffline"
        message = f"{len(offline)} partition(s) without a leader, e.g. {offline[:5]}"
    else:
        status, reason, message = "True", "Assigned", f"{rec.partitions} partition(s) have a leader"
    return _condition("Ready", status, reason, message, previous, generation, now)


def topic_status(rec: TopicRecord, previous: dict[str, Any] | None = None,
                 generation: int | None = None, now: str | None = None) -> dict[str, Any]:
    """The status the brokers write for `rec`: the topic as it is in force."""
    status: dict[str, Any] = {"topicName": rec.name}
    if rec.topic_id != NO_TOPIC_ID:
        status["topicId"] = topic_id_text(rec.topic_id)
    status["partitions"] = rec.partitions
    status["replicationFactor"] = rec.replication_factor
    status["config"] = dict(rec.configs)
    if rec.assignment is not None:
        status["assignment"] = _assignment_json(rec.assignment)
        status["underReplicatedPartitions"] = sum(1 for p in rec.assignment
                                                  if len(p.isr) < len(p.replicas) - len(p.removing))
        status["offlinePartitions"] = sum(1 for p in rec.assignment if p.leader < 0)
    if generation is not None:
        status["observedGeneration"] = int(generation)
    status["conditions"] = [ready_condition(rec, (previous or {}).get("conditions"), now, generation)]
    return status


def _without_times(status: dict[str, Any]) -> dict[str, Any]:
    out = dict(status)
    out["conditions"] = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions") or ()]
    return out


def status_current(obj: dict[str, Any], rec: TopicRecord) -> bool:
    """Whether the object's status already says what `topic_status` would write for `rec`."""
    status = obj.get("status") or {}
    want = topic_status(rec, status, (obj.get("metadata") or {}).get("generation"), now="-")
    return _without_times(status) == _without_times(want)


def conflict_status(obj: dict[str, Any], holder: str, topic: str) -> dict[str, Any] | None:
    """The status of a KafkaTopic naming a topic another (older) KafkaTopic holds: what it had,
    with Ready=False, reason ResourceConflict. None if it says so already."""
    status = dict(obj.get("status") or {})
    generation = (obj.get("metadata") or {}).get("generation")
    ready = _condition("Ready", "False", RESOURCE_CONFLICT,
                       f"topic {topic!r} is held by KafkaTopic {holder} (the older resource); this one is "
                       "ignored until that one is deleted", status.get("conditions"), generation, None)
    old = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    if old is not None and {k: v for k, v in old.items() if k != "lastTransitionTime"} == \
            {k: v for k, v in ready.items() if k != "lastTransitionTime"}:
        return None
    status["conditions"] = [ready]
    return status


def topic_object(cluster: str, rec: TopicRecord, base: dict[str, Any] | None = None,
                 owner_uid: str | None = None) -> dict[str, Any]:
    """The KafkaTopic for `rec`. With `base` (the stored object), the write of its status: the
    object as stored (spec, labels, annotations: never rewritten) with the status for `rec`, and
    the record's version as the resourceVersion precondition. Without: the object a broker creates
    for a topic a Kafka client created (spec written this once; labelled as the fleet's)."""
    if base:
        obj: dict[str, Any] = json.loads(json.dumps(base))
        meta = obj["metadata"]
        for k in ("managedFields", "creationTimestamp", "uid", "selfLink"):
            meta.pop(k, None)
        meta["resourceVersion"] = rec.version
        obj["status"] = topic_status(rec, base.get("status"), base["metadata"].get("generation"))
        return obj
    meta = {"name": topic_object_name(cluster, rec.name),
            "labels": labels(cluster, **{CREATED_BY_LABEL: CREATED_BY_FLEET})}
    if rec.topic_id != NO_TOPIC_ID:
        meta["annotations"] = {TOPIC_ID_ANNOTATION: topic_id_text(rec.topic_id)}
    if rec.requested_replicas is not None:
        meta.setdefault("annotations", {})[REPLICA_ASSIGNMENT_ANNOTATION] = json.dumps(
            [list(r) for r in rec.requested_replicas], separators=(",", ":"))
    if owner_uid:
        meta["ownerReferences"] = owner_references(cluster, owner_uid)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": TOPIC_KIND, "metadata": meta,
            "spec": {"topicName": rec.name, "partitions": rec.partitions, "replicas": rec.replication_factor,
                     "config": dict(rec.configs)},
            "status": topic_status(rec)}


def partition_entry_bytes(replication_factor: int) -> int:
    """Worst-case JSON size of one assignment entry (every id and epoch at its 32-bit maximum)."""
    worst = PartitionState(_INT32_MAX, _INT32_MAX, (_INT32_MAX,) * replication_factor,
                           (_INT32_MAX,) * replication_factor)
    return len(json.dumps(_assignment_json((worst,)), separators=(",", ":"))) - 2 + 1  # [ ] off, comma on


def max_partitions(replication_factor: int, budget: int = TOPIC_OBJECT_BUDGET) -> int:
    """How many partitions one KafkaTopic can hold at this replication factor, worst case."""
    return budget // partition_entry_bytes(max(1, replication_factor))


# -- Leases ------------------------------------------------------------------------------------
def _own(metadata: dict[str, Any], cluster: str, owner_uid: str | None) -> None:
    if owner_uid:
        metadata["ownerReferences"] = owner_references(cluster, owner_uid)


def lease_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("spec") or {}


def broker_lease(cluster: str, cluster_id: str, reg: BrokerRegistration, duration_s: int,
                 base: dict[str, Any] | None = None, owner_uid: str | None = None) -> dict[str, Any]:
    """The Lease registering `reg`, renewed now; with `base`, a compare-and-swap of that Lease."""
    now = micro_time()
    spec = lease_spec(base) if base else {}
    taking_over = spec.get("holderIdentity") != reg.incarnation
    annotations = {
        NODE_ID_ANNOTATION: str(reg.node_id),
        CLUSTER_ID_ANNOTATION: cluster_id,
        ENDPOINTS_ANNOTATION: json.dumps([
            {"listener": e.listener, "host": e.host, "port": e.port, "securityProtocol": e.security_protocol}
            for e in reg.endpoints], separators=(",", ":")),
    }
    if reg.rack:
        annotations[RACK_ANNOTATION] = reg.rack
    if reg.shutting_down:
        annotations[SHUTTING_DOWN_ANNOTATION] = "true"
    metadata: dict[str, Any] = {"name": broker_lease_name(cluster, reg.node_id),
                                "labels": labels(cluster, **{LEASE_ROLE_LABEL: "broker"}),
                                "annotations": annotations}
    _own(metadata, cluster, owner_uid)
    if base:
        metadata["resourceVersion"] = base["metadata"]["resourceVersion"]
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": {
        "holderIdentity": reg.incarnation,
        "leaseDurationSeconds": duration_s,
        "acquireTime": now if taking_over else spec.get("acquireTime", now),
        "renewTime": now,
        "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (1 if base and taking_over else 0),
    }}


def registration_from_lease(obj: dict[str, Any]) -> BrokerRegistration | None:
    """The broker a Lease registers, or None if it is released or not a broker Lease."""
    meta = obj.get("metadata") or {}
    ann = meta.get("annotations") or {}
    holder = lease_spec(obj).get("holderIdentity")
    if not holder or NODE_ID_ANNOTATION not in ann:
        return None
    endpoints = tuple(Endpoint(listener=e["listener"], host=e["host"], port=int(e["port"]),
                               security_protocol=e.get("securityProtocol", "PLAINTEXT"))
                      for e in json.loads(ann.get(ENDPOINTS_ANNOTATION) or "[]"))
    return BrokerRegistration(node_id=int(ann[NODE_ID_ANNOTATION]), incarnation=holder,
                              endpoints=endpoints, rack=ann.get(RACK_ANNOTATION) or None,
                              shutting_down=ann.get(SHUTTING_DOWN_ANNOTATION) == "true")


def controller_lease(cluster: str, node_id: int | None, duration_s: int,
                     base: dict[str, Any] | None = None, delete_topic_enable: bool = True,
                     owner_uid: str | None = None) -> dict[str, Any]:
    """The controller Lease held (renewed now) by `node_id`, or released when node_id is None; it
    carries the controller's delete.topic.enable for the KafkaTopic deletion policy."""
    now = micro_time()
    spec = lease_spec(base) if base else {}
    holder = "" if node_id is None else str(node_id)
    taking_over = spec.get("holderIdentity") != holder
    metadata: dict[str, Any] = {"name": controller_lease_name(cluster),
                                "labels": labels(cluster, **{LEASE_ROLE_LABEL: "controller"}),
                                "annotations": {DELETE_TOPIC_ENABLE_ANNOTATION: "true" if delete_topic_enable else "false"}}
    _own(metadata, cluster, owner_uid)
    if base:
        metadata["resourceVersion"] = base["metadata"]["resourceVersion"]
    new_spec: dict[str, Any] = {
        "holderIdentity": holder or None,
        "leaseDurationSeconds": duration_s,
        "acquireTime": now if taking_over else spec.get("acquireTime", now),
        "renewTime": now,
        "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (1 if base and taking_over and holder else 0),
    }
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
            "spec": {k: v for k, v in new_spec.items() if v is not None}}


def controller_from_lease(obj: dict[str, Any]) -> int | None:
    holder = lease_spec(obj).get("holderIdentity")
    return int(holder) if holder and holder.isdigit() else None


def producer_id_block_end(obj: dict[str, Any] | None) -> int:
    """The first producer id not yet handed out (0 before the first block)."""
    ann = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return int(ann.get(PRODUCER_ID_BLOCK_END_ANNOTATION) or 0)


def producer_ids_lease(cluster: str, block_end: int, base: dict[str, Any] | None = None,
                       owner_uid: str | None = None) -> dict[str, Any]:
    """The producer-id Lease recording `block_end`; with `base`, a compare-and-swap of that Lease."""
    metadata: dict[str, Any] = {"name": producer_ids_lease_name(cluster),
                                "labels": labels(cluster, **{LEASE_ROLE_LABEL: "producer-ids"}),
                                "annotations": {PRODUCER_ID_BLOCK_END_ANNOTATION: str(block_end)}}
    _own(metadata, cluster, owner_uid)
    if base:
        metadata["resourceVersion"] = base["metadata"]["resourceVersion"]
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": {}}
