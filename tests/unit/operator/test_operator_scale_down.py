"""Scale-down safety (builders/scale_down.py) and the ScaleDownBlocked condition."""

from __future__ import annotations

from datetime import datetime, timezone

from flotilla_operator.builders import build_all
from flotilla_operator.builders.scale_down import ScaleDecision, replica_holders, scale_decision
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec
from flotilla_operator.status import kafka_cluster_status

NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=timezone.utc)


def topic(name: str, *replicas: list[int], topic_name: str | None = None) -> dict:
    obj = {"metadata": {"name": name}, "spec": {"partitions": len(replicas)},
           "status": {"assignment": [{"leader": r[0], "leaderEpoch": 0, "replicas": r, "isr": r} for r in replicas]}}
    if topic_name:
        obj["spec"]["topicName"] = topic_name
    return obj


TOPICS = [
    topic("orders", [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0]),
    topic("consumer-offsets-x", [4], [0], topic_name="__consumer_offsets"),
    {"metadata": {"name": "new"}, "spec": {"partitions": 3}},  # not assigned yet: holds nothing
]


def test_holders_come_from_the_assignment_using_kafka_names():
    holders = replica_holders(TOPICS)
    assert holders[4] == ["orders-2", "orders-3", "__consumer_offsets-0"]
    assert holders[0] == ["orders-0", "orders-3", "__consumer_offsets-1"]
    assert set(holders) == {0, 1, 2, 3, 4}


def test_growing_creating_or_keeping_is_never_held():
    assert scale_decision(None, 3, TOPICS) == ScaleDecision(3)
    assert scale_decision(3, 5, TOPICS) == ScaleDecision(5)
    assert scale_decision(5, 5, TOPICS) == ScaleDecision(5)


def test_shrinking_onto_replica_holders_is_held_at_the_highest_holder():
    d = scale_decision(5, 3, TOPICS)
    assert d.blocked and d.replicas == 5 and d.blocked_nodes == (3, 4)
    assert d.held == ("__consumer_offsets-0", "orders-1", "orders-2", "orders-3")
    msg = d.message()
    assert msg.startswith("not removing broker(s) 3, 4: they still hold replicas of 4 partition(s) (")
    assert "orders-1" in msg and "keeping 5 brokers" in msg


def test_only_the_brokers_that_hold_replicas_are_kept():
    # Node 4 holds nothing any more, node 3 still does: the StatefulSet may lose node 4 only.
    moved = [topic("orders", [0, 1, 2], [1, 2, 3], [2, 3, 0], [3, 1, 0])]
    d = scale_decision(5, 2, moved)
    assert d.replicas == 4 and d.blocked_nodes == (2, 3)
    # Nothing on the brokers to remove: scale down at once.
    assert scale_decision(5, 4, moved) == ScaleDecision(4)


def test_many_partitions_are_counted_and_a_few_named():
    d = scale_decision(2, 1, [topic("t", *[[1]] * 40)])
    assert "40 partition(s) (t-0, t-1, t-2, t-3, t-4, ...)" in d.message()


def test_the_statefulset_keeps_the_held_size_and_the_rest_follows_the_spec(owner):
    spec = KafkaClusterSpec.model_validate({"replicas": 3})
    held = build_all(owner, spec, image="i", statefulset_replicas=5)
    assert held.statefulset["spec"]["replicas"] == 5
    assert build_all(owner, spec, image="i").statefulset["spec"]["replicas"] == 3
    assert held.config_hash == build_all(owner, spec, image="i").config_hash


def _sts(replicas: int) -> dict:
    return {"metadata": {"generation": 2}, "spec": {"replicas": replicas, "template": {"metadata": {"annotations": {}}}},
            "status": {"observedGeneration": 2, "replicas": replicas, "readyReplicas": replicas,
                       "updatedReplicas": replicas, "currentRevision": "r", "updateRevision": "r"}}


def test_status_reports_the_block_and_drops_it_once_clear(owner):
    d = scale_decision(5, 3, TOPICS)
    s = kafka_cluster_status(owner, replicas=3, port=9092, config_hash=None, statefulset=_sts(5), now=NOW, scale=d)
    by_type = {c["type"]: c for c in s["conditions"]}
    blocked = by_type["ScaleDownBlocked"]
    assert (blocked["status"], blocked["reason"]) == ("True", "ReplicasOnRemovedBrokers")
    assert blocked["message"] == d.message()
    assert (by_type["Reconciling"]["status"], by_type["Reconciling"]["reason"]) == ("True", "ScaleDownBlocked")
    assert by_type["Ready"]["status"] == "False" and by_type["Degraded"]["status"] == "False"
    # Replicas moved and the StatefulSet shrank: no condition left (a merge patch replaces the list).
    clear = kafka_cluster_status(owner, replicas=3, port=9092, config_hash=None, statefulset=_sts(3), now=NOW,
                                 previous=s, scale=scale_decision(3, 3, TOPICS))
    assert "ScaleDownBlocked" not in {c["type"] for c in clear["conditions"]}
    assert {c["type"]: c["status"] for c in clear["conditions"]}["Ready"] == "True"
