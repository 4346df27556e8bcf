"""The hand-written Fetch encoder must write exactly what kio writes for the same response."""

import datetime
import io
import os
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.log.segment import FileRegion, SegmentFile
from broker.protocol import codec, fetch_response
from broker.protocol.fetch_response import PartitionResult, TopicResult
from tests.unit.broker.batches import make_batch


def kio_bytes(version, correlation_id, topics, session_id):
    m = codec.response_module(1, version)
    parts_cls = m.PartitionData
    def part(p):
        rec = b"" if p.records is None else p.records  # no records are sent as empty, never null (as Kafka)
        if isinstance(rec, FileRegion):
            rec = os.pread(rec.fd, rec.length, rec.position)
        aborted = None if p.aborted_transactions is None else tuple(
            m.AbortedTransaction(producer_id=a, first_offset=b) for a, b in p.aborted_transactions)
        return codec.build(parts_cls, partition_index=p.partition_index, error_code=ErrorCode(p.error_code),
                           high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                           log_start_offset=p.log_start_offset, aborted_transactions=aborted,
                           preferred_read_replica=p.preferred_read_replica, records=rec)
    resp = codec.build(m.FetchResponse, throttle_time=datetime.timedelta(milliseconds=7), error_code=ErrorCode.none,
                       session_id=session_id, responses=tuple(
                           codec.build(m.FetchableTopicResponse, topic=t.name, topic_id=t.topic_id,
                                       partitions=tuple(part(p) for p in t.partitions)) for t in topics))
    body = codec.encode_body(1, version, resp)
    header = codec.RequestHeader(1, version, correlation_id, None, 0)
    return codec.frame_response(header, body)


@pytest.mark.parametrize("version", range(fetch_response.MIN_VERSION, fetch_response.MAX_VERSION + 1))
def test_matches_kio_byte_for_byte(version, tmp_path):
    seg = tmp_path / "seg.log"
    data = make_batch([b"one", b"two"]) + make_batch([b"three"])
    seg.write_bytes(b"junk" + data)
    file = SegmentFile(os.open(seg, os.O_RDONLY))  # closed when the last reference goes
    topics = [
        TopicResult("orders", uuid.UUID(int=42), [
            PartitionResult(0, 0, 10, 10, 0, None, -1, FileRegion(file, 4, len(data))),
            PartitionResult(1, 1, -1, -1, -1, None, -1, None),
            PartitionResult(2, 0, 5, 5, 1, [(3, 4), (5, 6)], -1, b""),
            PartitionResult(3, 0, 7, 7, 2, None, -1, b""),  # the idle partition: one pack
            PartitionResult(4, 0, 8, 8, 0, None, -1, None),
            PartitionResult(5, 0, 9, 9, 0, None, 2, b""),  # a preferred replica: the general path
        ]),
        TopicResult("empty", uuid.UUID(int=43), []),
    ]
    chunks = fetch_response.encode_fetch_response(version, 99, 7, 0, 0, topics)
    ours = b"".join(c if isinstance(c, bytes) else os.pread(c.fd, c.length, c.position) for c in chunks)
    assert any(isinstance(c, FileRegion) for c in chunks), "records must stay in the file"
    assert ours == kio_bytes(version, 99, topics, 0)


@pytest.mark.parametrize("version", range(fetch_response.FIRST_FLEXIBLE, fetch_response.MAX_VERSION + 1))
def test_kip951_current_leader_and_node_endpoints_match_kio(version):
    """A partition led elsewhere carries CurrentLeader (tag 1) and, from v16, the response
    carries NodeEndpoints (tag 0): the same bytes kio writes for those tagged fields."""
    m = codec.response_module(1, version)
    topics = [TopicResult("orders", uuid.UUID(int=42), [
        PartitionResult(0, int(ErrorCode.not_leader_or_follower), -1, -1, -1, None, -1, b"", current_leader=(3, 7)),
        PartitionResult(1, 0, 5, 5, 0, None, -1, b""),
    ])]
    nodes = [fetch_response.NodeEndpoint(3, "127.0.0.3", 9094, None), fetch_response.NodeEndpoint(4, "h", 1, "rack-a")]
    chunks = fetch_response.encode_fetch_response(version, 5, 0, 0, 0, topics, node_endpoints=nodes)
    ours = b"".join(chunks)

    def part(p):
        extra = {}
        if p.current_leader is not None:
            extra["current_leader"] = m.LeaderIdAndEpoch(leader_id=p.current_leader[0], leader_epoch=p.current_leader[1])
        return codec.build(m.PartitionData, partition_index=p.partition_index, error_code=ErrorCode(p.error_code),
                           high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                           log_start_offset=p.log_start_offset, aborted_transactions=None,
                           preferred_read_replica=-1, records=p.records, **extra)
    extra = {}
    if hasattr(m, "NodeEndpoint"):
        extra["node_endpoints"] = tuple(m.NodeEndpoint(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
                                        for n in nodes)
    resp = codec.build(m.FetchResponse, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
                       responses=tuple(codec.build(m.FetchableTopicResponse, topic=t.name, topic_id=t.topic_id,
                                                   partitions=tuple(part(p) for p in t.partitions)) for t in topics),
                       **extra)
    expected = codec.frame_response(codec.RequestHeader(1, version, 5, None, 0), codec.encode_body(1, version, resp))
    assert ours == expected
    assert (b"127.0.0.3" in ours) == (version >= 16)


@pytest.mark.parametrize("version", range(fetch_response.MIN_VERSION, fetch_response.MAX_VERSION + 1))
def test_quota_size_is_kafkas_fetch_response_size_of(version):
    """A leader's replication quota counts Kafka's FetchResponse.sizeOf: 4 plus the response body
    (no response header) holding only the throttled partitions; an empty one still counts."""
    m = codec.response_module(1, version)
    data = make_batch([b"one", b"two"])

    def kafka_size(topics):
        parts = lambda t: tuple(codec.build(  # noqa: E731
            m.PartitionData, partition_index=p.partition_index, error_code=ErrorCode(p.error_code),
            high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
            aborted_transactions=None, preferred_read_replica=-1, records=p.records) for p in t.partitions)
        resp = codec.build(m.FetchResponse, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
                           responses=tuple(codec.build(m.FetchableTopicResponse, topic=t.name, topic_id=t.topic_id,
                                                       partitions=parts(t)) for t in topics))
        return 4 + len(codec.encode_body(1, version, resp))

    topics = [TopicResult("orders", uuid.UUID(int=42), [PartitionResult(0, 0, 10, 10, 0, None, -1, data),
                                                        PartitionResult(1, 0, 3, 3, 0, None, -1, b"")])]
    assert fetch_response.quota_size(version, topics) == kafka_size(topics)
    assert fetch_response.quota_size(version, []) == kafka_size([]) > 4



@pytest.mark.parametrize("version", range(fetch_response.MIN_VERSION, fetch_response.MAX_VERSION + 1))
def test_a_partition_without_records_is_sent_with_empty_records_never_null(version):
    """Kafka answers an error or an idle partition with MemoryRecords.EMPTY; librdkafka reads a
    null record set (MessageSetSize -1) as a protocol error and stops fetching the partition (seen
    after the operator moved leaders: a consumer group stalled on NOT_LEADER_OR_FOLLOWER answers)."""
    error = ErrorCode.not_leader_or_follower.value
    topics = [TopicResult("t", uuid.UUID(int=7), [
        PartitionResult(0, error, -1, -1, -1, None, -1, None),   # the one-pack path
        PartitionResult(1, error, -1, -1, -1, [], -1, None),     # the general path
    ])]
    ours = b"".join(fetch_response.encode_fetch_response(version, 5, 7, 0, 0, topics))
    empty = [TopicResult("t", uuid.UUID(int=7), [
        PartitionResult(0, error, -1, -1, -1, None, -1, b""), PartitionResult(1, error, -1, -1, -1, [], -1, b"")])]
    assert ours == kio_bytes(version, 5, empty, 0)
