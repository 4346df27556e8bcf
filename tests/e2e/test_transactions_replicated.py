"""Transactions on replicated partitions (KIP-98): three brokers, RF=3, min.insync.replicas=2.
Markers are answered once the in-sync replicas hold them; followers rebuild the producer state and
aborted transaction index from the leader's batches, so after a kill -9 of the leader the new
leader answers the same last stable offset, still hides the aborted transaction from read_committed
consumers, and ends the transaction still open with its marker.

The log is the one of test_transactions_partition.py: an aborted transaction, a committed one,
one left open (LSO 7), and plain records.
"""

from __future__ import annotations

import pytest

from tests.e2e.test_transactions_partition import (READ_COMMITTED, READ_UNCOMMITTED, _confluent, _aiokafka,
                                                   _try, _write_log)
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("replication on a Flotilla cluster on Kubernetes metadata"),
]

OVERRIDES = {"replica.lag.time.max.ms": "4000", "replica.fetch.backoff.ms": "200",
             "transaction.partition.verification.enable": "false"}  # no coordinator sends these batches


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        yield c


@pytest.mark.timeout(300)
def test_read_committed_across_a_leader_kill(cluster: BrokerCluster) -> None:
    cluster.wait_formed()
    topic = kafka_wire.unique_topic("txrf")
    with kafka_wire.connect(cluster.brokers[0].bootstrap) as conn:
        assert int(conn.create_topic(topic, 1, configs={"min.insync.replicas": "2"}, replication_factor=3)) == 0
    leader_id = cluster.wait_leaders(topic, 1)[0]
    leader = cluster.broker(leader_id)
    with kafka_wire.connect(leader.bootstrap) as conn:
        producers = _write_log(conn, topic)
        assert conn.list_offsets(topic, 0, -1, READ_COMMITTED) == 7
    assert _confluent(cluster.bootstrap, topic, READ_COMMITTED, b"b2") == [b"p1", b"b1", b"b2"]

    leader.kill9()
    new_leader_id = wait_for("a new leader", lambda: cluster.leaders(topic).get(0),
                             until=lambda v: v is not None and v >= 0 and v != leader_id)
    new_leader = cluster.broker(new_leader_id)
    with kafka_wire.connect(new_leader.bootstrap) as conn:
        lso = wait_for("the new leader answering ListOffsets at read_committed",
                       lambda: _try(lambda: conn.list_offsets(topic, 0, -1, READ_COMMITTED)),
                       until=lambda v: isinstance(v, int))
        assert lso == 7, "the new leader lost the open transaction"
        assert conn.list_offsets(topic, 0, -1, READ_UNCOMMITTED) == 9
    assert _aiokafka(cluster.bootstrap, topic, READ_COMMITTED, b"b2") == [b"p1", b"b1", b"b2"]

    with kafka_wire.connect(new_leader.bootstrap) as conn:
        codes = wait_for("the ABORT marker accepted by the new leader",
                         lambda: conn.write_txn_markers(*producers["C"], commit=False, partitions=[(topic, 0)]),
                         until=lambda v: v == {(topic, 0): 0})
        assert codes == {(topic, 0): 0}
        # Everything is decided now (a retried marker may have been written twice: no offset pinned).
        assert conn.list_offsets(topic, 0, -1, READ_COMMITTED) == conn.list_offsets(topic, 0, -1, READ_UNCOMMITTED)
    assert _confluent(cluster.bootstrap, topic, READ_COMMITTED, b"p2") == [b"p1", b"b1", b"b2", b"p2"]
