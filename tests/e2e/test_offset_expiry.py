"""Committed offsets expire through the coordinator's own loop, as in Kafka 2.1+ (KIP-211): every
`offsets.retention.check.interval.ms` the offsets of *empty* groups older than
`offsets.retention.minutes` are removed (for a group without a protocol, one that only commits,
counted from each commit), while a group with a live member keeps its offsets however old they are.

Retention is one minute (Kafka's smallest), so this test waits that long; the check runs often.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from tests.support.clients import ConfluentFamily, keyed_records
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.broker_config({
    "offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0"})

NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: the group has no committed offset


def committed(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offset of partition 0, as OffsetFetch answers (no join)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert tp.error is None, tp.error
        return tp.offset
    finally:
        c.close()


@pytest.mark.timeout(300)
def test_expired_offsets_of_empty_groups_are_removed_and_a_live_groups_kept(broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = kafka_wire.unique_topic("expiry")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == ErrorCode.none
    ConfluentFamily().produce(broker.bootstrap, topic, keyed_records(10, keys=2), acks="all")

    # A consumer group with a live member commits first: its offset is the older one.
    live_group = f"live-{uuid.uuid4().hex[:8]}"
    live = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": live_group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    stop = threading.Event()
    polling = threading.Thread(target=lambda: [live.poll(0.2) for _ in iter(stop.is_set, True)], daemon=True)
    try:
        live.subscribe([topic])
        wait_for("the live member to be assigned the partition", lambda: (live.poll(0.2), live.assignment())[1],
                 timeout=60, interval=0)
        live.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        polling.start()  # the member stays live (heartbeats, polls) while the test waits

        # A group that only commits (no member, no protocol): empty from the start.
        empty_group = f"empty-{uuid.uuid4().hex[:8]}"
        simple = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": empty_group, "enable.auto.commit": False})
        try:
            simple.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        finally:
            simple.close()
        assert committed(broker.bootstrap, empty_group, topic) == 7
        assert committed(broker.bootstrap, live_group, topic) == 3

        wait_for(f"the empty group {empty_group}'s offset to expire", lambda: committed(broker.bootstrap, empty_group, topic),
                 until=lambda offset: offset == NO_OFFSET, timeout=180, interval=1)
        # Committed before the empty group's, so as old: kept because the group has a member.
        assert committed(broker.bootstrap, live_group, topic) == 3
    finally:
        stop.set()
        if polling.is_alive():
            polling.join(10)
        live.close()
