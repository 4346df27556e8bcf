"""ListOffsets by timestamp and MAX_TIMESTAMP answer per record, not per batch, as Apache Kafka
does (issue 8, item 7): for one batch holding records at t, t+1 s and t+2 s, a lookup of
t+1.5 s gives the third record. Checked with confluent-kafka, kafka-python and raw kio; runs
against Apache Kafka too (`--kafka-target=apache`)."""

from __future__ import annotations

import datetime
import io
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.static.primitive import i8, i16, i32, i64

from flotilla.testenv import kafka_wire


def create_topic(bootstrap: str, name: str) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    with kafka_wire.connect(bootstrap) as conn:
        conn.wait_for_leaders(name, 1)


def base_time_ms() -> int:
    """A recent whole second (recent: retention and timestamp bounds leave it alone)."""
    return (int(time.time()) - 120) * 1000


def produce_one_batch(bootstrap: str, topic: str, timestamps: list[int]) -> list[int]:
    """librdkafka batches the records of one flush into a single batch (long linger)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2000, "batch.num.messages": 1000})
    offsets: list[int] = []
    for i, ts in enumerate(timestamps):
        p.produce(topic, value=b"r%d" % i, partition=0, timestamp=ts,
                  on_delivery=lambda e, m: offsets.append(m.offset()) if e is None else None)
    assert p.flush(30) == 0
    assert len(offsets) == len(timestamps)
    return sorted(offsets)


def kio_list_offsets(bootstrap: str, topic: str, timestamp: int) -> tuple[int, int]:
    with kafka_wire.connect(bootstrap) as conn:
        resp = conn.request(ListOffsetsRequest(
            replica_id=i32(-1), isolation_level=i8(0),
            topics=(ListOffsetsTopic(name=topic, partitions=(
                ListOffsetsPartition(partition_index=i32(0), timestamp=i64(timestamp)),)),)))
    p = resp.topics[0].partitions[0]
    assert int(p.error_code) == 0, p
    return int(p.offset), int(p.timestamp)


def test_lookup_inside_one_batch_with_real_clients(broker):
    topic = kafka_wire.unique_topic("ts")
    create_topic(broker.bootstrap, topic)
    t = base_time_ms()
    produce_one_batch(broker.bootstrap, topic, [t - 10_000])  # offset 0, its own batch
    offsets = produce_one_batch(broker.bootstrap, topic, [t, t + 1000, t + 2000])
    assert offsets == [1, 2, 3]

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, t + 1500)], timeout=15)
        assert tp.offset == 3
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, t + 1000)], timeout=15)
        assert tp.offset == 2
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, t + 2001)], timeout=15)
        assert tp.offset == -1  # nothing that late: the end of the log
    finally:
        c.close()

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        got = kc.offsets_for_times({KTP(topic, 0): t + 1500})[KTP(topic, 0)]
        assert (got.offset, got.timestamp) == (3, t + 2000)
        got = kc.offsets_for_times({KTP(topic, 0): t + 1})[KTP(topic, 0)]
        assert (got.offset, got.timestamp) == (2, t + 1000)
    finally:
        kc.close()

    assert kio_list_offsets(broker.bootstrap, topic, t + 1500) == (3, t + 2000)
    assert kio_list_offsets(broker.bootstrap, topic, t - 20_000) == (0, t - 10_000)


def test_max_timestamp_is_the_record_not_the_batch_end(broker):
    topic = kafka_wire.unique_topic("maxts")
    create_topic(broker.bootstrap, topic)
    t = base_time_ms()
    assert produce_one_batch(broker.bootstrap, topic, [t, t + 5000, t + 2000]) == [0, 1, 2]
    # A second batch from raw kio, with a smaller largest timestamp.
    ts0 = datetime.datetime.fromtimestamp((t + 3000) / 1000, tz=datetime.timezone.utc)
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1), attributes=i16(0),
        records=tuple(Record(attributes=i8(0), timestamp=ts0 + datetime.timedelta(milliseconds=i),
                             offset=i64(i), key=None, value=b"k", headers=()) for i in range(2))))
    with kafka_wire.connect(broker.bootstrap) as conn:
        resp = conn.produce(topic, 0, buf.getvalue())
        assert int(resp.error_code) == 0 and int(resp.base_offset) == 3

    assert kio_list_offsets(broker.bootstrap, topic, -3) == (1, t + 5000)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = a.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()})[TopicPartition(topic, 0)].result(30)
    assert (res.offset, res.timestamp) == (1, t + 5000)
    # by timestamp: the first record in offset order whose timestamp is late enough
    assert kio_list_offsets(broker.bootstrap, topic, t + 1500) == (1, t + 5000)
    assert kio_list_offsets(broker.bootstrap, topic, t + 5001) == (-1, -1)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_lookup_inside_a_compressed_batch(broker, codec):
    topic = kafka_wire.unique_topic(f"ts-{codec}")
    create_topic(broker.bootstrap, topic)
    t = base_time_ms()
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2000, "compression.type": codec})
    for i in range(20):
        p.produce(topic, value=b"value %d " % i * 10, partition=0, timestamp=t + 100 * i)
    assert p.flush(30) == 0
    for i in (0, 7, 19):
        assert kio_list_offsets(broker.bootstrap, topic, t + 100 * i - 50) == (i, t + 100 * i)
