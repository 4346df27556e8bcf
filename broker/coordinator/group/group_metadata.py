"""The state of one consumer group (classic protocol): members, generation, protocol, offsets.

Pure data and state transitions, no I/O and no timers: the coordinator owns the clock and the
waiting. A member's pending JoinGroup/SyncGroup is an opaque "waiter" object the coordinator
puts on the member (an asyncio future there, anything in tests); this module only asks
whether it is set.

States and legal transitions follow Kafka's classic group coordinator:

    Empty --join--> PreparingRebalance --all joined/timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable | CompletingRebalance --join/leave/expiry--> PreparingRebalance
    PreparingRebalance --nobody left--> Empty
    any --deleted/unloaded--> Dead
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass
from typing import Any


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """One committed offset, as stored in `__consumer_offsets`."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = 0


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    # True from the first JoinGroup until that rebalance completes (Kafka's isNew): such a
    # member is expired after the new-member join timeout even while it waits in JoinGroup.
    is_new: bool = False
    join_waiter: Any = None
    sync_waiter: Any = None
    heartbeat_timer: Any = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata in the same order."""
        return list(protocols) == list(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the group's candidates."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def expired_heartbeat_matters(self) -> bool:
        """Whether a missed session deadline removes this member now (Kafka's !hasSatisfiedHeartbeat):
        members parked in JoinGroup/SyncGroup are exempt, except new members still joining."""
        if self.is_new:
            return True
        return not (self.is_awaiting_join or self.is_awaiting_sync)


@dataclass
class JoinedMember:
    """One entry of the member list the leader receives in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY, now_ms: int = 0) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}  # insertion order = join order
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        # Members told MEMBER_ID_REQUIRED that have not rejoined yet: member id -> timer (opaque).
        self.pending_members: dict[str, Any] = {}
        # Members that got their JoinGroup answer but have not sent SyncGroup yet.
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # Where in __consumer_offsets each applied offset was written: a commit acknowledged
        # after a later one (both waiting for the in-sync replicas) must not undo it.
        self.offset_written_at: dict[tuple[str, int], int] = {}
        # TxnOffsetCommits written but not yet decided, per producer id: they apply when the
        # transaction's COMMIT marker lands in this group's partition, and go at ABORT.
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        # Timers the coordinator keeps for this group (opaque here).
        self.join_timer: Any = None
        self.sync_timer: Any = None
        self.initial_delay_active = False

    # -- state -------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int = 0) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalStateTransition(
                f"group {self.group_id}: cannot go from {self.state.value} to {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members -----------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_empty(self) -> bool:
        return not self.members

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        assert member.protocol_type == self.protocol_type
        assert self.supports_protocols(member.protocol_type, member.protocol_names())
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        if instance_id is None:
            return None
        return self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A known instance id presented with another member id than the one it has now."""
        known = self.static_member_id(instance_id)
        return known is not None and known != member_id

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """Give the member behind `instance_id` a new member id (KIP-345 rejoin)."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        self.static_members[instance_id] = new_member_id
        return member

    def add_pending_member(self, member_id: str, timer: Any = None) -> None:
        self.pending_members[member_id] = timer

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    # -- protocols ---------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocol_names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(protocol_names))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins (ties: the
        protocol preferred by the earliest member)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id} has no protocol all members support")
        votes = [m.vote(candidates) for m in self.members.values()]
        counts = Counter(votes)
        best = max(counts.values())
        return next(v for v in votes if counts[v] == best)

    # -- rebalance bookkeeping ---------------------------------------------------------------
    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did. False if none did."""
        if self.leader_id is not None:
            leader = self.members.get(self.leader_id)
            if leader is not None and leader.is_awaiting_join:
                return True
        for m in self.members.values():
            if m.is_awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int = 0) -> None:
        self.generation_id += 1
        self.pending_sync.clear()
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.leader_id = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> list[JoinedMember]:
        """The member list the leader assigns over, with metadata of the selected protocol."""
        return [JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()]

    # -- offsets -----------------------------------------------------------------------------
    def has_offsets(self) -> bool:
        return bool(self.offsets)

    def __repr__(self) -> str:
        return (f"<Group {self.group_id} {self.state.value} gen={self.generation_id} "
                f"protocol={self.protocol_name} leader={self.leader_id} members={list(self.members)}>")
