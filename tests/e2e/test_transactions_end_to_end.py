"""Transactions end to end on one broker with confluent-kafka (issue 19): a transactional
producer's committed records reach read_committed consumers and its aborted ones do not (a
read_uncommitted consumer sees both), send_offsets_to_transaction commits the group's offsets
with the transaction, and a second producer with the same transactional.id fences the first."""

from __future__ import annotations

import pytest

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import ServerProcess
from flotilla.testenv.waiting import wait_for

ck = pytest.importorskip("confluent_kafka")


def producer(bootstrap: str, tid: str):
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000})
    p.init_transactions(60)
    return p


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int) -> list[bytes]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": kafka_wire.unique_topic("rd"),
                     "isolation.level": isolation, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    try:
        def more():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            return len(got) >= expect
        wait_for(f"{expect} records ({isolation}) of {topic}", more, timeout=60, interval=0)
        # Nothing more arrives (a second look after the expected count).
        extra = c.poll(2.0)
        if extra is not None and extra.error() is None:
            got.append(extra.value())
    finally:
        c.close()
    return got


@pytest.mark.timeout(240)
def test_committed_records_are_read_and_aborted_ones_are_not(shared_broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("txe2e")
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 2)) == 0
        conn.wait_for_leaders(topic, 2)
    p = producer(shared_broker.bootstrap, kafka_wire.unique_topic("txe2e-id"))
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"c{i}".encode(), partition=i % 2)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"a{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(60)
    p.begin_transaction()
    p.produce(topic, b"c10", partition=0)
    p.commit_transaction(60)
    committed = read_all(shared_broker.bootstrap, topic, 2, "read_committed", 11)
    assert sorted(committed) == sorted([f"c{i}".encode() for i in range(11)])
    everything = read_all(shared_broker.bootstrap, topic, 2, "read_uncommitted", 16)
    assert sorted(everything) == sorted([f"c{i}".encode() for i in range(11)] + [f"a{i}".encode() for i in range(5)])


@pytest.mark.timeout(240)
def test_offsets_sent_to_the_transaction_commit_with_it(shared_broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("txoff")
    group = kafka_wire.unique_topic("txoff-g")
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
    consumer = ck.Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group,
                            "enable.auto.commit": False, "isolation.level": "read_committed"})
    p = producer(shared_broker.bootstrap, kafka_wire.unique_topic("txoff-id"))
    try:
        p.begin_transaction()
        p.produce(topic, b"x", partition=0)
        p.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 5)], consumer.consumer_group_metadata(), 60)
        p.abort_transaction(60)
        p.begin_transaction()
        p.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 9)], consumer.consumer_group_metadata(), 60)
        p.commit_transaction(60)
        committed = wait_for("the transaction's offsets", lambda: consumer.committed(
            [ck.TopicPartition(topic, 0)], timeout=10)[0], until=lambda tp: tp.offset >= 0)
        assert committed.offset == 9, "the aborted transaction's offset 5 or nothing was committed"
    finally:
        consumer.close()


@pytest.mark.timeout(240)
def test_a_second_producer_with_the_same_id_fences_the_first(shared_broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("txfence")
    tid = kafka_wire.unique_topic("txfence-id")
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
    first = producer(shared_broker.bootstrap, tid)
    first.begin_transaction()
    first.produce(topic, b"first", partition=0)
    first.flush(30)
    second = producer(shared_broker.bootstrap, tid)  # aborts the first one's transaction
    second.begin_transaction()
    second.produce(topic, b"second", partition=0)
    second.commit_transaction(60)
    with pytest.raises(ck.KafkaException) as raised:
        first.commit_transaction(60)
    error = raised.value.args[0]
    assert error.code() in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED), error
    assert read_all(shared_broker.bootstrap, topic, 1, "read_committed", 1) == [b"second"]
