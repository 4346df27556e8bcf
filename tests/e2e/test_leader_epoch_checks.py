"""KIP-320 on the consumer side (issue 18, item 7): a Fetch or ListOffsets naming a
current_leader_epoch newer than the partition's gets UNKNOWN_LEADER_EPOCH, the current one or -1
is answered. One broker, over the wire with kio; runs against Apache Kafka too
(`--kafka-target=apache`). An older epoch (FENCED_LEADER_EPOCH) needs a leader change, which one
Flotilla broker never makes: Apache Kafka bumps the leader epoch when its single broker restarts,
a single Flotilla broker keeps it (see the notes of issue 18). That case and KIP-207's
OFFSET_NOT_AVAILABLE are in test_stale_answers_fleet.py, on three brokers."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i64

from flotilla.testenv import kafka_wire

LATEST, MAX_TIMESTAMP = -1, -3


def list_offsets(conn, topic: str, timestamp: int, current_leader_epoch: int = -1) -> tuple[ErrorCode, int, int]:
    """(error, offset, timestamp) of a consumer's ListOffsets v7 for partition 0."""
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

    resp = conn.request(ListOffsetsRequest(replica_id=i32(-1), isolation_level=i8(0), topics=(ListOffsetsTopic(
        name=topic, partitions=(ListOffsetsPartition(partition_index=i32(0), timestamp=i64(timestamp),
                                                     current_leader_epoch=i32(current_leader_epoch)),)),)))
    p = resp.topics[0].partitions[0]
    return p.error_code, int(p.offset), int(p.timestamp)


def fetch(conn, topic: str, offset: int, current_leader_epoch: int = -1) -> tuple[ErrorCode, int, bool]:
    """(error, high watermark, any records?) of a consumer's sessionless Fetch v11 of partition 0."""
    from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic

    resp = conn.request(FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=0), min_bytes=i32(0), max_bytes=i32(1 << 20),
        isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1), topics=(FetchTopic(topic=topic, partitions=(
            FetchPartition(partition=i32(0), current_leader_epoch=i32(current_leader_epoch), fetch_offset=i64(offset),
                           log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
        forgotten_topics_data=(), rack_id=""))
    p = resp.responses[0].partitions[0]
    return p.error_code, int(p.high_watermark), bool(p.records)


def leader_epoch(conn, topic: str) -> int:
    [p] = conn.metadata([topic]).topics[0].partitions
    return int(p.leader_epoch)


def test_fetch_and_list_offsets_check_the_consumers_leader_epoch(broker):
    topic = kafka_wire.unique_topic("kip320")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == ErrorCode.none
        assert conn.produce(topic, 0, kafka_wire.build_batch([(None, b"a"), (None, b"b")])).error_code == 0
        first = leader_epoch(conn, topic)
        for epoch in (first, -1):
            assert fetch(conn, topic, 0, epoch) == (ErrorCode.none, 2, True)
            assert list_offsets(conn, topic, LATEST, epoch)[:2] == (ErrorCode.none, 2)
        # the consumer knows a leader epoch this broker has not reached
        assert fetch(conn, topic, 0, first + 1)[0] == ErrorCode.unknown_leader_epoch
        assert list_offsets(conn, topic, LATEST, first + 1)[0] == ErrorCode.unknown_leader_epoch
        assert list_offsets(conn, topic, MAX_TIMESTAMP, first + 1)[0] == ErrorCode.unknown_leader_epoch
