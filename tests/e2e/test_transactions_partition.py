"""The partition side of transactions (KIP-98) on one broker: transactional Produce batches and the
COMMIT/ABORT markers a coordinator writes with WriteTxnMarkers, sent with the project's wire client;
then real consumers (confluent-kafka, kafka-python, aiokafka) at read_committed never see aborted
or undecided records, and at read_uncommitted see everything. The last stable offset stops at an
open transaction (ListOffsets latest under read_committed, and the consumers), and a restart, clean
or kill -9, keeps both the open transaction and the aborted ones (.txnindex, producer snapshots).

The log these tests write (offsets):
  0-1  a1 a2  transaction of producer A      -> ABORT marker at 2
  3    p1     plain record
  4-5  b1 b2  transaction of producer B      -> COMMIT marker at 6
  7    c1     transaction of producer C, left open
  8    p2     plain record
"""

from __future__ import annotations

import asyncio
import time

import pytest

from flotilla.testenv import kafka_wire
from flotilla.testenv.waiting import wait_for

# The batches come from the wire client, not through a transaction coordinator, so KIP-890's check
# with the coordinator is off (Kafka's transaction.partition.verification.enable).
pytestmark = [pytest.mark.flotilla_only("WriteTxnMarkers is broker-to-broker: Kafka refuses it from a client"),
              pytest.mark.broker_config(transaction__partition__verification__enable="false")]

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
TIMEOUT_S = 60.0


def _txn(conn, topic: str, values: list[bytes], pid: int, epoch: int, seq: int = 0, *, tid: str) -> int:
    batch = kafka_wire.build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch,
                                   base_sequence=seq, transactional=True)
    resp = conn.produce(topic, 0, batch, transactional_id=tid)
    assert int(resp.error_code) == 0, resp
    return int(resp.base_offset)


def _plain(conn, topic: str, value: bytes) -> int:
    resp = conn.produce(topic, 0, kafka_wire.build_batch([(None, value)]))
    assert int(resp.error_code) == 0, resp
    return int(resp.base_offset)


def _write_log(conn, topic: str) -> dict[str, tuple[int, int]]:
    """The log above, with producer C's transaction open; returns each producer's (id, epoch).
    Each producer first registers its transaction with the coordinator (the leader verifies it,
    KIP-890 part 1); the markers are then written here directly, as a coordinator would."""
    tids = {name: f"{topic}-{name}" for name in "ABC"}
    producers = {name: conn.begin_transaction(tids[name], [(topic, 0)]) for name in "ABC"}
    a, b, c = producers["A"], producers["B"], producers["C"]
    assert _txn(conn, topic, [b"a1", b"a2"], *a, tid=tids["A"]) == 0
    assert conn.write_txn_markers(*a, commit=False, partitions=[(topic, 0)]) == {(topic, 0): 0}
    assert _plain(conn, topic, b"p1") == 3
    assert _txn(conn, topic, [b"b1", b"b2"], *b, tid=tids["B"]) == 4
    assert conn.write_txn_markers(*b, commit=True, partitions=[(topic, 0)]) == {(topic, 0): 0}
    assert _txn(conn, topic, [b"c1"], *c, tid=tids["C"]) == 7
    assert _plain(conn, topic, b"p2") == 8
    return producers


# -- consumers, each reading partition 0 from the beginning at one isolation level ----------------

def _confluent(bootstrap: str, topic: str, isolation: int, last: bytes) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed" if isolation else "read_uncommitted"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while last not in got and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()


def _kafka_python(bootstrap: str, topic: str, isolation: int, last: bytes) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest",
                      isolation_level="read_committed" if isolation else "read_uncommitted")
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while last not in got and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        return got
    finally:
        c.close()


def _aiokafka(bootstrap: str, topic: str, isolation: int, last: bytes) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[bytes]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest",
                             isolation_level="read_committed" if isolation else "read_uncommitted")
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while last not in got and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in records)
            return got
        finally:
            await c.stop()

    return asyncio.run(run())


CONSUMERS = {"confluent-kafka": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("client", list(CONSUMERS))
def test_read_committed_skips_aborted_and_open_transactions(broker, client: str) -> None:
    consume = CONSUMERS[client]
    topic = kafka_wire.unique_topic("txp")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
        producers = _write_log(conn, topic)
        assert conn.list_offsets(topic, 0, -1, READ_UNCOMMITTED) == 9
        assert conn.list_offsets(topic, 0, -1, READ_COMMITTED) == 7, "the LSO must stop at the open transaction"

        assert consume(broker.bootstrap, topic, READ_UNCOMMITTED, b"p2") == [b"a1", b"a2", b"p1", b"b1", b"b2",
                                                                           b"c1", b"p2"]
        # At read_committed, the open transaction and everything after it is not readable yet.
        assert consume(broker.bootstrap, topic, READ_COMMITTED, b"b2") == [b"p1", b"b1", b"b2"]

        assert conn.write_txn_markers(*producers["C"], commit=True, partitions=[(topic, 0)]) == {(topic, 0): 0}
        assert conn.list_offsets(topic, 0, -1, READ_COMMITTED) == 10
        assert consume(broker.bootstrap, topic, READ_COMMITTED, b"p2") == [b"p1", b"b1", b"b2", b"c1", b"p2"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_restart_keeps_the_open_transaction_and_the_aborted_index(broker, how: str) -> None:
    topic = kafka_wire.unique_topic("txr")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
        producers = _write_log(conn, topic)
    partition_dir = broker.log_dirs / f"{topic}-0"
    if how == "clean":
        broker.stop()
        assert (partition_dir / "00000000000000000000.txnindex").stat().st_size == 34
    else:
        broker.kill9()
    broker.start()
    with kafka_wire.connect(broker.bootstrap) as conn:
        lso = wait_for("the partition served again at read_committed",
                       lambda: _try(lambda: conn.list_offsets(topic, 0, -1, READ_COMMITTED)),
                       until=lambda v: isinstance(v, int), timeout=TIMEOUT_S)
        assert lso == 7, "the open transaction was forgotten by the restart"
        assert _confluent(broker.bootstrap, topic, READ_COMMITTED, b"b2") == [b"p1", b"b1", b"b2"]
        # The transaction still open before the restart is ended by its marker after it.
        assert conn.write_txn_markers(*producers["C"], commit=False, partitions=[(topic, 0)]) == {(topic, 0): 0}
        assert conn.list_offsets(topic, 0, -1, READ_COMMITTED) == 10
        assert _kafka_python(broker.bootstrap, topic, READ_COMMITTED, b"p2") == [b"p1", b"b1", b"b2", b"p2"]


@pytest.mark.timeout(120)
def test_marker_errors(broker) -> None:
    topic = kafka_wire.unique_topic("txe")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
        tid = f"{topic}-x"
        pid, bumped = conn.begin_transaction(tid, [(topic, 0)], inits=2)
        epoch = bumped - 1
        _txn(conn, topic, [b"x"], pid, epoch + 1, tid=tid)  # the partition now knows epoch + 1
        INVALID_PRODUCER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, TRANSACTION_COORDINATOR_FENCED = 47, 3, 52
        assert conn.write_txn_markers(pid, epoch, commit=True, partitions=[(topic, 0), ("no-such-topic", 0)]) == {
            (topic, 0): INVALID_PRODUCER_EPOCH, ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert conn.write_txn_markers(pid, epoch + 1, commit=True, partitions=[(topic, 0)],
                                      coordinator_epoch=5) == {(topic, 0): 0}
        assert conn.write_txn_markers(pid, epoch + 1, commit=True, partitions=[(topic, 0)],
                                      coordinator_epoch=4) == {(topic, 0): TRANSACTION_COORDINATOR_FENCED}
        assert conn.list_offsets(topic, 0) == 2, "only the accepted marker was written"
        # A transactional batch needs the request's transactional id, as Kafka's authorizer answers.
        batch = kafka_wire.build_batch([(None, b"y")], producer_id=pid, producer_epoch=epoch + 1, base_sequence=1,
                                       transactional=True)
        assert int(conn.produce(topic, 0, batch).error_code) == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _try(f):
    try:
        return f()
    except RuntimeError as e:
        return str(e)
