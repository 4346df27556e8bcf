"""KIP-392's replica selection (broker/replica/replica_selector.py), pure, and its broker key:
the candidates and choices of Kafka's findPreferredReadReplica and RackAwareReplicaSelector."""

from __future__ import annotations

import pytest

from broker.config import ConfigError, parse_config
from broker.replica.replica_selector import (LEADER, NO_REPLICA, RACK_AWARE, FollowerView, ReplicaView, candidates,
                                             preferred_read_replica, select)

LEADER_R1 = ReplicaView(1, "r1", 100, 0)


def follower(broker_id: int, rack: str | None, log_end: int = 100, since_ms: int = 0, in_isr: bool = True,
             log_start: int = 0, reachable: bool = True) -> FollowerView:
    return FollowerView(ReplicaView(broker_id, rack, log_end, since_ms), in_isr, log_start, reachable)


def test_the_key_is_unset_by_default_and_takes_kafkas_class_names_only():
    assert parse_config({})["replica.selector.class"] == ""
    assert parse_config({"replica.selector.class": RACK_AWARE})["replica.selector.class"] == RACK_AWARE
    assert parse_config({"replica.selector.class": f" {LEADER} "})["replica.selector.class"] == LEADER
    with pytest.raises(ConfigError, match="replica.selector.class") as e:
        parse_config({"replica.selector.class": "com.example.MySelector"})
    assert "RackAwareReplicaSelector" in str(e.value)  # says what is accepted


def test_a_follower_in_the_clients_rack_is_preferred_when_the_leader_is_elsewhere():
    followers = [follower(2, "r2"), follower(3, "r3")]
    assert preferred_read_replica(RACK_AWARE, "r2", LEADER_R1, followers, 50) == 2
    assert preferred_read_replica(RACK_AWARE, "r3", LEADER_R1, followers, 50) == 3


def test_the_leader_means_no_preferred_replica():
    followers = [follower(2, "r1"), follower(3, "r3")]
    assert preferred_read_replica(RACK_AWARE, "r1", LEADER_R1, followers, 50) == NO_REPLICA  # leader in the rack
    assert preferred_read_replica(RACK_AWARE, "r9", LEADER_R1, followers, 50) == NO_REPLICA  # no replica there
    assert preferred_read_replica(RACK_AWARE, "", LEADER_R1, followers, 50) == NO_REPLICA  # client has no rack
    assert preferred_read_replica(RACK_AWARE, None, LEADER_R1, followers, 50) == NO_REPLICA
    assert preferred_read_replica(LEADER, "r3", LEADER_R1, followers, 50) == NO_REPLICA  # Kafka's LeaderSelector


def test_only_in_sync_reachable_followers_holding_the_fetch_offset_are_candidates():
    assert candidates([follower(2, "r2", in_isr=False)], 50) == []  # out of the ISR: may lag forever
    assert candidates([follower(2, "r2", log_end=49)], 50) == []  # has not got the offset yet
    assert [c.broker_id for c in candidates([follower(2, "r2", log_end=50)], 50)] == [2]  # at its end: may wait there
    assert candidates([follower(2, "r2", log_start=51)], 50) == []  # deleted below its log start
    assert candidates([follower(2, "r2", reachable=False)], 50) == []  # no endpoint on the client's listener
    assert preferred_read_replica(RACK_AWARE, "r2", LEADER_R1, [follower(2, "r2", in_isr=False)], 50) == NO_REPLICA


def test_the_most_caught_up_of_the_racks_followers_wins():
    same = [follower(2, "r2", log_end=90, since_ms=0), follower(3, "r2", log_end=100, since_ms=500),
            follower(4, "r2", log_end=100, since_ms=20)]
    assert preferred_read_replica(RACK_AWARE, "r2", LEADER_R1, same, 50) == 4  # end 100, caught up most recently
    tie = [follower(5, "r2"), follower(3, "r2")]
    assert preferred_read_replica(RACK_AWARE, "r2", LEADER_R1, tie, 50) == 3  # a full tie: the lowest id


def test_an_unknown_selector_is_an_error_not_a_silent_leader():
    with pytest.raises(ValueError, match="unknown replica selector"):
        select("com.example.Nope", "r2", LEADER_R1, [])
