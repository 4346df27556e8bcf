"""Manual replica assignments (controller/manual_assignment.py): Kafka's checks in its order and
words, the first state of a partition placed by hand, and the planner placing a created topic's
partitions where its CreateTopics asked (file store and KafkaTopic round trip)."""

from __future__ import annotations

import dataclasses

import pytest

from broker.controller import manual_assignment as m
from broker.controller.planner import plan_topic
from broker.metadata import kube_objects as ko
from broker.metadata.file_store import topic_from_json, topic_to_json
from broker.metadata.store import PartitionState, new_topic

REG = {1, 2, 3}


def refusal(fn, *args) -> tuple[str, str]:
    with pytest.raises(m.ManualAssignmentError) as e:
        fn(*args)
    return e.value.code, str(e.value)


def test_new_topic_replicas_in_index_order():
    assert m.for_new_topic([(1, [2, 3]), (0, [3, 1])], -1, -1, REG, REG) == ((3, 1), (2, 3))


@pytest.mark.parametrize("entries, parts, rf, code, words", [
    ([(0, [1])], 3, -1, "invalid_request", "numPartitions was not set to -1"),
    ([(0, [1])], -1, 2, "invalid_request", "replication factor was not set to -1"),
    ([(0, [1]), (0, [2])], -1, -1, "invalid_replica_assignment", "multiple manual partition assignments for partition 0"),
    ([(0, [])], -1, -1, "invalid_replica_assignment", "empty replica list"),
    ([(0, [2, 2])], -1, -1, "invalid_replica_assignment", "the broker 2 more than once"),
    ([(0, [9, 1, 1])], -1, -1, "invalid_replica_assignment", "the broker 1 more than once"),  # smallest id first
    ([(0, [1, 9])], -1, -1, "invalid_replica_assignment", "broker 9, but no such broker is registered"),
    ([(0, [1, 2]), (1, [3])], -1, -1, "invalid_replica_assignment", "with 1 replica(s), but this is not consistent"),
    ([(0, [1]), (2, [2])], -1, -1, "invalid_replica_assignment", "consecutive 0-based integer sequence"),
])
def test_new_topic_refusals(entries, parts, rf, code, words):
    got = refusal(m.for_new_topic, entries, parts, rf, REG, REG)
    assert got[0] == code and words in got[1], got


def test_all_replicas_inactive_is_refused():
    got = refusal(m.for_new_topic, [(0, [1, 2])], -1, -1, REG, {3})
    assert got == ("invalid_replica_assignment", "All brokers specified in the manual partition assignment for "
                                                 "partition 0 are fenced or in controlled shutdown.")


def test_new_partitions_count_and_factor():
    assert m.for_new_partitions([[1, 2], [2, 3]], 3, 2, 2, REG, REG) == ((1, 2), (2, 3))
    assert refusal(m.for_new_partitions, [[1, 2]], 3, 2, 2, REG, REG)[1] == \
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
    assert "with 3 replica(s)" in refusal(m.for_new_partitions, [[1, 2, 3]], 3, 1, 2, REG, REG)[1]
    # The second new partition (index 4) has no active broker.
    assert "partition 4 are fenced" in refusal(m.for_new_partitions, [[1, 3], [1, 2]], 3, 2, 2, REG, {3})[1]


def test_first_state_leads_with_the_first_active_replica():
    assert m.first_state((3, 1, 2), {1, 2, 3}) == PartitionState(3, 0, (3, 1, 2), (3, 1, 2))
    assert m.first_state((3, 1, 2), {1, 2}) == PartitionState(1, 0, (3, 1, 2), (1, 2))
    assert m.first_state((3,), set()) == PartitionState(-1, 0, (3,), (3,))


def test_planner_places_requested_replicas_then_grows_by_itself():
    topic = dataclasses.replace(new_topic("t", 2, 2), requested_replicas=((3, 1), (1, 2)))
    plan = plan_topic(topic, {1: None, 2: None, 3: None})
    assert plan.assignment == (PartitionState(3, 0, (3, 1), (3, 1)), PartitionState(1, 0, (1, 2), (1, 2)))
    grown = dataclasses.replace(topic, partitions=3, assignment=plan.assignment)
    more = plan_topic(grown, {1: None, 2: None, 3: None}).assignment
    assert more[:2] == plan.assignment and len(more[2].replicas) == 2


def test_requested_replicas_survive_the_stores():
    topic = dataclasses.replace(new_topic("t", 2, 2), requested_replicas=((3, 1), (1, 2)))
    assert topic_from_json(topic_to_json(topic)).requested_replicas == ((3, 1), (1, 2))
    obj = ko.topic_object("c", topic)
    obj["metadata"]["resourceVersion"] = "1"
    obj.pop("status")  # the API server drops status from a create
    assert ko.record_from_topic(obj).requested_replicas == ((3, 1), (1, 2))
    assert topic_from_json(topic_to_json(new_topic("u", 1))).requested_replicas is None
