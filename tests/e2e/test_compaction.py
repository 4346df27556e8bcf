"""Compacted topics end to end: a client writes many updates of a few keys to a
`cleanup.policy=compact` topic with small segments, the log cleaner runs, and a consumer reading
from the beginning gets exactly the latest value of each key (and the tombstone written within
delete.retention.ms), at the offsets the producer was given. Also passes against Apache Kafka
(`--kafka-target=apache`): the same topic settings and log.cleaner.backoff.ms make its cleaner
run within seconds."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire

pytestmark = pytest.mark.broker_config({"log.cleaner.backoff.ms": "200"})

KEYS = [b"k%d" % i for i in range(5)]
ROUNDS = 12


def create_compacted(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
               "delete.retention.ms": "600000"}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    with kafka_wire.connect(bootstrap) as conn:
        conn.wait_for_leaders(topic, 1)


def read_from_beginning(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of partition 0 up to its high watermark, in offset order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-reader", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if out and out[-1][0] >= high - 1:
                    break
                continue
            out.append((m.offset(), m.key(), m.value()))
            if m.offset() >= high - 1:
                break
        return out
    finally:
        c.close()


@pytest.mark.timeout(240)
def test_consumer_from_the_beginning_reads_the_latest_value_per_key(broker):
    topic = kafka_wire.unique_topic("compacted")
    create_compacted(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    offsets: dict[tuple[bytes, bytes | None], int] = {}

    def report(err, msg):
        assert err is None, err
        offsets[(msg.key(), msg.value())] = msg.offset()

    latest: dict[bytes, bytes | None] = {}
    for r in range(ROUNDS):
        for k in KEYS:
            value = None if (k == KEYS[-1] and r == ROUNDS - 1) else b"%s=%d" % (k, r)
            p.produce(topic, key=k, value=value, partition=0, on_delivery=report)
            latest[k] = value
        p.flush(30)
        time.sleep(0.15)  # older than segment.ms: the next append rolls a new segment
    # One more record rolls the segment holding the last round, so all of it can be cleaned.
    p.produce(topic, key=b"end", value=b"sentinel", partition=0, on_delivery=report)
    p.flush(30)
    expected = sorted([(offsets[(k, v)], k, v) for k, v in latest.items()] + [(offsets[(b"end", b"sentinel")],
                                                                               b"end", b"sentinel")])
    assert len(offsets) == ROUNDS * len(KEYS) + 1

    got = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        got = read_from_beginning(broker.bootstrap, topic)
        if got == expected:
            break
        time.sleep(1.0)
    assert got == expected, f"after compaction: {len(got or [])} records, expected {len(expected)}"


def test_a_record_without_a_key_is_refused_by_a_compacted_topic(broker):
    topic = kafka_wire.unique_topic("compacted")
    create_compacted(broker.bootstrap, topic)
    with kafka_wire.connect(broker.bootstrap) as conn:
        deadline = time.monotonic() + 15
        while True:
            resp = conn.produce(topic, 0, kafka_wire.build_batch([(b"k", b"keyed"), (None, b"keyless")]))
            if resp.error_code != ErrorCode.not_leader_or_follower or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert resp.error_code == ErrorCode.invalid_record
        resp = conn.produce(topic, 0, kafka_wire.build_batch([(b"k", b"keyed")]))
        assert resp.error_code == ErrorCode.none and resp.base_offset == 0  # nothing of the refused batch stayed


@pytest.mark.timeout(240)
@pytest.mark.broker_config({"offsets.topic.num.partitions": "1", "log.roll.ms": "100",
                            "log.cleaner.min.cleanable.ratio": "0.1"})
def test_consumer_offsets_are_compacted_and_survive_a_restart(broker):
    topic = kafka_wire.unique_topic("committed")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    group = kafka_wire.unique_topic("group")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + 60
    for i in range(300):
        if i % 20 == 0:
            time.sleep(0.12)  # older than log.roll.ms: the next commit rolls a new segment
        while True:
            try:
                c.commit(offsets=[TopicPartition(topic, i % 2, i)], asynchronous=False)
                break
            except KafkaException as e:  # the coordinator is still being found or loaded
                if not e.args[0].retriable() and "coordinator" not in str(e).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    c.close()
    offsets_dir = broker.log_dirs / "__consumer_offsets-0"

    def log_bytes() -> int:
        return sum(p.stat().st_size for p in offsets_dir.glob("*.log"))

    # 300 commits take more than 30 KB (each a batch of over 100 bytes) in ~15 segments; once
    # cleaned, the closed segments hold only the two latest offsets
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and log_bytes() > 10_000:
        time.sleep(0.5)
    assert log_bytes() <= 10_000, f"__consumer_offsets-0 still holds {log_bytes()} bytes"
    broker.restart()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
    c.close()
    assert [(tp.partition, tp.offset) for tp in got] == [(0, 298), (1, 299)]


@pytest.mark.flotilla_only("Flotilla's /metrics")
@pytest.mark.broker_config({"offsets.topic.num.partitions": "1"})
def test_cleaner_work_shows_in_metrics(broker):
    from tests.support.prometheus import metrics

    topic = kafka_wire.unique_topic("compacted")
    create_compacted(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for r in range(4):
        for k in KEYS:
            p.produce(topic, key=k, value=b"%d" % r, partition=0)
        p.flush(30)
        time.sleep(0.15)
    p.produce(topic, key=b"end", value=b"sentinel", partition=0)
    p.flush(30)
    # The first passes may keep every record (nothing superseded yet): wait, in one scrape, for the
    # counters to show a pass that dropped superseded records.
    names = ("flotilla_log_cleaner_cleanings_total", "flotilla_log_cleaner_read_bytes_total",
             "flotilla_log_cleaner_written_bytes_total")
    deadline = time.monotonic() + 60
    seen = metrics(broker.metrics_url, *names)
    while time.monotonic() < deadline and not (seen[names[0]] >= 1 and 0 < seen[names[2]] < seen[names[1]]):
        time.sleep(0.5)
        seen = metrics(broker.metrics_url, *names)
    assert seen[names[0]] >= 1, seen
    assert 0 < seen[names[2]] < seen[names[1]], seen
