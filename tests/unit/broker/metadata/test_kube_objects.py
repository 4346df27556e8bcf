"""Pure translation between the store's records and Kubernetes objects (no API server here;
tests/e2e/test_metadata_kube.py runs the backend on a real one)."""

import copy
import dataclasses
import json
import re
import uuid

import pytest

from broker.metadata import kube_objects as ko
from broker.metadata.store import NO_TOPIC_ID, PartitionState, new_topic
from tests.support.metadata_contract import registration

DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@pytest.mark.parametrize("topic", ["orders", "__consumer_offsets", "Orders.EU_west", "a..b", "-x-",
                                   "x" * 249, "_", "UPPER"])
def test_object_names_are_valid_and_distinct(topic):
    name = ko.topic_object_name("fleet", topic)
    assert DNS_1123.fullmatch(name) and len(name) <= 253 and name.startswith("fleet-")
    assert ko.topic_object_name("fleet", topic) == name  # deterministic


def test_names_that_clean_up_alike_stay_distinct():
    names = {ko.topic_object_name("fleet", t) for t in ["a.b", "a_b", "A_b", "a-b", "a--b"]}
    assert len(names) == 5
    assert ko.topic_object_name("fleet", "a-b") == "fleet-a-b"  # valid names keep their spelling


def test_topic_round_trip_through_a_kafkatopic():
    rec = new_topic("Orders_1", 2, replication_factor=1, configs={"retention.ms": "1000"})
    rec = rec.__class__(**{**rec.__dict__, "assignment": (PartitionState(1, 4, (1,), (1,)), PartitionState(-1, 2, (2,), ()))})
    obj = ko.topic_object("fleet", rec)
    assert obj["spec"] == {"topicName": "Orders_1", "partitions": 2, "replicas": 1, "config": {"retention.ms": "1000"}}
    assert obj["metadata"]["labels"] == {ko.CLUSTER_LABEL: "fleet", ko.CREATED_BY_LABEL: ko.CREATED_BY_FLEET}
    assert (obj["status"]["underReplicatedPartitions"], obj["status"]["offlinePartitions"]) == (1, 1)
    assert obj["status"]["topicId"] == ko.topic_id_text(rec.topic_id)
    ready = obj["status"]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "PartitionsOffline")
    obj["metadata"]["resourceVersion"] = "42"
    back = ko.record_from_topic(obj)
    assert back == rec.__class__(**{**rec.__dict__, "version": "42"})


def test_topic_ids_are_spelled_as_kafka_does():
    tid = uuid.UUID("c5b2b4c8-0e2a-4f35-9d6b-1c2d3e4f5a6b")
    text = ko.topic_id_text(tid)
    assert len(text) == 22 and "=" not in text and ko.parse_topic_id(text) == tid
    assert ko.parse_topic_id(None) == NO_TOPIC_ID


def test_a_kubectl_made_kafkatopic_without_status():
    obj = {"metadata": {"name": "clicks", "resourceVersion": "7"},
           "spec": {"config": {"retention.ms": 60000, "preallocate": False}}}
    rec = ko.record_from_topic(obj, default_partitions=3, default_replicas=1)
    assert (rec.name, rec.partitions, rec.topic_id, rec.assignment) == ("clicks", 3, NO_TOPIC_ID, None)
    assert rec.configs == {"retention.ms": "60000", "preallocate": "false"} and rec.problem is None


def test_updates_keep_what_the_record_does_not_hold():
    base = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
            "metadata": {"name": "clicks", "resourceVersion": "7", "labels": {"team": "web", ko.INSTANCE_LABEL: "fleet"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                         "managedFields": [{"manager": "kubectl"}], "uid": "u"},
            "spec": {"partitions": 3}}
    rec = ko.record_from_topic(base)
    obj = ko.topic_object("fleet", rec, base=base)
    assert obj["metadata"]["labels"] == {"team": "web", ko.INSTANCE_LABEL: "fleet"} and "managedFields" not in obj["metadata"]
    assert obj["metadata"]["annotations"] and obj["metadata"]["resourceVersion"] == "7"
    assert obj["spec"] == {"partitions": 3}  # spec is the user's: not filled in, not rewritten
    assert base["spec"] == {"partitions": 3}  # the stored copy is not modified


def test_ready_keeps_its_transition_time_while_unchanged():
    rec = new_topic("t", 1)
    rec = rec.__class__(**{**rec.__dict__, "assignment": (PartitionState(1, 0, (1,), (1,)),)})
    first = ko.ready_condition(rec, None, now="2026-01-01T00:00:00Z")
    assert first["status"] == "True"
    assert ko.ready_condition(rec, [first], now="2026-02-02T00:00:00Z")["lastTransitionTime"] == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize("rf", [1, 2, 3, 5])
def test_partition_limit_leaves_room_within_etcds_limit(rf):
    limit = ko.max_partitions(rf)
    worst = PartitionState(2 ** 31 - 1, 2 ** 31 - 1, (2 ** 31 - 1,) * rf, (2 ** 31 - 1,) * rf)
    rec = new_topic("t" * 249, limit, replication_factor=rf, configs={f"key.{i}": "v" * 100 for i in range(50)})
    rec = rec.__class__(**{**rec.__dict__, "assignment": (worst,) * limit})
    size = len(json.dumps(ko.topic_object("c" * 40, rec), separators=(",", ":")))
    assert ko.TOPIC_OBJECT_BUDGET * 0.95 < size < ko.ETCD_OBJECT_LIMIT - 256 * 1024


def test_broker_lease_round_trip_and_takeover():
    reg = registration(3, 9092, rack="zone-b")
    lease = ko.broker_lease("fleet", "cid", reg, 15)
    assert lease["metadata"]["name"] == "fleet-broker-3" and lease["spec"]["holderIdentity"] == reg.incarnation
    assert ko.registration_from_lease(lease) == reg
    lease["metadata"]["resourceVersion"] = "5"
    renewed = ko.broker_lease("fleet", "cid", reg, 15, base=lease)
    assert renewed["spec"]["leaseTransitions"] == 0 and renewed["spec"]["acquireTime"] == lease["spec"]["acquireTime"]
    other = registration(3, 9093)
    taken = ko.broker_lease("fleet", "cid", other, 15, base=lease)
    assert taken["spec"]["leaseTransitions"] == 1 and taken["metadata"]["resourceVersion"] == "5"


def test_controller_lease_holder_and_release():
    held = ko.controller_lease("fleet", 2, 15)
    assert ko.controller_from_lease(held) == 2
    held["metadata"]["resourceVersion"] = "9"
    released = ko.controller_lease("fleet", None, 1, base=held)
    assert ko.controller_from_lease(released) is None and "holderIdentity" not in released["spec"]


def test_a_broker_create_carries_the_topic_id_until_status_holds_it():
    rec = new_topic("orders", 2)
    obj = ko.topic_object("fleet", rec)
    obj["status"] = {}  # what the API server keeps of a create (the status subresource)
    obj["metadata"]["resourceVersion"] = "1"
    assert ko.record_from_topic(obj).topic_id == rec.topic_id
    other = uuid.uuid4()
    obj["status"] = {"topicId": ko.topic_id_text(other)}  # status wins once written
    assert ko.record_from_topic(obj).topic_id == other


def test_delete_topics_marks_a_detached_or_internal_kafkatopic_first():
    detached = ko.topic_object("fleet", new_topic("orders", 1))
    detached["metadata"]["annotations"][ko.MANAGED_ANNOTATION] = "false"
    assert ko.delete_topics_marks(detached, new_topic("orders", 1)) == [
        {"op": "remove", "path": "/metadata/annotations/flotilla.io~1managed"}]
    internal = ko.topic_object("fleet", new_topic("__consumer_offsets", 1))
    del internal["metadata"]["annotations"]
    assert ko.delete_topics_marks(internal, new_topic("__consumer_offsets", 1)) == [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/metadata/annotations/flotilla.io~1delete-topics", "value": "true"}]
    assert ko.delete_topics_marks(ko.topic_object("fleet", new_topic("plain", 1)), new_topic("plain", 1)) == []


def test_a_broker_shutting_down_says_so_on_its_lease():
    import dataclasses

    reg = dataclasses.replace(registration(3, 9092), shutting_down=True)
    lease = ko.broker_lease("fleet", "cid", reg, 15)
    assert lease["metadata"]["annotations"][ko.SHUTTING_DOWN_ANNOTATION] == "true"
    assert ko.registration_from_lease(lease).shutting_down is True
    assert ko.registration_from_lease(ko.broker_lease("fleet", "cid", registration(3, 9092), 15)).shutting_down is False


def _user_topic(spec: dict, status: dict | None = None, generation: int = 1) -> dict:
    obj = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
           "metadata": {"name": "clicks", "resourceVersion": "7", "generation": generation, "uid": "u",
                        "labels": {ko.CLUSTER_LABEL: "fleet"}},
           "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def _assigned(rec, n: int):
    return dataclasses.replace(rec, topic_id=uuid.uuid4(),
                               assignment=tuple(PartitionState(1, 0, (1, 2), (1, 2)) for _ in range(n)))


def test_status_writes_never_touch_a_users_spec():
    """spec as applied (retention.ms an integer, no topicName, no replicas) comes back unchanged
    from every write the brokers make; what is in force goes to status."""
    spec = {"partitions": 2, "config": {"retention.ms": 86400000}}
    obj = _user_topic(copy.deepcopy(spec))
    rec = _assigned(ko.record_from_topic(obj, default_replicas=2), 2)
    rec = dataclasses.replace(rec, configs={**rec.configs, "cleanup.policy": "compact"}, partitions=4)
    written = ko.topic_object("fleet", rec, base=obj)
    assert written["spec"] == spec
    st = written["status"]
    assert (st["topicName"], st["partitions"], st["replicationFactor"], st["observedGeneration"]) == ("clicks", 4, 2, 1)
    assert st["config"] == {"retention.ms": "86400000", "cleanup.policy": "compact"}


def test_kafka_api_changes_stay_in_force_until_the_spec_changes():
    spec = {"partitions": 2, "config": {"retention.ms": 1000}}
    # Reflected generation: status (changed through AlterConfigs, CreatePartitions) is in force.
    status = {"observedGeneration": 1, "partitions": 5, "replicationFactor": 1, "config": {"retention.ms": "5000"}}
    rec = ko.record_from_topic(_user_topic(spec, status, generation=1))
    assert (rec.partitions, rec.configs) == (5, {"retention.ms": "5000"})
    # A new spec generation is the user's change: its config wins; partitions only grow.
    rec = ko.record_from_topic(_user_topic({**spec, "partitions": 3}, status, generation=2))
    assert (rec.partitions, rec.configs) == (5, {"retention.ms": "1000"})
    rec = ko.record_from_topic(_user_topic({**spec, "partitions": 7}, status, generation=2))
    assert rec.partitions == 7


def test_a_spec_kafka_refuses_keeps_the_topic_and_says_why():
    status = {"observedGeneration": 1, "partitions": 1, "replicationFactor": 1, "config": {"retention.ms": "5000"}}
    for config, words in [({"no.such.key": 1}, "unknown or unsupported topic config 'no.such.key'"),
                          ({"retention.ms": "soon"}, "invalid value 'soon' for topic config 'retention.ms'")]:
        rec = ko.record_from_topic(_user_topic({"config": config}, status, generation=2))
        assert rec.configs == {"retention.ms": "5000"}  # what was in force stays in force
        assert rec.problem[0] == ko.INVALID_CONFIG and words in rec.problem[1]
        ready = ko.topic_status(_assigned(rec, 1))["conditions"][0]
        assert (ready["status"], ready["reason"]) == ("False", "InvalidConfig") and words in ready["message"]
    rec = ko.record_from_topic(_user_topic({"replicas": 3}, status, generation=2))
    assert rec.replication_factor == 1 and rec.problem[0] == ko.REPLICATION_FACTOR_CHANGE


def test_the_controllers_problem_is_kept_in_status_until_it_writes_another():
    rec = dataclasses.replace(ko.record_from_topic(_user_topic({"replicas": 3})),
                              problem=(ko.INVALID_REPLICATION_FACTOR, "replication factor 3 is larger than the 2 available broker(s)"))
    obj = _user_topic({"replicas": 3}, ko.topic_status(rec, None, 1))
    back = ko.record_from_topic(obj)
    assert back.problem == rec.problem
    assert ko.status_current(obj, back)


def test_status_is_current_after_its_own_write_and_lags_a_new_generation():
    obj = _user_topic({"partitions": 2, "config": {"retention.ms": 86400000}})
    rec = _assigned(ko.record_from_topic(obj), 2)
    assert not ko.status_current(obj, rec)
    obj["status"] = ko.topic_object("fleet", rec, base=obj)["status"]
    assert ko.status_current(obj, ko.record_from_topic(obj))
    obj["metadata"]["generation"] = 2
    obj["spec"]["config"]["retention.ms"] = 1000
    assert not ko.status_current(obj, ko.record_from_topic(obj))


def test_a_shadowed_kafkatopic_says_resource_conflict_once():
    obj = _user_topic({"topicName": "orders"})
    status = ko.conflict_status(obj, "fleet-orders", "orders")
    ready = status["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "ResourceConflict") and "fleet-orders" in ready["message"]
    obj["status"] = status
    assert ko.conflict_status(obj, "fleet-orders", "orders") is None


def test_membership_by_our_label_or_the_older_one():
    assert ko.cluster_of({"metadata": {"labels": {ko.CLUSTER_LABEL: "a", ko.INSTANCE_LABEL: "b"}}}) == "a"
    assert ko.cluster_of({"metadata": {"labels": {ko.INSTANCE_LABEL: "b"}}}) == "b"
    assert ko.cluster_of({"metadata": {}}) is None
    assert ko.INSTANCE_LABEL not in ko.broker_lease("fleet", "cid", registration(3, 9092), 15)["metadata"]["labels"]


def test_what_the_brokers_create_is_owned_by_the_kafkacluster():
    ref = [{"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster", "name": "fleet", "uid": "cu"}]
    assert ko.topic_object("fleet", new_topic("t", 1), owner_uid="cu")["metadata"]["ownerReferences"] == ref
    assert ko.broker_lease("fleet", "cid", registration(3, 9092), 15, owner_uid="cu")["metadata"]["ownerReferences"] == ref
    assert ko.controller_lease("fleet", 1, 15, owner_uid="cu")["metadata"]["ownerReferences"] == ref
    assert ko.producer_ids_lease("fleet", 10, owner_uid="cu")["metadata"]["ownerReferences"] == ref
    assert "ownerReferences" not in ko.topic_object("fleet", new_topic("t", 1))["metadata"]
    assert ko.owned_by({"metadata": {"ownerReferences": ref}}, "cu") and not ko.owned_by({"metadata": {}}, "cu")


def test_a_reassignment_in_progress_round_trips_and_is_not_under_replicated():
    moving = PartitionState(1, 4, (2, 3, 1), (1, 2, 3), adding=(), removing=(1,))
    adding = PartitionState(1, 4, (2, 4, 1), (1,), adding=(4,), removing=(1,))
    rec = dataclasses.replace(new_topic("moving", 2, replication_factor=2), assignment=(moving, adding))
    obj = ko.topic_object("fleet", rec)
    entry = obj["status"]["assignment"][1]
    assert (entry["addingReplicas"], entry["removingReplicas"]) == ([4], [1])
    # Under-replicated: fewer in-sync replicas than the target has (Kafka's replicationFactor
    # during a reassignment): the first is not, the second (one in sync, target of two) is.
    assert obj["status"]["underReplicatedPartitions"] == 1
    obj["metadata"]["resourceVersion"] = "7"
    assert ko.record_from_topic(obj).assignment == (moving, adding)
    plain = ko.topic_object("fleet", dataclasses.replace(rec, assignment=(PartitionState(1, 0, (1,), (1,)),) * 2))
    assert "addingReplicas" not in plain["status"]["assignment"][0]  # only during a reassignment
