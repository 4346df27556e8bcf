"""What the group coordinator answers (JoinGroup, SyncGroup, DescribeGroups, ListGroups) and
what LeaveGroup names: plain data, read by the handlers (broker/apis/handlers/)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.coordinator.group.group_metadata import JoinedMember


@dataclass
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[JoinedMember] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupSummary:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol_data: str
    members: list[MemberSummary]


@dataclass
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str


@dataclass
class LeaveMember:
    member_id: str
    group_instance_id: str | None
