"""Pure translation between the store's records and Kubernetes objects (no API server here;
tests/e2e/test_metadata_kube.py runs the backend on a real one)."""

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
           "spec": {"config": {"retention.ms": 60000, "preallocate": True}}}
    rec = ko.record_from_topic(obj, default_partitions=3, default_replicas=1)
    assert (rec.name, rec.partitions, rec.topic_id, rec.assignment) == ("clicks", 3, NO_TOPIC_ID, None)
    assert rec.configs == {"retention.ms": "60000", "preallocate": "true"}


def test_updates_keep_what_the_record_does_not_hold():
    base = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
            "metadata": {"name": "clicks", "resourceVersion": "7", "labels": {"team": "web", ko.INSTANCE_LABEL: "fleet"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                         "managedFields": [{"manager": "kubectl"}], "uid": "u"},
            "spec": {"partitions": 3}}
    rec = ko.record_from_topic(base)
    obj = ko.topic_object("fleet", rec, base=base)
    assert obj["metadata"]["labels"]["team"] == "web" and "managedFields" not in obj["metadata"]
    assert obj["metadata"]["annotations"] and obj["metadata"]["resourceVersion"] == "7"
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
