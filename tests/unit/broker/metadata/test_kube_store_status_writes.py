"""What the Kubernetes store writes to a KafkaTopic, and which objects it takes as its cluster's:
status only (never spec), a lagging status queued for the controller, a second resource naming a
held topic marked ResourceConflict, membership by flotilla.io/cluster or the older
app.kubernetes.io/instance. Objects are fed to the watch handler directly, writes captured;
tests/e2e/test_kafkatopic_spec.py runs the same on a real API server with brokers."""

import copy
import dataclasses

import pytest

from broker.metadata import kube_objects as ko
from broker.metadata.kube_store import KubernetesMetadataStore
from broker.metadata.store import PartitionState

ASSIGNMENT = (PartitionState(1, 0, (1, 2), (1, 2)), PartitionState(2, 0, (2, 1), (2,)))


def store() -> KubernetesMetadataStore:
    return KubernetesMetadataStore(cluster_id="c", cluster_name="fleet", namespace="ns")


def user_topic(name="clicks", rv=5, label=ko.CLUSTER_LABEL, cluster="fleet", created="2026-01-01T00:00:00Z",
               spec=None, status=None) -> dict:
    obj = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
           "metadata": {"name": name, "resourceVersion": str(rv), "generation": 1, "uid": f"uid-{name}",
                        "creationTimestamp": created, "labels": {label: cluster}},
           "spec": spec if spec is not None else {"partitions": 2, "config": {"retention.ms": 86400000}}}
    if status is not None:
        obj["status"] = status
    return obj


async def test_update_topic_writes_status_only_and_leaves_the_users_spec_as_applied():
    s = store()
    obj = user_topic()
    applied = copy.deepcopy(obj["spec"])
    s._apply("topics", "ADDED", obj)
    writes = []

    async def capture(name, body, subresource=False):
        writes.append((name, subresource, copy.deepcopy(body)))
        out = copy.deepcopy(body)
        out["metadata"]["resourceVersion"] = "6"
        return out

    s._write_topic = capture
    rec = s._topics["clicks"]
    grown = dataclasses.replace(rec, partitions=4, configs={"retention.ms": "1000"}, assignment=ASSIGNMENT)
    await s.update_topic(grown)
    [(name, subresource, body)] = writes
    assert name == "clicks" and subresource
    assert body["spec"] == applied  # retention.ms still the integer the user wrote; nothing added
    assert body["status"]["partitions"] == 4 and body["status"]["config"] == {"retention.ms": "1000"}
    assert body["status"]["observedGeneration"] == 1
    # The answer is the topic as it is in force: Kafka's change, not the spec's.
    assert s._topics["clicks"].partitions == 4 and s._topics["clicks"].configs == {"retention.ms": "1000"}


def test_a_status_that_lags_the_record_is_queued_for_the_controller():
    s = store()
    rec = dataclasses.replace(ko.record_from_topic(user_topic()), assignment=ASSIGNMENT,
                              topic_id=__import__("uuid").uuid4())
    old_status = {"topicId": ko.topic_id_text(rec.topic_id), "assignment": ko._assignment_json(ASSIGNMENT)}
    s._apply("topics", "ADDED", user_topic(status=old_status))  # written by an older version
    assert not s._repairs  # only the controller looks (and writes)
    s._is_acting_controller = lambda: True
    s._apply("topics", "MODIFIED", user_topic(rv=6, status=old_status))
    assert "clicks" in s._repairs
    s._repairs.clear()
    current = user_topic(rv=7, status=ko.topic_status(s._topics["clicks"], old_status, 1))
    s._apply("topics", "MODIFIED", current)
    assert not s._repairs
    # A spec the brokers have not reflected yet (a new generation) is queued again.
    changed = copy.deepcopy(current)
    changed["metadata"].update(resourceVersion="8", generation=2)
    changed["spec"]["config"]["retention.ms"] = 1000
    s._apply("topics", "MODIFIED", changed)
    assert "clicks" in s._repairs and s._topics["clicks"].configs == {"retention.ms": "1000"}


def test_a_second_kafkatopic_naming_a_held_topic_is_marked_resource_conflict():
    s = store()
    s._apply("topics", "ADDED", user_topic("orders-a", spec={"topicName": "orders"}))
    s._apply("topics", "ADDED", user_topic("orders-b", spec={"topicName": "orders"}, created="2026-01-02T00:00:00Z"))
    assert s._object_of["orders"] == "orders-a" and s._conflicts == {"orders-b"}
    status = ko.conflict_status(s._topic_objs["orders-b"], "orders-a", "orders")
    assert status["conditions"][0]["reason"] == "ResourceConflict" and "orders-a" in status["conditions"][0]["message"]
    # Once it says so, it is not written again.
    s._conflicts.clear()
    s._apply("topics", "MODIFIED", user_topic("orders-b", rv=9, spec={"topicName": "orders"},
                                              created="2026-01-02T00:00:00Z", status=status))
    assert not s._conflicts


@pytest.mark.parametrize("label", [ko.CLUSTER_LABEL, ko.INSTANCE_LABEL])
def test_membership_by_either_cluster_label_and_other_clusters_ignored(label):
    s = store()
    s._apply("topics", "ADDED", user_topic("mine", label=label))
    s._apply("topics", "ADDED", user_topic("theirs", cluster="other"))
    s._apply("topics", "ADDED", {**user_topic("unlabelled"), "metadata": {**user_topic("unlabelled")["metadata"], "labels": {}}})
    assert set(s._topics) == {"mine"}
    # Relabelled to another cluster: gone from this one.
    s._apply("topics", "MODIFIED", user_topic("mine", rv=9, cluster="other"))
    assert not s._topics
