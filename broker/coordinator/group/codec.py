"""Keys and values of `__consumer_offsets` records, in Apache Kafka's layout.

Every key and value starts with an int16 schema version. Strings are int16-length UTF-8
(-1 = null), byte arrays int32-length. Layouts (as Kafka's GroupMetadataManager writes them):

  offset commit key, versions 0 and 1:  group string, topic string, partition int32
  group metadata key, version 2:        group string

  offset commit value
    v0: offset int64, metadata string, commit_timestamp int64
    v1: offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
    v2: offset int64, metadata string, commit_timestamp int64
    v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64   <- written

  group metadata value
    v0: protocol_type string, generation int32, protocol string?, leader string?,
        members [member_id, client_id, client_host, session_timeout int32,
                 subscription bytes, assignment bytes]
    v1: as v0, members gain rebalance_timeout int32 after client_host
    v2: as v1, plus current_state_timestamp int64 after leader
    v3: as v2, members gain group_instance_id string? after member_id           <- written

A tombstone (null value) deletes the key. Flexible versions (offset v4, group v4, which newer
Kafka writes only with KIP-848 features) are not read; a Kafka data directory is not something
this broker loads anyway.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.coordinator.group.group_metadata import OffsetAndMetadata

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class CodecError(ValueError):
    """A key or value of `__consumer_offsets` is not in a layout this broker reads."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class StoredGroup:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int
    members: tuple[StoredMember, ...]


# -- writing -------------------------------------------------------------------------------

class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> "_Writer":
        self.parts.append(_I16.pack(v))
        return self

    def i32(self, v: int) -> "_Writer":
        self.parts.append(_I32.pack(v))
        return self

    def i64(self, v: int) -> "_Writer":
        self.parts.append(_I64.pack(v))
        return self

    def string(self, v: str | None) -> "_Writer":
        if v is None:
            return self.i16(-1)
        data = v.encode()
        if len(data) > 0x7FFF:
            raise CodecError(f"string of {len(data)} bytes is too long")
        self.i16(len(data))
        self.parts.append(data)
        return self

    def bytes_(self, v: bytes | None) -> "_Writer":
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.parts.append(bytes(v))
        return self

    def done(self) -> bytes:
        return b"".join(self.parts)


def encode_offset_key(key: OffsetKey) -> bytes:
    return _Writer().i16(OFFSET_KEY_VERSION).string(key.group).string(key.topic).i32(key.partition).done()


def encode_group_key(key: GroupKey) -> bytes:
    return _Writer().i16(GROUP_KEY_VERSION).string(key.group).done()


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    return encode_offset_key(key) if isinstance(key, OffsetKey) else encode_group_key(key)


def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    return (_Writer().i16(OFFSET_VALUE_VERSION).i64(value.offset).i32(value.leader_epoch)
            .string(value.metadata).i64(value.commit_timestamp_ms).done())


def encode_group_value(value: StoredGroup) -> bytes:
    w = (_Writer().i16(GROUP_VALUE_VERSION).string(value.protocol_type).i32(value.generation_id)
         .string(value.protocol_name).string(value.leader_id).i64(value.current_state_timestamp_ms))
    w.i32(len(value.members))
    for m in value.members:
        (w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
         .i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment))
    return w.done()


# -- reading -------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise CodecError("truncated")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        try:
            return bytes(self._take(n)).decode()
        except UnicodeDecodeError:
            raise CodecError("string is not UTF-8") from None

    def req_string(self) -> str:
        s = self.string()
        if s is None:
            raise CodecError("null where a string is required")
        return s

    def bytes_(self) -> bytes:
        n = self.i32()
        if n == -1:
            return b""
        return bytes(self._take(n))


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.req_string(), r.req_string(), r.i32())
    if version == 2:
        return GroupKey(r.req_string())
    raise CodecError(f"unknown key version {version}")


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 2):
        offset, metadata, ts = r.i64(), r.string(), r.i64()
        return OffsetAndMetadata(offset, -1, metadata or "", ts)
    if version == 1:
        offset, metadata, ts, _expire = r.i64(), r.string(), r.i64(), r.i64()
        return OffsetAndMetadata(offset, -1, metadata or "", ts)
    if version == 3:
        offset, epoch, metadata, ts = r.i64(), r.i32(), r.string(), r.i64()
        return OffsetAndMetadata(offset, epoch, metadata or "", ts)
    raise CodecError(f"unknown offset value version {version}")


def decode_group_value(data: bytes) -> StoredGroup:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise CodecError(f"unknown group metadata value version {version}")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.req_string()
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        session_timeout = r.i32() if version == 0 else None
        rebalance_timeout = r.i32() if version >= 1 else None
        if version >= 1:
            session_timeout = r.i32()
        assert session_timeout is not None
        subscription = r.bytes_()
        assignment = r.bytes_()
        members.append(StoredMember(member_id, instance_id, client_id, client_host,
                                    rebalance_timeout if rebalance_timeout is not None else session_timeout,
                                    session_timeout, subscription, assignment))
    return StoredGroup(protocol_type, generation, protocol, leader, state_ts, tuple(members))


# -- partitioning --------------------------------------------------------------------------

def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode(): over UTF-16 code units, wrapping at 32 bits (signed)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % offsets.topic.num.partitions (abs(MIN_VALUE) is 0)."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
