"""Compaction of a topic written in transactions (KIP-98 with the log cleaner): a transactional
confluent-kafka producer commits and aborts transactions over the same keys of a compacted topic
with small segments and a short delete.retention.ms; once the cleaner has run, a read_committed
consumer reads exactly the last committed value of each key, a read_uncommitted one reads no
aborted record either (they are gone from the log), and the raw log (a Fetch over a socket)
holds no marker but the last transaction's, whose records are still the keys' latest values.
The earlier markers go only after their transaction's records are gone and delete.retention.ms
has passed (the delete horizon), as Kafka's LogCleaner removes them. Also passes against Apache
Kafka 4.1 (`--kafka-target=apache`)."""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from flotilla.testenv import kafka_wire
from flotilla.testenv.fetch_client import exchange, fetch_request
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.broker_config({"log.cleaner.backoff.ms": "200"})

KEYS = [b"k%d" % i for i in range(4)]
TRANSACTIONS = 5  # even ones commit, odd ones abort; the last commits
CONTROL = 0x20
_HEADER = struct.Struct(">qiibIh")  # base offset, length, leader epoch, magic, crc, attributes


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
               "delete.retention.ms": "3000"}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    with kafka_wire.connect(bootstrap) as conn:
        conn.wait_for_leaders(topic, 1)


def write_transactions(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """Returns the offsets of each transaction's records, by transaction number."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"compacted-{topic}", "linger.ms": 5})
    offsets: dict[int, list[int]] = {}
    p.init_transactions(30)
    for t in range(TRANSACTIONS):
        commit = t % 2 == 0

        def report(err, msg, t=t):
            assert err is None, err
            offsets.setdefault(t, []).append(msg.offset())

        p.begin_transaction()
        for k in KEYS:
            p.produce(topic, key=k, value=b"%s:%s-%d" % (k, b"commit" if commit else b"abort", t), partition=0,
                      on_delivery=report)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
        time.sleep(0.15)  # older than segment.ms: the next transaction starts a new segment
    return offsets


def read_all(bootstrap: str, topic: str, isolation: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record of partition 0 up to the end the consumer may read."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-txn-reader", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                break  # end of partition
            out.append((m.key(), m.value()))
        return out
    finally:
        c.close()


def control_batches(bootstrap: str, topic: str) -> list[int]:
    """Base offsets of the control batches (markers) in partition 0, from raw Fetch responses."""
    found, offset = [], 0
    with kafka_wire.connect(bootstrap) as conn:
        while True:
            (part,) = exchange(conn, fetch_request(12, 0, -1, {topic: {0: offset}})).partitions.values()
            data = part.records or b""
            pos, last = 0, None
            while pos + _HEADER.size <= len(data):
                base, length, _, _, _, attributes = _HEADER.unpack_from(data, pos)
                if pos + 12 + length > len(data):
                    break
                if attributes & CONTROL:
                    found.append(base)
                (last_delta,) = struct.unpack_from(">i", data, pos + 23)
                last = base + last_delta
                pos += 12 + length
            if last is None or last + 1 >= part.high_watermark:
                return found
            offset = last + 1


@pytest.mark.timeout(240)
def test_compaction_removes_aborted_records_and_in_time_the_markers(broker):
    topic = kafka_wire.unique_topic("txn-compacted")
    create_topic(broker.bootstrap, topic)
    offsets = write_transactions(broker.bootstrap, topic)
    last_marker = max(offsets[TRANSACTIONS - 1]) + 1
    # written: a marker per transaction (the cleaner may have started on the first ones)
    assert len(control_batches(broker.bootstrap, topic)) > 1
    latest = {k: b"%s:commit-%d" % (k, TRANSACTIONS - 1) for k in KEYS}
    sentinel = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    sent = [0]

    def look() -> tuple[list, list, list[int]]:
        # A plain record rolls the segment before it (segment.ms) and makes the log dirty again,
        # so the cleaner keeps passing over it on every broker, whatever schedules its cleanings.
        sent[0] += 1
        sentinel.produce(topic, key=b"end", value=b"%d" % sent[0], partition=0)
        sentinel.flush(30)
        committed = [kv for kv in read_all(broker.bootstrap, topic, "read_committed") if kv[0] != b"end"]
        uncommitted = [kv for kv in read_all(broker.bootstrap, topic, "read_uncommitted") if kv[0] != b"end"]
        return committed, uncommitted, control_batches(broker.bootstrap, topic)

    committed, uncommitted, markers = wait_for(
        "the cleaner to leave the last committed values and only the last transaction's marker", look,
        until=lambda s: sorted(s[0]) == sorted(latest.items()) and sorted(s[1]) == sorted(latest.items())
        and s[2] == [last_marker],
        timeout=150, interval=1.0)
    assert not [v for _, v in uncommitted if b"abort" in v]
    assert markers == [last_marker]
