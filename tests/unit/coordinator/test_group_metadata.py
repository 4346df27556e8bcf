"""The group state machine: transitions, protocol selection, leader choice, static members."""

import pytest

from broker.coordinator.group.group_metadata import (
    GroupMetadata,
    GroupState,
    IllegalStateTransition,
    MemberMetadata,
)

WAITING = object()  # stands in for a pending JoinGroup


def member(mid: str, protocols=(("range", b"r"), ("roundrobin", b"rr")), instance: str | None = None,
           waiting: bool = True) -> MemberMetadata:
    return MemberMetadata(mid, instance, "client", "/127.0.0.1", 30000, 10000, "consumer", list(protocols),
                          join_waiter=WAITING if waiting else None)


def test_legal_and_illegal_transitions():
    g = GroupMetadata("g")
    assert g.is_(GroupState.EMPTY)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(GroupState.STABLE)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(GroupState.COMPLETING_REBALANCE)
    g.transition_to(GroupState.PREPARING_REBALANCE)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(GroupState.STABLE)
    g.transition_to(GroupState.COMPLETING_REBALANCE)
    assert g.can_rebalance()  # CompletingRebalance can rebalance
    g.transition_to(GroupState.STABLE)
    g.transition_to(GroupState.PREPARING_REBALANCE)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(GroupState.PREPARING_REBALANCE)
    g.transition_to(GroupState.DEAD)
    assert not g.can_rebalance()


def test_first_member_is_leader_and_sets_protocol_type():
    g = GroupMetadata("g")
    g.add(member("a"))
    g.add(member("b"))
    assert g.leader_id == "a"
    assert g.protocol_type == "consumer"


def test_leader_moves_to_next_member_when_removed():
    g = GroupMetadata("g")
    for m in "abc":
        g.add(member(m))
    g.remove("a")
    assert g.leader_id == "b"
    g.remove("b")
    g.remove("c")
    assert g.leader_id is None


def test_supports_protocols_needs_common_protocol_and_same_type():
    g = GroupMetadata("g")
    assert not g.supports_protocols("", ["range"])
    assert not g.supports_protocols("consumer", [])
    assert g.supports_protocols("consumer", ["range"])
    g.add(member("a", protocols=[("range", b"")]))
    assert g.supports_protocols("consumer", ["range", "sticky"])
    assert not g.supports_protocols("consumer", ["sticky"])
    assert not g.supports_protocols("connect", ["range"])


def test_select_protocol_by_votes_among_common_protocols():
    g = GroupMetadata("g")
    g.add(member("a", protocols=[("roundrobin", b""), ("range", b"")]))
    g.add(member("b", protocols=[("range", b""), ("roundrobin", b"")]))
    g.add(member("c", protocols=[("range", b""), ("sticky", b""), ("roundrobin", b"")]))
    assert g.candidate_protocols() == {"range", "roundrobin"}
    assert g.select_protocol() == "range"  # 2 votes against 1


def test_select_protocol_tie_goes_to_earliest_members_choice():
    g = GroupMetadata("g")
    g.add(member("a", protocols=[("roundrobin", b""), ("range", b"")]))
    g.add(member("b", protocols=[("range", b""), ("roundrobin", b"")]))
    assert g.select_protocol() == "roundrobin"


def test_all_members_joined_counts_pending_members():
    g = GroupMetadata("g")
    g.add(member("a"))
    g.add(member("b", waiting=False))
    assert not g.has_all_members_joined()
    assert [m.member_id for m in g.not_yet_rejoined()] == ["b"]
    g.get("b").join_waiter = WAITING
    assert g.has_all_members_joined()
    g.add_pending_member("c")
    assert not g.has_all_members_joined()
    g.add(member("c"))  # rejoining with its id takes it out of the pending set
    assert g.has_all_members_joined()


def test_init_next_generation_selects_protocol_or_goes_empty():
    g = GroupMetadata("g")
    g.add(member("a"))
    g.transition_to(GroupState.PREPARING_REBALANCE)
    g.pending_sync.add("stale")
    g.init_next_generation()
    assert (g.generation_id, g.state, g.protocol_name) == (1, GroupState.COMPLETING_REBALANCE, "range")
    assert not g.pending_sync
    g.transition_to(GroupState.PREPARING_REBALANCE)
    g.remove("a")
    g.init_next_generation()
    assert (g.generation_id, g.state, g.protocol_name, g.leader_id) == (2, GroupState.EMPTY, None, None)


def test_leader_that_did_not_rejoin_is_replaced_by_one_that_did():
    g = GroupMetadata("g")
    g.add(member("a", waiting=False))
    g.add(member("b"))
    assert g.maybe_elect_new_joined_leader()
    assert g.leader_id == "b"
    g.get("b").join_waiter = None
    assert not g.maybe_elect_new_joined_leader()


def test_leader_gets_metadata_of_selected_protocol():
    g = GroupMetadata("g")
    g.add(member("a", protocols=[("range", b"A-range"), ("roundrobin", b"A-rr")]))
    g.add(member("b", protocols=[("roundrobin", b"B-rr"), ("range", b"B-range")], instance="i-b"))
    g.protocol_name = "range"
    joined = g.current_member_metadata()
    assert [(j.member_id, j.group_instance_id, j.metadata) for j in joined] == [
        ("a", None, b"A-range"), ("b", "i-b", b"B-range")]


def test_static_member_replacement_keeps_place_leadership_and_pending_sync():
    g = GroupMetadata("g")
    g.add(member("old", instance="inst"))
    g.add(member("other"))
    g.pending_sync.add("old")
    assert g.static_member_id("inst") == "old"
    assert g.is_static_member_fenced("new", "inst")
    assert not g.is_static_member_fenced("old", "inst")
    assert not g.is_static_member_fenced("x", "unknown-instance")
    m = g.replace_static_member("inst", "old", "new")
    assert m.member_id == "new" and g.has("new") and not g.has("old")
    assert g.leader_id == "new"
    assert g.static_member_id("inst") == "new"
    assert g.pending_sync == {"new"}
    assert g.is_static_member_fenced("old", "inst")


def test_removing_static_member_forgets_instance():
    g = GroupMetadata("g")
    g.add(member("m", instance="inst"))
    g.remove("m")
    assert g.static_member_id("inst") is None


def test_expired_heartbeat_exemptions():
    m = member("a", waiting=True)
    m.is_new = True
    assert m.expired_heartbeat_matters()  # new members expire even while joining
    m.is_new = False
    assert not m.expired_heartbeat_matters()  # parked in JoinGroup
    m.join_waiter = None
    assert m.expired_heartbeat_matters()
    m.sync_waiter = WAITING
    assert not m.expired_heartbeat_matters()


def test_member_matches_and_vote():
    m = member("a", protocols=[("range", b"x"), ("roundrobin", b"y")])
    assert m.matches([("range", b"x"), ("roundrobin", b"y")])
    assert not m.matches([("range", b"changed"), ("roundrobin", b"y")])
    assert m.vote({"roundrobin"}) == "roundrobin"
    with pytest.raises(ValueError):
        m.vote({"sticky"})
