import struct

import pytest

from broker.protocol import codec

SUPPORTED = {18: (0, 4), 3: (0, 12)}


def header(api_key, version, corr, client=b"cli", tagged=b""):
    return struct.pack(">hhih", api_key, version, corr, len(client)) + client + tagged


def test_non_flexible_header():
    h = codec.parse_header(header(3, 4, 7), SUPPORTED)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 4, 7, "cli")
    assert h.size == 8 + 2 + 3


def test_flexible_header_skips_tagged_fields():
    tagged = bytes([1, 5, 2, 0xAA, 0xBB])  # one tagged field: tag 5, two bytes
    h = codec.parse_header(header(3, 12, 1, tagged=tagged), SUPPORTED)
    assert h.size == 8 + 2 + 3 + len(tagged)


def test_unsupported_version_and_unknown_key():
    with pytest.raises(codec.UnsupportedVersion):
        codec.parse_header(header(3, 13, 1), SUPPORTED)
    with pytest.raises(codec.UnsupportedVersion):
        codec.parse_header(header(999, 0, 1), SUPPORTED)


def test_truncated_frames_are_malformed():
    with pytest.raises(codec.MalformedRequest):
        codec.parse_header(b"\x00\x03", SUPPORTED)
    with pytest.raises(codec.MalformedRequest):
        codec.parse_header(struct.pack(">hhih", 3, 4, 1, 50) + b"short", SUPPORTED)
    h = codec.parse_header(header(3, 12, 1, tagged=b"\x00"), SUPPORTED)
    with pytest.raises(codec.MalformedRequest):
        codec.parse_body(header(3, 12, 1, tagged=b"\x00") + b"\x05", h)


def test_api_versions_response_header_is_always_v0():
    h = codec.RequestHeader(18, 3, 42, None, 0)
    assert codec.response_header_bytes(h) == struct.pack(">i", 42)
    h = codec.RequestHeader(3, 12, 42, None, 0)
    assert codec.response_header_bytes(h) == struct.pack(">i", 42) + b"\x00"


def test_build_drops_fields_a_version_lacks():
    v0 = codec.response_module(3, 0)
    b = codec.build(v0.MetadataResponseBroker, node_id=1, host="h", port=9, rack="r")
    assert not hasattr(b, "rack")
