"""A KafkaTopic's cluster is its flotilla.io/cluster label alone (issue 41 item 6): the operator no
longer reads app.kubernetes.io/instance; one release's migration at start-up labels the topics that
relied on it, and a topic naming no cluster gets a condition saying the label is missing."""

from __future__ import annotations

import copy
from datetime import datetime, timezone

from flotilla_operator.builders import topic_labels as tl
from flotilla_operator.builders.common import cluster_of
from flotilla_operator.reconcilers.common import cluster_objects
from flotilla_operator.reconcilers.startup import mark_unlabelled, migrate_topic_labels, topic_without_cluster

from tests.unit.operator.test_operator_handlers import FakeKube

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)
INSTANCE, CLUSTER = "app.kubernetes.io/instance", "flotilla.io/cluster"


def topic(name, labels, *, namespace="ns", topic_id="q1ZzRXxhTlKbUm8Yw3Xq5A", generation=1):
    obj = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
           "metadata": {"name": name, "namespace": namespace, "generation": generation, "labels": dict(labels)},
           "spec": {"partitions": 3, "replicas": 3}}
    if topic_id:
        obj["status"] = {"topicId": topic_id, "partitions": 3, "observedGeneration": generation,
                         "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}
    return obj


def kafka_cluster(name, namespace="ns"):
    return {"kind": "KafkaCluster", "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}}


def test_the_instance_label_alone_names_no_cluster():
    assert cluster_of(topic("orders", {INSTANCE: "demo"})) is None
    assert cluster_of(topic("orders", {INSTANCE: "argo-app", CLUSTER: "demo"})) == "demo"


async def test_a_clusters_objects_are_selected_by_flotilla_io_cluster_only():
    kube = FakeKube([topic("a", {CLUSTER: "demo"}), topic("b", {INSTANCE: "demo"}), topic("c", {CLUSTER: "other"})])
    assert [o["metadata"]["name"] for o in await cluster_objects(kube, "KafkaTopic", "ns", "demo")] == ["a"]


def test_migration_labels_only_topics_a_cluster_took_in_through_the_old_label():
    topics = [
        topic("joined", {INSTANCE: "demo"}),                                 # relied on the fallback
        topic("labelled", {INSTANCE: "demo", CLUSTER: "demo"}),              # nothing to do
        topic("helm-release", {INSTANCE: "my-release"}),                     # no such cluster
        topic("fresh", {INSTANCE: "demo"}, topic_id=None),                   # never taken in
        topic("elsewhere", {INSTANCE: "demo"}, namespace="other"),           # demo is not in `other`
        topic("bare", {}),
    ]
    plan = tl.migration_plan(topics, [kafka_cluster("demo")])
    assert plan == [tl.Relabel("ns", "joined", "demo")]
    assert tl.label_patch("demo") == {"metadata": {"labels": {CLUSTER: "demo"}}}


def test_missing_label_condition_says_which_label_and_is_written_once():
    obj = topic("helm-release", {INSTANCE: "my-release"}, topic_id=None, generation=2)
    patch = tl.missing_label_status(obj, NOW)
    (ready,) = patch["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "ClusterLabelMissing")
    assert "add the label flotilla.io/cluster=<cluster name>" in ready["message"]
    assert "app.kubernetes.io/instance=my-release no longer names a cluster" in ready["message"]
    assert ready["observedGeneration"] == 2
    # Never status.observedGeneration: the brokers read it as "status reflects this spec".
    assert set(patch) == {"conditions"}
    assert tl.missing_label_status({**obj, "status": patch}, NOW) is None
    assert tl.missing_label_status(topic("ok", {CLUSTER: "demo"}), NOW) is None


def test_a_topic_brokers_serve_through_the_old_label_keeps_their_status():
    """Brokers (which read app.kubernetes.io/instance until the next release) wrote its status:
    writing over it would start a tug of war with them, so the operator only warns."""
    served = topic("late", {INSTANCE: "demo"})
    assert tl.served_without_label(served) == "demo"
    assert tl.missing_label_status(served, NOW) is None
    assert tl.served_without_label(topic("late", {INSTANCE: "demo"}, topic_id=None)) is None
    assert tl.served_without_label(topic("ok", {INSTANCE: "demo", CLUSTER: "demo"})) is None


class PatchKube(FakeKube):
    def __init__(self, objects):
        super().__init__(objects)
        self.patches = []

    async def patch(self, kind, namespace, name, patch):
        self.patches.append((kind, name, patch))
        obj = self.objects[(kind, namespace, name)]
        obj["metadata"].setdefault("labels", {}).update(patch["metadata"]["labels"])
        return obj


async def test_start_up_migration_labels_logs_and_marks_the_rest(caplog):
    kube = PatchKube([kafka_cluster("demo"), topic("joined", {INSTANCE: "demo"}),
                      topic("helm-release", {INSTANCE: "my-release"}, topic_id=None),
                      topic("labelled", {CLUSTER: "demo"})])
    done = await migrate_topic_labels(kube, ["ns"])
    assert done == [tl.Relabel("ns", "joined", "demo")]
    assert kube.objects[("KafkaTopic", "ns", "joined")]["metadata"]["labels"][CLUSTER] == "demo"
    assert [(k, n) for k, n, _ in kube.patches] == [("KafkaTopic", "joined")]
    assert [(k, n) for k, n, _ in kube.statuses] == [("KafkaTopic", "helm-release")]
    assert any("KafkaTopic ns/joined named its cluster by app.kubernetes.io/instance alone: labelled "
               "flotilla.io/cluster=demo" in r.getMessage() for r in caplog.records)
    # A second start changes nothing.
    before = (len(kube.patches), len(kube.statuses))
    assert await migrate_topic_labels(kube, []) == []
    assert (len(kube.patches), len(kube.statuses)) == before


async def test_an_unlabelled_topics_event_marks_it():
    obj = topic("bare", {}, topic_id=None)
    kube = PatchKube([copy.deepcopy(obj)])
    assert await mark_unlabelled(kube, obj) is True
    assert kube.objects[("KafkaTopic", "ns", "bare")]["status"]["conditions"][0]["reason"] == "ClusterLabelMissing"
    assert await mark_unlabelled(kube, topic("t", {CLUSTER: "demo"})) is False


async def test_a_served_unlabelled_topic_is_warned_about_once_and_its_status_left(caplog):
    served = topic("late", {INSTANCE: "demo"})
    kube = PatchKube([copy.deepcopy(served)])
    warned = set()
    await topic_without_cluster(kube, served, warned)
    await topic_without_cluster(kube, served, warned)
    assert kube.statuses == [] and kube.patches == []
    lines = [r.getMessage() for r in caplog.records if "KafkaTopic ns/late has no flotilla.io/cluster" in r.getMessage()]
    assert len(lines) == 1 and "label it flotilla.io/cluster=demo" in lines[0]
