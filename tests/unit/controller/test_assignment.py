"""Replica placement and leader election (broker/controller/assignment.py): pure functions."""

from __future__ import annotations

import collections
import random

import pytest

from broker.controller.assignment import (
    NO_LEADER,
    AssignmentError,
    assign_replicas,
    continuation,
    elect_leader,
    rack_alternating,
)

THREE = {1: None, 2: None, 3: None}


def test_leaders_spread_evenly_over_brokers():
    out = assign_replicas(12, 1, THREE, rng=random.Random(7))
    leaders = collections.Counter(r[0] for r in out)
    assert leaders == {1: 4, 2: 4, 3: 4}


def test_round_robin_from_the_start_index():
    out = assign_replicas(4, 1, THREE, start_index=1, shift=0)
    assert out == [(2,), (3,), (1,), (2,)]


def test_random_start_differs_between_topics():
    starts = {assign_replicas(1, 1, THREE)[0][0] for _ in range(60)}
    assert starts == {1, 2, 3}


def test_followers_are_distinct_and_shift_per_round():
    out = assign_replicas(6, 2, THREE, start_index=0, shift=0)
    assert all(len(set(r)) == 2 for r in out)
    # Kafka's layout: first round followers are leader+1, the second round leader+2.
    assert out[:3] == [(1, 2), (2, 3), (3, 1)]
    assert out[3:] == [(1, 3), (2, 1), (3, 2)]


def test_replication_factor_above_live_brokers_is_refused():
    with pytest.raises(AssignmentError, match="larger than the 3 available brokers"):
        assign_replicas(1, 4, THREE)
    with pytest.raises(AssignmentError, match="1 available broker$"):
        assign_replicas(1, 2, {5: None})


def test_no_brokers_is_refused():
    with pytest.raises(AssignmentError):
        assign_replicas(1, 1, {})


def test_rack_alternating_order():
    brokers = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}
    assert rack_alternating(brokers) == [1, 3, 5, 2, 4]


def test_rack_aware_replicas_cover_distinct_racks():
    brokers = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for start in range(6):
        for shift in range(6):
            out = assign_replicas(12, 3, brokers, start_index=start, shift=shift)
            for replicas in out:
                assert len(set(replicas)) == 3
                assert {brokers[b] for b in replicas} == {"a", "b", "c"}, replicas
    leaders = collections.Counter(r[0] for r in assign_replicas(12, 3, brokers, rng=random.Random(1)))
    assert set(leaders.values()) == {2}


def test_rack_unaware_when_a_broker_has_no_rack():
    out = assign_replicas(3, 1, {1: "a", 2: None, 3: "b"}, start_index=0, shift=0)
    assert out == [(1,), (2,), (3,)]


def test_growing_continues_from_partition_zero_leader():
    existing = assign_replicas(3, 1, THREE, start_index=2, shift=0)
    start = continuation(existing, THREE)
    grown = assign_replicas(3, 1, THREE, first_partition=3, start_index=start, shift=0)
    leaders = collections.Counter(r[0] for r in existing + grown)
    assert leaders == {1: 2, 2: 2, 3: 2}
    assert continuation([], THREE) is None
    assert continuation([(9,)], THREE) is None


def test_elect_leader_prefers_assignment_order():
    assert elect_leader((2, 3, 1), (1, 2, 3), {1, 2, 3}) == 2
    assert elect_leader((2, 3, 1), (1, 2, 3), {1, 3}) == 3
    assert elect_leader((2, 3, 1), (1,), {1, 2, 3}) == 1


def test_single_replica_offline_until_it_returns():
    assert elect_leader((2,), (2,), {1, 3}) == NO_LEADER
    assert elect_leader((2,), (2,), {1, 2, 3}) == 2
