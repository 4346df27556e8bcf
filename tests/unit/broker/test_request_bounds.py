"""request_bounds: every length is checked against the frame, and nulls against the schema,
before kio's reader (which pre-allocates counts read from the wire) runs."""

import random
import struct

import pytest

from broker.protocol import codec, request_bounds
from broker.apis.handlers import all_handlers
from tests.support.wire_fuzz import BodyGenerator, sample_records

# From issue 8, without their 4-byte size prefix: kio's reader aborted the process on both.
PRODUCE_V11_96GB = bytes.fromhex("0000000b0000058b0002667a0000ffff02010002c2ffffff2c40ff0101ff00ffff00010200")
METADATA_V9_3E10 = bytes.fromhex("0003000900000001ffff00ffffffff6f")

SUPPORTED = {0: (3, 11), 3: (0, 12)}


def served_versions():
    for h in all_handlers():
        lo, hi = codec.kio_versions(h.api_key)
        for v in range(max(lo, h.min_version), min(hi, h.max_version) + 1):
            yield h.api_key, v


@pytest.mark.parametrize("frame,field", [(PRODUCE_V11_96GB, "ProduceRequest.topic_data"),
                                         (METADATA_V9_3E10, "MetadataRequest.topics")])
def test_issue_frames_are_refused_before_kio_reads_them(frame, field):
    header = codec.parse_header(frame, SUPPORTED)
    with pytest.raises(codec.MalformedRequest, match=rf"{field} claims \d+ elements but \d+ bytes remain"):
        codec.parse_body(frame, header)


def test_every_served_request_generated_well_formed_passes_and_parses():
    """The check must not refuse what kio (and Kafka) read: random valid bodies of every version."""
    rng = random.Random(8)
    gen = BodyGenerator(rng, ("t", "g"), sample_records(3, rng))
    count = 0
    for api_key, version in served_versions():
        cls = codec.request_type(api_key, version)
        for _ in range(40):
            body = gen.body(cls)
            request_bounds.check(cls, body, 0)
            parsed, size = codec._reader(api_key, version)(body, 0)
            assert size == len(body)
            count += 1
    assert count > 3000


def _legacy_null_array_body(api_key: int, version: int) -> bytes:
    """A body whose first field, a non-nullable array, is null (-1)."""
    return struct.pack(">i", -1) + b"\x00" * 32


@pytest.mark.parametrize("api_key,version,field", [
    (15, 0, "DescribeGroupsRequest.groups"),
    (20, 1, "DeleteTopicsRequest.topic_names"),
    (2, 1, None),  # ListOffsets: replica_id first, then topics
    (8, 2, None),  # OffsetCommit: group, generation, member, retention, then topics
])
def test_null_where_kafka_has_no_null_is_invalid(api_key, version, field):
    cls = codec.request_type(api_key, version)
    if field is not None:
        body = _legacy_null_array_body(api_key, version)
    elif api_key == 2:
        body = struct.pack(">i", -1) + struct.pack(">i", -1)
        field = "ListOffsetsRequest.topics"
    else:
        body = (struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"m"
                + struct.pack(">q", -1) + struct.pack(">i", -1))
        field = "OffsetCommitRequest.topics"
    with pytest.raises(request_bounds.InvalidRequest, match=f"non-nullable field {field} was serialized as null"):
        request_bounds.check(cls, body, 0)


def test_flexible_null_array_and_find_coordinator_keys():
    cls = codec.request_type(10, 4)  # key_type int8, coordinator_keys compact array of strings
    with pytest.raises(request_bounds.InvalidRequest, match="coordinator_keys was serialized as null"):
        request_bounds.check(cls, b"\x01\x00\x00", 0)
    request_bounds.check(cls, b"\x01\x02\x02a\x00", 0)


def test_nullable_array_may_be_null():
    cls = codec.request_type(3, 9)  # Metadata v9: topics is nullable (all topics)
    request_bounds.check(cls, b"\x00\x01\x00\x00\x00", 0)


def test_negative_and_oversized_lengths():
    cls = codec.request_type(15, 0)
    with pytest.raises(request_bounds.InvalidRequest, match="negative length"):
        request_bounds.check(cls, struct.pack(">i", -7), 0)
    with pytest.raises(request_bounds.InvalidRequest, match="claims 2 elements"):
        request_bounds.check(cls, struct.pack(">i", 2) + b"\x00", 0)
    with pytest.raises(request_bounds.InvalidRequest, match="claims 5 bytes"):
        request_bounds.check(cls, struct.pack(">ih", 1, 5) + b"abc", 0)


def test_string_longer_than_kafka_allows():
    cls = codec.request_type(10, 4)
    long = b"x" * 0x8000
    body = b"\x01\x02" + bytes([0x81, 0x80, 0x02]) + long + b"\x00"  # compact length 0x8001 = 0x8000 + 1
    with pytest.raises(request_bounds.InvalidRequest, match=f"claims {0x8000} bytes"):
        request_bounds.check(cls, body, 0)


def test_tagged_field_must_fill_its_size():
    cls = codec.request_type(1, 12)  # Fetch v12: tagged ClusterId (tag 0) on the request
    gen = BodyGenerator(random.Random(1), ("t",), ())
    body = bytearray(gen.body(cls))
    assert body[-1] == 0  # no tagged fields at the top level
    good = body[:-1] + bytes([1, 0, 2, 2]) + b"a"  # one tagged field: tag 0, size 2, compact string "a"
    request_bounds.check(cls, bytes(good), 0)
    bad = body[:-1] + bytes([1, 0, 3, 2]) + b"a" + b"z"  # the string takes 2 of the 3 bytes announced
    with pytest.raises(request_bounds.InvalidRequest, match="does not fill"):
        request_bounds.check(cls, bytes(bad), 0)



def test_unknown_tagged_fields_are_cut_out_as_kafka_ignores_them():
    """kio's reader refuses a tag it does not know; Kafka ignores it. The check hands kio a copy
    of the frame without it (and with the tag count lowered)."""
    cls = codec.request_type(1, 12)
    body = BodyGenerator(random.Random(1), ("t",), ()).body(cls)[:-1]
    known = bytes([0, 2, 2]) + b"a"  # tag 0 (cluster id), size 2, compact string "a"
    frame = body + bytes([2]) + bytes([9, 3]) + b"xyz" + known  # two tagged fields, the first unknown (tag 9)
    cleaned = request_bounds.check(cls, frame, 0)
    assert cleaned == body + bytes([1]) + known
    parsed, size = codec._reader(1, 12)(cleaned, 0)
    assert size == len(cleaned) and parsed.cluster_id == "a"
    assert request_bounds.check(cls, body + b"\x00", 0) == body + b"\x00"  # nothing to cut: the frame itself
