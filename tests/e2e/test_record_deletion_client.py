"""The operator's RecordDeletion run (record_admin.run: confluent-kafka's AdminClient resolving the
policy, then DeleteRecords) against one broker, without Kubernetes. Passes against Apache Kafka 4.1
too (`make interop-apache`): the same ListOffsets, DescribeGroups, OffsetFetch and DeleteRecords
answers lead to the same deletions and the same refusals.
"""

from __future__ import annotations

import time

import pytest
from kio.schema.errors import ErrorCode

from flotilla_operator.clients import record_admin
from flotilla_operator.api.record_deletion import RecordDeletionSpec
from flotilla.testenv import kafka_wire

pytestmark = pytest.mark.timeout(180)

T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def make_topic(bootstrap: str, prefix: str, partitions: int = 2) -> str:
    topic = kafka_wire.unique_topic(prefix)
    with kafka_wire.connect(bootstrap) as conn:
        assert conn.create_topic(topic, partitions) == ErrorCode.none
    return topic


def produce(bootstrap: str, topic: str, partition: int, count: int, first_ts_ms: int | None = None) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(count):
        kw = {} if first_ts_ms is None else {"timestamp": first_ts_ms + 1000 * i}
        p.produce(topic, value=f"r{i}".encode(), partition=partition, **kw)
    assert p.flush(30) == 0


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def earliest(bootstrap: str, topic: str, partition: int) -> int:
    with kafka_wire.connect(bootstrap) as conn:
        return conn.list_offsets(topic, partition, -2)


def run(bootstrap: str, topic: str, before: dict, **spec) -> record_admin.RunResult:
    return record_admin.run(bootstrap, RecordDeletionSpec.model_validate(
        {"clusterRef": {"name": "c"}, "topic": topic, "before": before, **spec}))


def test_policies_delete_what_they_name_and_never_move_back(shared_broker):
    b = shared_broker.bootstrap
    topic = make_topic(b, "rdrun")
    produce(b, topic, 0, 20)
    produce(b, topic, 1, 20)
    got = run(b, topic, {"offset": 8}, keep={"records": 3})
    assert got.error is None and got.deleted == 10
    assert (earliest(b, topic, 0), earliest(b, topic, 1)) == (5, 5)
    # A lower offset moves nothing back and asks for nothing; the same one again deletes nothing more.
    again = run(b, topic, {"offset": 2})
    assert again.error is None and again.deleted == 0
    assert [r["lowWatermark"] for r in again.rows] == [5, 5]
    # Past the high watermark: everything that exists, no OFFSET_OUT_OF_RANGE.
    assert run(b, topic, {"offset": 1000}, partitions=[1]).deleted == 15
    assert (earliest(b, topic, 0), earliest(b, topic, 1)) == (5, 20)


def test_timestamp_and_keep_duration(shared_broker):
    b = shared_broker.bootstrap
    topic = make_topic(b, "rdtime", partitions=1)
    produce(b, topic, 0, 6, first_ts_ms=T0_MS)  # old: 2026-01-01, one second apart
    produce(b, topic, 0, 4)  # new: now
    assert run(b, topic, {"timestamp": "2026-01-01T00:00:03Z"}).deleted == 3
    assert earliest(b, topic, 0) == 3
    # Everything committed, but the last hour is kept: only the old records go.
    commit(b, "rd-keep", topic, {0: 10})
    got = run(b, topic, {"consumedBy": ["rd-keep"]}, keep={"duration": "1h"})
    assert got.error is None and got.deleted == 3 and earliest(b, topic, 0) == 6


def test_consumed_by_never_reads_an_unknown_or_silent_group_as_everything(shared_broker):
    b = shared_broker.bootstrap
    topic = make_topic(b, "rdgrp")
    produce(b, topic, 0, 10)
    produce(b, topic, 1, 10)
    commit(b, "rd-a", topic, {0: 7})
    commit(b, "rd-b", topic, {0: 4, 1: 9})
    missing = run(b, topic, {"consumedBy": ["rd-a", f"rd-ghost-{time.time_ns()}"]})
    assert missing.error.reason == "GroupNotFound" and "rd-ghost" in missing.error.message
    assert (earliest(b, topic, 0), earliest(b, topic, 1)) == (0, 0)
    got = run(b, topic, {"consumedBy": ["rd-a", "rd-b"]})
    assert got.error is None and (earliest(b, topic, 0), earliest(b, topic, 1)) == (4, 0)
    assert "rd-a" in got.rows[1]["error"]


def test_unknown_topic_and_partition_are_named(shared_broker):
    b = shared_broker.bootstrap
    topic = make_topic(b, "rdbad")
    nope = run(b, f"rd-absent-{time.time_ns()}", {"offset": 1})
    assert nope.error.reason == "TopicNotFound" and "spec.topic" in nope.error.message
    part = run(b, topic, {"offset": 1}, partitions=[1, 4])
    assert part.error.reason == "PartitionNotFound" and "spec.partitions" in part.error.message
