"""The transaction coordinator on one broker, over the wire (issue 19): FindCoordinator key type
TRANSACTION, InitProducerId with a transactional id (epoch bumps, fencing of an ongoing
transaction), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions,
and the state surviving a restart (replayed from __transaction_state). Also run against Apache
Kafka 4.1, so the answers are Kafka's."""

from __future__ import annotations

import datetime
import urllib.request

import pytest
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.static.primitive import i8, i16, i32, i64

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import ServerProcess
from flotilla.testenv.waiting import wait_for


def find_coordinator(conn, tid: str) -> int:
    def ask():
        c = conn.request(FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(tid,))).coordinators[0]
        return c if c.error_code == ErrorCode.none else None
    return int(wait_for(f"a transaction coordinator for {tid}", ask, timeout=60).node_id)


def init(conn, tid: str, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1):
    return conn.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout=datetime.timedelta(
        milliseconds=timeout_ms), producer_id=i64(pid), producer_epoch=i16(epoch)))


def init_ok(conn, tid: str, **kw) -> tuple[int, int]:
    r = wait_for(f"InitProducerId of {tid}", lambda: init(conn, tid, **kw),
                 until=lambda r: r.error_code == ErrorCode.none)
    return int(r.producer_id), int(r.producer_epoch)


def add(conn, tid: str, pid: int, epoch: int, topic: str, partitions) -> dict[tuple[str, int], ErrorCode]:
    r = conn.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=i64(pid), v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=tuple(i32(p) for p in partitions)),)))
    return {(t.name, int(p.partition_index)): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def describe(conn, tid: str):
    return conn.request(DescribeTransactionsRequest(transactional_ids=(tid,))).transaction_states[0]


def end(conn, tid: str, pid: int, epoch: int, commit: bool) -> ErrorCode:
    return conn.request(EndTxnRequest(transactional_id=tid, producer_id=i64(pid), producer_epoch=i16(epoch),
                                      committed=commit)).error_code


@pytest.mark.timeout(180)
def test_init_add_describe_and_list(shared_broker: ServerProcess) -> None:
    tid = kafka_wire.unique_topic("tx")
    topic = kafka_wire.unique_topic("txt")
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 2)) == 0
        conn.wait_for_leaders(topic, 2)
        find_coordinator(conn, tid)
        pid, epoch = init_ok(conn, tid)
        assert epoch == 0
        assert init_ok(conn, tid) == (pid, 1), "a second InitProducerId bumps the epoch of the same producer id"
        assert init(conn, tid, timeout_ms=24 * 3600 * 1000).error_code == ErrorCode.invalid_transaction_timeout
        assert add(conn, tid, pid, 0, topic, [0]) == {(topic, 0): ErrorCode.producer_fenced}
        assert add(conn, tid, pid + 1, 1, topic, [0]) == {(topic, 0): ErrorCode.invalid_producer_id_mapping}
        assert add(conn, tid, pid, 1, "no-such-topic-tx", [0]) == {("no-such-topic-tx", 0):
                                                                    ErrorCode.unknown_topic_or_partition}
        assert end(conn, tid, pid, 1, True) == ErrorCode.invalid_txn_state, "nothing to commit yet"
        assert add(conn, tid, pid, 1, topic, [0, 1]) == {(topic, 0): ErrorCode.none, (topic, 1): ErrorCode.none}
        d = describe(conn, tid)
        assert (d.error_code, d.transaction_state, int(d.producer_id), int(d.producer_epoch)) == (
            ErrorCode.none, "Ongoing", pid, 1)
        assert [(t.topic, sorted(t.partitions)) for t in d.topics] == [(topic, [0, 1])]
        listed = conn.request(ListTransactionsRequest(state_filters=("Ongoing", "Bogus"), producer_id_filters=()))
        assert listed.error_code == ErrorCode.none and list(listed.unknown_state_filters) == ["Bogus"]
        assert (tid, pid, "Ongoing") in [(t.transactional_id, int(t.producer_id), t.transaction_state)
                                         for t in listed.transaction_states]
        offsets = conn.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=i64(pid),
                                                      producer_epoch=i16(1), group_id=tid + "-group"))
        assert offsets.error_code == ErrorCode.none
        assert any(t.topic == "__consumer_offsets" for t in describe(conn, tid).topics)


@pytest.mark.timeout(180)
def test_init_during_a_transaction_fences_and_aborts_it(shared_broker: ServerProcess) -> None:
    tid = kafka_wire.unique_topic("txf")
    topic = kafka_wire.unique_topic("txft")
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
        find_coordinator(conn, tid)
        pid, epoch = init_ok(conn, tid)
        assert add(conn, tid, pid, epoch, topic, [0]) == {(topic, 0): ErrorCode.none}
        # A second producer with the same id: the ongoing transaction is aborted with a bumped
        # epoch first, and the newcomer told to retry.
        assert init(conn, tid).error_code == ErrorCode.concurrent_transactions
        d = describe(conn, tid)
        assert d.transaction_state in ("PrepareAbort", "CompleteAbort") and int(d.producer_epoch) == epoch + 1, d
        assert end(conn, tid, pid, epoch, True) == ErrorCode.producer_fenced
        # (Kafka answers CONCURRENT_TRANSACTIONS while its abort markers are in flight.)
        wait_for("the old producer fenced", lambda: add(conn, tid, pid, epoch, topic, [0]),
                 until=lambda r: r == {(topic, 0): ErrorCode.producer_fenced})


@pytest.mark.timeout(240)
@pytest.mark.flotilla_only("restarts the broker process")
def test_state_survives_a_restart(broker_factory) -> None:
    b: ServerProcess = broker_factory({})
    tid, topic = kafka_wire.unique_topic("txr"), kafka_wire.unique_topic("txrt")
    with kafka_wire.connect(b.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
        find_coordinator(conn, tid)
        pid, _ = init_ok(conn, tid)
        pid, epoch = init_ok(conn, tid)
        assert add(conn, tid, pid, epoch, topic, [0]) == {(topic, 0): ErrorCode.none}
    b.restart()
    with kafka_wire.connect(b.bootstrap) as conn:
        find_coordinator(conn, tid)
        d = wait_for("the transaction after the restart", lambda: describe(conn, tid),
                     until=lambda d: d.error_code == ErrorCode.none)
        assert (d.transaction_state, int(d.producer_id), int(d.producer_epoch)) == ("Ongoing", pid, 1)
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [0])]
        assert add(conn, tid, pid, 0, topic, [0]) == {(topic, 0): ErrorCode.producer_fenced}


def txn_offset_commit(conn, tid: str, group: str, pid: int, epoch: int, topic: str, offset: int) -> ErrorCode:
    from kio.schema.txn_offset_commit.v3.request import (TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition,
                                                         TxnOffsetCommitRequestTopic)
    r = conn.request(TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=i64(pid), producer_epoch=i16(epoch), generation_id=i32(-1),
        member_id="", group_instance_id=None, topics=(TxnOffsetCommitRequestTopic(name=topic, partitions=(
            TxnOffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(offset),
                                            committed_leader_epoch=i32(-1), committed_metadata="m"),)),)))
    return r.topics[0].partitions[0].error_code


def fetch_offset(conn, group: str, topic: str, require_stable: bool) -> tuple[ErrorCode, int]:
    from kio.schema.offset_fetch.v8.request import (OffsetFetchRequest, OffsetFetchRequestGroup,
                                                    OffsetFetchRequestTopics)
    r = conn.request(OffsetFetchRequest(require_stable=require_stable, groups=(OffsetFetchRequestGroup(
        group_id=group, topics=(OffsetFetchRequestTopics(name=topic, partition_indexes=(i32(0),)),)),)))
    p = r.groups[0].topics[0].partitions[0]
    return p.error_code, int(p.committed_offset)


def find_group_coordinator(conn, group: str) -> None:
    def ask():
        c = conn.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,))).coordinators[0]
        return c if c.error_code == ErrorCode.none else None
    wait_for(f"a group coordinator for {group}", ask, timeout=60)


@pytest.mark.timeout(240)
@pytest.mark.flotilla_only("restarts the broker process")
def test_txn_offset_commit_stays_pending_until_its_marker_also_after_a_restart(broker_factory) -> None:
    b: ServerProcess = broker_factory({})
    tid, topic = kafka_wire.unique_topic("txo"), kafka_wire.unique_topic("txot")
    group = tid + "-group"
    with kafka_wire.connect(b.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
        find_coordinator(conn, tid)
        pid, epoch = init_ok(conn, tid)
        find_group_coordinator(conn, group)
        assert conn.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=i64(pid),
                                                   producer_epoch=i16(epoch), group_id=group)).error_code == 0
        assert txn_offset_commit(conn, tid, group, pid, epoch, topic, 42) == ErrorCode.none
        # Not applied before the transaction commits: a stable read is told to wait.
        assert fetch_offset(conn, group, topic, require_stable=False) == (ErrorCode.none, -1)
        assert fetch_offset(conn, group, topic, require_stable=True) == (ErrorCode.unstable_offset_commit, -1)
    b.restart()
    with kafka_wire.connect(b.bootstrap) as conn:
        find_group_coordinator(conn, group)
        seen = wait_for("the group loaded again", lambda: fetch_offset(conn, group, topic, require_stable=True),
                        until=lambda r: r[0] != ErrorCode.coordinator_load_in_progress)
        assert seen == (ErrorCode.unstable_offset_commit, -1), "the pending TxnOffsetCommit was lost or applied"


@pytest.mark.timeout(180)
@pytest.mark.flotilla_only("sets the timed-out transaction check interval")
def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(broker_factory) -> None:
    b: ServerProcess = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
                                       "transaction.max.timeout.ms": "60000"})
    tid, topic = kafka_wire.unique_topic("txto"), kafka_wire.unique_topic("txtot")
    with kafka_wire.connect(b.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
        find_coordinator(conn, tid)
        assert init(conn, tid, timeout_ms=60001).error_code == ErrorCode.invalid_transaction_timeout
        pid, epoch = init_ok(conn, tid, timeout_ms=1000)
        assert add(conn, tid, pid, epoch, topic, [0]) == {(topic, 0): ErrorCode.none}
        d = wait_for("the timed-out transaction aborted", lambda: describe(conn, tid),
                     until=lambda d: d.transaction_state in ("PrepareAbort", "CompleteAbort"))
        assert int(d.producer_epoch) == epoch + 1, "the abort did not fence the producer's epoch"
        assert end(conn, tid, pid, epoch, True) == ErrorCode.producer_fenced
    metrics = urllib.request.urlopen(b.metrics_url, timeout=10).read().decode()
    assert "flotilla_transactions_timed_out_total 1.0" in metrics, metrics
    assert 'flotilla_transactions_ended_total{result="abort"} 1.0' in metrics
    assert 'flotilla_transactions{state="Ongoing"} 0.0' in metrics


@pytest.mark.timeout(60)
@pytest.mark.flotilla_only("Apache Kafka 4.1 finalizes transaction.version 2")
def test_only_transaction_version_1_is_advertised(shared_broker: ServerProcess) -> None:
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        versions = conn.api_versions(4)  # v3 and older leave out a feature whose minimum is 0 (KAFKA-17011)
    finalized = {f.name: (int(f.min_version_level), int(f.max_version_level)) for f in versions.finalized_features}
    supported = {f.name: (int(f.min_version), int(f.max_version)) for f in versions.supported_features}
    assert finalized.get("transaction.version") == (1, 1) and supported.get("transaction.version") == (0, 1)


@pytest.mark.timeout(180)
def test_confluent_transactional_producer_speaks_to_the_coordinator(shared_broker: ServerProcess) -> None:
    """librdkafka's coordinator steps (FindCoordinator, InitProducerId, AddOffsetsToTxn, its
    TxnOffsetCommit with the group's metadata, EndTxn) are answered; the produce side is not
    needed for this path."""
    ck = pytest.importorskip("confluent_kafka")
    tid, topic = kafka_wire.unique_topic("txck"), kafka_wire.unique_topic("txckt")
    group = tid + "-group"
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
    producer = ck.Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": tid,
                            "transaction.timeout.ms": 60000})
    consumer = ck.Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group,
                            "enable.auto.commit": False})
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 7)], consumer.consumer_group_metadata(), 60)
        with kafka_wire.connect(shared_broker.bootstrap) as conn:
            find_coordinator(conn, tid)
            d = describe(conn, tid)
            assert d.transaction_state == "Ongoing" and [t.topic for t in d.topics] == ["__consumer_offsets"], d
            assert fetch_offset(conn, group, topic, require_stable=True) == (ErrorCode.unstable_offset_commit, -1)
        producer.abort_transaction(60)
        with kafka_wire.connect(shared_broker.bootstrap) as conn:
            d = wait_for("the abort", lambda: describe(conn, tid),
                         until=lambda d: d.transaction_state in ("PrepareAbort", "CompleteAbort"))
            assert int(d.producer_epoch) == 0
    finally:
        consumer.close()
