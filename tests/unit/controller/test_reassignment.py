"""Partition reassignment as the controller decides it (KIP-455; controller/reassignment.py), and
the controller's writes of it: started, completed only once the target is in the ISR (leader moved
off a removed replica, epoch bumped when replicas leave), cancelled back to the original replicas,
Kafka's refusals."""

from __future__ import annotations

import dataclasses

import pytest

from broker.controller import reassignment as r
from broker.controller.controller import Controller
from broker.controller.planner import plan_topic
from broker.metadata.store import PartitionState, TopicRecord, new_topic
from tests.unit.controller.test_controller import SwitchableStore, reg, until

LIVE = {1, 2, 3, 4}


def st(leader=1, epoch=5, replicas=(1, 2, 3), isr=None, adding=(), removing=()):
    return PartitionState(leader, epoch, tuple(replicas), tuple(isr if isr is not None else replicas),
                          tuple(adding), tuple(removing))


def test_start_records_target_first_then_the_removing_replicas():
    moving = r.start(st(), (2, 3, 4), electable=LIVE)
    assert moving == st(replicas=(2, 3, 4, 1), isr=(1, 2, 3), adding=(4,), removing=(1,))
    assert r.target(moving) == (2, 3, 4) and r.original(moving) == (2, 3, 1)
    assert r.in_progress(moving)


def test_not_complete_until_every_target_replica_is_in_the_isr():
    moving = r.start(st(), (2, 3, 4), electable=LIVE)
    assert r.complete(moving, LIVE) is None
    caught_up = dataclasses.replace(moving, isr=(2, 3, 4, 1))
    done = r.complete(caught_up, LIVE)
    # The leader (1) is removed: a target replica in the ISR leads, at the next epoch.
    assert done == st(leader=2, epoch=6, replicas=(2, 3, 4), isr=(2, 3, 4))


def test_completion_that_removes_a_follower_bumps_the_epoch_and_keeps_the_leader():
    caught_up = dataclasses.replace(r.start(st(), (1, 2, 4), electable=LIVE), isr=(1, 2, 3, 4))
    assert r.complete(caught_up, LIVE) == st(leader=1, epoch=6, replicas=(1, 2, 4), isr=(1, 2, 4))


def test_adding_only_completes_without_an_epoch_bump():
    caught_up = dataclasses.replace(r.start(st(), (1, 2, 3, 4), electable=LIVE), isr=(1, 2, 3, 4))
    assert r.complete(caught_up, LIVE) == st(leader=1, epoch=5, replicas=(1, 2, 3, 4), isr=(1, 2, 3, 4))


def test_a_reorder_or_a_removal_of_in_sync_replicas_completes_at_once():
    assert r.start(st(), (3, 2, 1), electable=LIVE) == st(replicas=(3, 2, 1), isr=(1, 2, 3))
    assert r.start(st(), (2, 3), electable=LIVE) == st(leader=2, epoch=6, replicas=(2, 3), isr=(2, 3))


def test_a_target_replica_that_left_the_isr_holds_completion_back():
    moving = dataclasses.replace(r.start(st(), (2, 3, 4), electable=LIVE), isr=(1, 2, 4))
    assert r.complete(moving, LIVE) is None


def test_cancel_reverts_to_the_original_replicas():
    moving = dataclasses.replace(r.start(st(), (2, 3, 4), electable=LIVE), isr=(1, 2, 3, 4))
    assert r.cancel(moving, False, LIVE) == st(leader=1, epoch=6, replicas=(2, 3, 1), isr=(2, 3, 1))
    with pytest.raises(r.ReassignmentError) as e:
        r.cancel(st(), False, LIVE)
    assert e.value.code == "no_reassignment_in_progress"


def test_cancel_that_needs_an_unclean_election_is_refused_unless_allowed():
    # Only the adding replica is in the ISR (and leads).
    moving = PartitionState(4, 7, (4, 1), (4,), (4,), (1,))
    with pytest.raises(r.ReassignmentError) as e:
        r.cancel(moving, False, LIVE)
    assert e.value.code == "invalid_replica_assignment"
    assert r.cancel(moving, True, LIVE) == PartitionState(1, 8, (1,), (1,))


@pytest.mark.parametrize("replicas,why", [((), "empty replica list"), ((1, 2, 1), "broker 1 more than once"),
                                          ((1, 9), "broker 9, but no such broker is registered")])
def test_invalid_targets_are_refused_as_kafka_refuses_them(replicas, why):
    with pytest.raises(r.ReassignmentError) as e:
        r.validate_target(replicas, LIVE)
    assert e.value.code == "invalid_replica_assignment" and why in str(e.value)


def test_replication_factor_change_refused_when_not_allowed():
    with pytest.raises(r.ReassignmentError) as e:
        r.start(st(), (1, 2), allow_replication_factor_change=False, electable=LIVE)
    assert e.value.code == "invalid_replication_factor"


def test_the_planner_completes_a_reassignment_once_the_target_caught_up():
    moving = r.start(st(), (2, 3, 4), electable=LIVE)
    topic = TopicRecord("t", new_topic("t", 1).topic_id, 1, 3, assignment=(moving,))
    assert plan_topic(topic, {n: None for n in LIVE}).assignment is None  # still catching up
    caught_up = dataclasses.replace(topic, assignment=(dataclasses.replace(moving, isr=(1, 2, 3, 4)),))
    assert plan_topic(caught_up, {n: None for n in LIVE}).assignment == (st(leader=2, epoch=6, replicas=(2, 3, 4), isr=(2, 3, 4)),)


async def test_controller_records_a_reassignment_and_refuses_what_kafka_refuses(tmp_path):
    store = SwitchableStore(tmp_path, "c")
    for n in (1, 2, 3, 4):
        await store.register_broker(reg(n))
    controller = Controller(store, node_id=1, campaign_interval_s=0.05)
    controller.start()
    try:
        await store.create_topic(new_topic("t", 2, replication_factor=3))
        await until(lambda: store.image.topics["t"].assignment is not None and controller.active)
        before = store.image.topics["t"].assignment
        spare = next(n for n in (1, 2, 3, 4) if n not in before[0].replicas)
        wanted = [spare, *before[0].replicas[1:]]  # the first replica moves to the spare broker
        out = await controller.alter_reassignments({"t": {0: wanted, 1: None, 5: [1]}, "nope": {0: [1]}})
        assert out[("t", 0)] == ("none", None)
        assert out[("t", 1)][0] == "no_reassignment_in_progress"
        assert out[("t", 5)][0] == out[("nope", 0)][0] == "unknown_topic_or_partition"
        p0 = store.image.topics["t"].assignment[0]
        # As Kafka's controller: the original replicas are the full set without the adding ones,
        # in the order the reassignment keeps them (target first).
        assert r.target(p0) == tuple(wanted) and p0.adding == (spare,) and set(r.original(p0)) == set(before[0].replicas)
        out = await controller.alter_reassignments({"t": {0: None}})
        assert out[("t", 0)] == ("none", None)
        assert set(store.image.topics["t"].assignment[0].replicas) == set(before[0].replicas)
        assert not r.in_progress(store.image.topics["t"].assignment[0])
    finally:
        await controller.stop()
