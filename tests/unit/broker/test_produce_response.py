"""The hand-written Produce encoder must write exactly what kio writes for the same response."""

import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol import codec, produce_response
from broker.protocol.produce_response import PartitionResult


def kio_bytes(version, correlation_id, topics, throttle_ms):
    m = codec.response_module(0, version)

    def part(p):
        return codec.build(m.PartitionProduceResponse, index=p.index, error_code=ErrorCode(p.error_code),
                           base_offset=p.base_offset, log_append_time=None, log_start_offset=p.log_start_offset,
                           record_errors=(), error_message=p.error_message)

    resp = codec.build(m.ProduceResponse, throttle_time=datetime.timedelta(milliseconds=throttle_ms), responses=tuple(
        codec.build(m.TopicProduceResponse, name=key, topic_id=key, partition_responses=tuple(part(p) for p in parts))
        for key, parts in topics))
    header = codec.RequestHeader(0, version, correlation_id, None, 0)
    return codec.frame_response(header, codec.encode_body(0, version, resp))


TOPICS = [
    ("orders", [PartitionResult(0, 0, 1234, 7), PartitionResult(3, 87, -1, -1, "record batch CRC32C mismatch")]),
    ("ünïcode-topic", [PartitionResult(1, 3, -1, -1, "unknown topic 'x'")]),
    ("empty", []),
]


@pytest.mark.parametrize("version", range(produce_response.MIN_VERSION, produce_response.MAX_VERSION + 1))
@pytest.mark.parametrize("topics", [TOPICS, []])
def test_matches_kio_byte_for_byte(version, topics):
    if version >= produce_response.FIRST_TOPIC_ID:  # v13 names topics by id
        topics = [(uuid.uuid5(uuid.NAMESPACE_DNS, name), parts) for name, parts in topics]
    got = produce_response.encode_produce_response(version, 99, topics, throttle_time_ms=5)
    assert got == kio_bytes(version, 99, topics, 5)


def test_refuses_versions_it_does_not_know():
    with pytest.raises(ValueError):
        produce_response.encode_produce_response(14, 1, [])
