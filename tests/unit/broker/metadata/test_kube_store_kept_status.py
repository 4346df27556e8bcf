"""The Kubernetes store never takes a KafkaTopic whose status lost what the brokers own for a new
topic (KubernetesMetadataStore._kept): the defence behind the CRD's status subresource and CEL
rules, for a CRD installed without them. Objects are fed to the store's watch handler directly;
tests/e2e/test_kafkatopic_status.py runs the whole path on a real API server and three brokers."""

import dataclasses
import uuid

from broker.metadata import kube_objects as ko
from broker.metadata.kube_store import KubernetesMetadataStore
from broker.metadata.store import NO_TOPIC_ID, PartitionState, new_topic

ASSIGNMENT = (PartitionState(1, 4, (1, 2, 3), (1, 2, 3)), PartitionState(2, 7, (2, 3, 1), (2, 3)))


def store() -> KubernetesMetadataStore:
    return KubernetesMetadataStore(cluster_id="c", cluster_name="fleet", namespace="ns")


def stored(rec, rv: int, uid: str = "uid-1") -> dict:
    obj = ko.topic_object("fleet", rec)
    obj["metadata"].update(resourceVersion=str(rv), uid=uid, creationTimestamp="2026-01-01T00:00:00Z")
    return obj


def without_status(obj: dict, rv: int) -> dict:
    """What `kubectl replace` of a manifest with spec and labels only leaves (no status subresource)."""
    out = {k: v for k, v in obj.items() if k != "status"}
    out["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "annotations"}
    out["metadata"]["resourceVersion"] = str(rv)
    return out


def complete():
    return dataclasses.replace(new_topic("orders", 2, 3), assignment=ASSIGNMENT)


def test_a_status_dropped_by_a_users_write_keeps_the_topic_id_and_assignment():
    s, rec = store(), complete()
    s._apply("topics", "MODIFIED", stored(rec, 10))
    s._apply("topics", "MODIFIED", without_status(stored(rec, 10), 11))
    kept = s._topics["orders"]
    assert kept.topic_id == rec.topic_id and kept.assignment == ASSIGNMENT
    assert kept.version == "11"  # the next CAS (the write-back) is on the newest object
    assert "orders" in s._repairs  # the controller writes it back
    # Once the object holds it again, nothing is pending.
    s._apply("topics", "MODIFIED", stored(rec, 12))
    assert "orders" not in s._repairs


def test_another_topic_id_or_a_shortened_assignment_in_the_same_object_is_refused_too():
    s, rec = store(), complete()
    s._apply("topics", "MODIFIED", stored(rec, 10))
    s._apply("topics", "MODIFIED", stored(dataclasses.replace(rec, topic_id=uuid.uuid4()), 11))
    assert s._topics["orders"].topic_id == rec.topic_id
    s._apply("topics", "MODIFIED", stored(dataclasses.replace(rec, assignment=ASSIGNMENT[:1]), 12))
    assert s._topics["orders"].assignment == ASSIGNMENT


def test_a_recreated_object_is_a_new_topic_and_a_kubectl_made_one_is_completed():
    s, rec = store(), complete()
    s._apply("topics", "MODIFIED", stored(rec, 10))
    # Deleted and created again (a new uid): a new topic, for the controller to give a new id.
    s._apply("topics", "MODIFIED", without_status(stored(rec, 10, uid="uid-2"), 11))
    assert s._topics["orders"].topic_id == NO_TOPIC_ID and s._topics["orders"].assignment is None
    assert not s._repairs
    # A spec-only KafkaTopic never seen with an id is completed as before.
    fresh = store()
    fresh._apply("topics", "ADDED", without_status(stored(rec, 20), 20))
    assert fresh._topics["orders"].topic_id == NO_TOPIC_ID and not fresh._repairs


def detached(obj: dict) -> dict:
    out = dict(obj, metadata=dict(obj["metadata"], annotations={ko.MANAGED_ANNOTATION: "false"}))
    return out


def test_deleting_a_detached_kafkatopic_keeps_its_topic_for_the_next_object_to_hold():
    s, rec = store(), complete()
    s._apply("topics", "MODIFIED", detached(stored(rec, 10)))
    s._apply("topics", "DELETED", {"metadata": {"name": "fleet-orders", "resourceVersion": "11"}})
    kept = s._topics["orders"]  # still in the image: no broker deletes its partitions
    assert kept.topic_id == rec.topic_id and kept.assignment == ASSIGNMENT
    assert s._detached["orders"] == kept and "orders" in s._repairs  # the controller writes a KafkaTopic
    # The brokers' new object, before its status is written: it holds the topic with its id.
    s._apply("topics", "ADDED", without_status(stored(rec, 12, uid="uid-2"), 12))
    held = s._topics["orders"]
    assert held.topic_id == rec.topic_id and held.assignment == ASSIGNMENT and held.version == "12"
    assert "orders" not in s._detached and "orders" in s._repairs


def test_a_managed_kafkatopic_deleted_or_one_deleted_by_delete_topics_ends_its_topic():
    s, rec = store(), complete()
    s._apply("topics", "MODIFIED", stored(rec, 10))
    s._apply("topics", "DELETED", {"metadata": {"name": "fleet-orders", "resourceVersion": "11"}})
    assert "orders" not in s._topics and not s._detached
    # DeleteTopics of a detached topic: this store's own delete is never taken for a detach.
    s._apply("topics", "MODIFIED", detached(stored(rec, 12, uid="uid-3")))
    s._deleting.add("fleet-orders")
    s._apply("topics", "DELETED", {"metadata": {"name": "fleet-orders", "resourceVersion": "13"}})
    assert "orders" not in s._topics and not s._detached
