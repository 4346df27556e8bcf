"""Keys and values of __consumer_offsets, and the group -> partition mapping."""

import struct

import pytest

from broker.coordinator.group import codec
from broker.coordinator.group.group_metadata import OffsetAndMetadata
from broker.coordinator.group.offsets_log import build_batch, iter_batch_records
from broker.protocol.records import validate_batches


def kstr(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_offset_key_layout_is_kafkas():
    key = codec.encode_offset_key(codec.OffsetKey("grp", "topic", 7))
    assert key == struct.pack(">h", 1) + kstr("grp") + kstr("topic") + struct.pack(">i", 7)
    assert codec.decode_key(key) == codec.OffsetKey("grp", "topic", 7)
    # version 0 keys have the same layout
    assert codec.decode_key(struct.pack(">h", 0) + key[2:]) == codec.OffsetKey("grp", "topic", 7)


def test_group_key_layout_is_kafkas():
    key = codec.encode_group_key(codec.GroupKey("grp"))
    assert key == struct.pack(">h", 2) + kstr("grp")
    assert codec.decode_key(key) == codec.GroupKey("grp")


def test_unknown_key_version_is_an_error():
    with pytest.raises(codec.CodecError):
        codec.decode_key(struct.pack(">h", 9) + kstr("g"))
    with pytest.raises(codec.CodecError):
        codec.decode_key(struct.pack(">h", 1) + b"\x00")


def test_offset_value_v3_round_trip_and_layout():
    v = OffsetAndMetadata(offset=42, leader_epoch=3, metadata="meta", commit_timestamp_ms=1700000000000)
    data = codec.encode_offset_value(v)
    assert data == struct.pack(">hqi", 3, 42, 3) + kstr("meta") + struct.pack(">q", 1700000000000)
    assert codec.decode_offset_value(data) == v


def test_offset_value_older_versions():
    v1 = struct.pack(">hq", 1, 5) + kstr("m") + struct.pack(">qq", 100, 200)
    assert codec.decode_offset_value(v1) == OffsetAndMetadata(5, -1, "m", 100)
    v0 = struct.pack(">hq", 0, 6) + struct.pack(">h", -1) + struct.pack(">q", 300)
    assert codec.decode_offset_value(v0) == OffsetAndMetadata(6, -1, "", 300)


def stored_group(members=()):
    return codec.StoredGroup("consumer", 4, "range", "m1", 1700000000000, tuple(members))


def test_group_value_v3_round_trip():
    members = (
        codec.StoredMember("m1", "instance-1", "client", "/10.0.0.1", 60000, 10000, b"\x00sub", b"\x00assign"),
        codec.StoredMember("m2", None, "client2", "/10.0.0.2", 30000, 45000, b"", b""),
    )
    g = stored_group(members)
    assert codec.decode_group_value(codec.encode_group_value(g)) == g
    empty = codec.StoredGroup("consumer", 5, None, None, 0, ())
    assert codec.decode_group_value(codec.encode_group_value(empty)) == empty


def test_group_value_v3_layout_prefix():
    data = codec.encode_group_value(stored_group())
    expected = (struct.pack(">h", 3) + kstr("consumer") + struct.pack(">i", 4) + kstr("range") + kstr("m1")
                + struct.pack(">q", 1700000000000) + struct.pack(">i", 0))
    assert data == expected


def test_group_value_v0_and_v1():
    member_v0 = kstr("m") + kstr("c") + kstr("/h") + struct.pack(">i", 9000) + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"a"
    v0 = struct.pack(">h", 0) + kstr("consumer") + struct.pack(">i", 2) + kstr("range") + kstr("m") + struct.pack(">i", 1) + member_v0
    g = codec.decode_group_value(v0)
    assert g.members[0] == codec.StoredMember("m", None, "c", "/h", 9000, 9000, b"s", b"a")
    member_v1 = kstr("m") + kstr("c") + kstr("/h") + struct.pack(">ii", 70000, 9000) + struct.pack(">i", 0) + struct.pack(">i", -1)
    v1 = struct.pack(">h", 1) + kstr("consumer") + struct.pack(">i", 2) + kstr("range") + kstr("m") + struct.pack(">i", 1) + member_v1
    g = codec.decode_group_value(v1)
    assert g.members[0] == codec.StoredMember("m", None, "c", "/h", 70000, 9000, b"", b"")
    assert g.current_state_timestamp_ms == -1


@pytest.mark.parametrize("s,expected", [
    ("", 0), ("a", 97), ("hello", 99162322), ("console-consumer-12345", None),
    ("polygenelubricants", -(2**31)),  # famous Integer.MIN_VALUE hash
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # UTF-16 surrogate pair
])
def test_java_string_hashcode(s, expected):
    h = codec.java_string_hashcode(s)
    assert -(2**31) <= h < 2**31
    if expected is not None:
        assert h == expected


def test_partition_for_matches_kafka_abs():
    assert codec.partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    h = codec.java_string_hashcode("my-group")
    assert codec.partition_for("my-group", 50) == abs(h) % 50
    assert all(0 <= codec.partition_for(f"g{i}", 7) < 7 for i in range(100))


def test_batches_round_trip_with_tombstones():
    entries = [(codec.encode_group_key(codec.GroupKey("g")), None),
               (codec.encode_offset_key(codec.OffsetKey("g", "t", 0)), codec.encode_offset_value(OffsetAndMetadata(1)))]
    payload = build_batch(entries) + build_batch(entries[:1])
    headers = validate_batches(payload, 1 << 20)
    assert [h.records_count for h in headers] == [2, 1]
    assert all(h.producer_id == -1 for h in headers)
    assert list(iter_batch_records(payload)) == entries + entries[:1]
