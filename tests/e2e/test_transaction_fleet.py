"""The transaction coordinator on three brokers (issue 19): `__transaction_state` replicated at
RF=3, and a coordinator killed with kill -9 leaves its transactions to the broker that becomes
leader of their partition, which loads them as they were.

    pytest -m kube tests/e2e/test_transaction_fleet.py
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.e2e.test_replication import create_topic
from tests.e2e.test_transaction_coordinator import add, describe, end, find_coordinator, init_ok
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("a Flotilla cluster on Kubernetes metadata"),
]

OVERRIDES = {"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
             "transaction.state.log.num.partitions": "4", "replica.lag.time.max.ms": "4000",
             "replica.fetch.backoff.ms": "200"}


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        yield c


@pytest.mark.timeout(300)
def test_an_ongoing_transaction_survives_its_coordinator_being_killed(cluster: BrokerCluster) -> None:
    topic = create_topic(cluster.brokers[0], 2, prefix="txfleet")
    cluster.wait_leaders(topic, 2)
    tid = kafka_wire.unique_topic("txfleet-id")
    with kafka_wire.connect(cluster.brokers[0].bootstrap) as conn:
        coordinator = find_coordinator(conn, tid)
    old = cluster.broker(coordinator)
    with kafka_wire.connect(old.bootstrap) as conn:
        pid, epoch = init_ok(conn, tid)
        assert add(conn, tid, pid, epoch, topic, [0, 1]) == {(topic, 0): ErrorCode.none, (topic, 1): ErrorCode.none}
    old.kill9()
    survivor = next(b for b in cluster.running())
    with kafka_wire.connect(survivor.bootstrap) as conn:
        new = wait_for("a new transaction coordinator", lambda: find_coordinator(conn, tid),
                       until=lambda n: n != coordinator)
    with kafka_wire.connect(cluster.broker(new).bootstrap) as conn:
        d = wait_for("the transaction on the new coordinator", lambda: describe(conn, tid),
                     until=lambda d: d.error_code == ErrorCode.none)
        assert (d.transaction_state, int(d.producer_id), int(d.producer_epoch)) == ("Ongoing", pid, epoch)
        assert [(t.topic, sorted(t.partitions)) for t in d.topics] == [(topic, [0, 1])]
        assert end(conn, tid, pid, epoch, True) == ErrorCode.none
        assert describe(conn, tid).transaction_state in ("PrepareCommit", "CompleteCommit")


@pytest.mark.timeout(300)
def test_a_coordinator_killed_in_prepare_commit_leaves_the_transaction_committed_everywhere(
        cluster: BrokerCluster) -> None:
    topic = create_topic(cluster.brokers[0], 3, prefix="txpc")
    cluster.wait_leaders(topic, 3)
    tid = kafka_wire.unique_topic("txpc-id")
    with kafka_wire.connect(cluster.brokers[0].bootstrap) as conn:
        coordinator = find_coordinator(conn, tid)
    old = cluster.broker(coordinator)
    with kafka_wire.connect(old.bootstrap) as conn:
        pid, epoch = init_ok(conn, tid)
        assert add(conn, tid, pid, epoch, topic, [0, 1, 2]) == {(topic, p): ErrorCode.none for p in range(3)}
    for p, leader in cluster.leaders(topic).items():
        with kafka_wire.connect(cluster.broker(leader).bootstrap) as conn:
            batch = kafka_wire.build_batch([(None, f"v{p}".encode())], producer_id=pid, producer_epoch=epoch,
                                           base_sequence=0, transactional=True)
            assert int(conn.produce(topic, p, batch, transactional_id=tid).error_code) == 0
    with kafka_wire.connect(old.bootstrap) as conn:
        assert end(conn, tid, pid, epoch, True) == ErrorCode.none
    old.kill9()  # right after PrepareCommit is replicated: markers may or may not have gone out
    survivor = next(b for b in cluster.running())
    with kafka_wire.connect(survivor.bootstrap) as conn:
        new = wait_for("a new transaction coordinator", lambda: find_coordinator(conn, tid),
                       until=lambda n: n != coordinator)
    with kafka_wire.connect(cluster.broker(new).bootstrap) as conn:
        d = wait_for("the commit completed by the new coordinator", lambda: describe(conn, tid),
                     until=lambda d: d.error_code == ErrorCode.none and d.transaction_state == "CompleteCommit")
        assert (int(d.producer_id), int(d.producer_epoch)) == (pid, epoch)
        assert end(conn, tid, pid, epoch, False) == ErrorCode.invalid_txn_state, "an abort after the commit"
    def offsets(p: int) -> tuple[int, int]:
        """(last stable offset, high watermark) from the partition's current leader."""
        leader = cluster.leaders(topic, via=survivor)[p]
        with kafka_wire.connect(cluster.broker(leader).bootstrap) as conn:
            return conn.list_offsets(topic, p, -1, 1), conn.list_offsets(topic, p)

    for p in range(3):
        # The record and its COMMIT marker (a second one when the new coordinator re-sent it, as
        # Kafka appends it too): nothing undecided, read_committed reads up to the end.
        wait_for(f"{topic}-{p} committed", lambda: offsets(p), until=lambda v: v[0] == v[1] >= 2)
