"""A follower's fetch is believed only from a live broker of the fleet, in its current incarnation,
on the inter-broker listener (issue 18 item 3; KIP-903, broker/replica/follower_identity.py).

Three brokers with a CLIENT and a REPLICATION listener (`inter.broker.listener.name`). A client
that forges follower fetches (any replica_id, with or without a broker epoch, on either listener)
moves neither the leader's high watermark nor its ISR, and gets NOT_LEADER_OR_FOLLOWER; the
real followers keep replicating, a restarted broker rejoins the ISR in its new incarnation, and a
fetch carrying the broker epoch of a live registration is accepted on the REPLICATION listener
only.

    pytest -m kube tests/e2e/test_follower_identity.py
"""

from __future__ import annotations

import datetime
import os
import signal

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from broker.metadata.store import BrokerRegistration
from broker.replica.follower_identity import broker_epoch
from tests.e2e.test_replication import create_topic, records_batch
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import free_port
from flotilla.testenv.brokers.cluster import BrokerCluster, ClusterBroker
from flotilla.testenv.fetch_client import exchange
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.flotilla_only("follower fetches on a Flotilla fleet")]

# Leases outlive the steps while a follower is frozen (its registration stays live, it stays in
# the ISR: replica.lag.time.max.ms is Kafka's 30 s), so only a forged fetch could move anything.
OVERRIDES = {"flotilla.metadata.lease.duration.ms": "20000", "replica.fetch.backoff.ms": "200"}


@pytest.fixture
def fleet(tmp_path, kube_env, kube_namespace):
    cluster = BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES)
    for b in cluster.brokers:
        b.replication = f"127.0.0.1:{free_port()}"
        b.overrides.update({
            "listeners": f"CLIENT://127.0.0.1:{b.port},REPLICATION://{b.replication}",
            "advertised.listeners": f"CLIENT://127.0.0.1:{b.advertised_port},REPLICATION://{b.replication}",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
            "inter.broker.listener.name": "REPLICATION",
        })
    with cluster as c:
        yield c


def state(via: ClusterBroker, topic: str) -> tuple[int, int, set[int]]:
    """(leader, leader epoch, ISR) of partition 0 as `via` answers Metadata."""
    with kafka_wire.connect(via.bootstrap, timeout=5.0) as conn:
        p = conn.metadata([topic]).topics[0].partitions[0]
    return int(p.leader_id), int(p.leader_epoch), {int(r) for r in p.isr_nodes}


def wait_isr(via: ClusterBroker, topic: str, want: set[int]) -> tuple[int, int, set[int]]:
    last: list = [None]

    def ok():
        try:
            last[0] = state(via, topic)
        except Exception as e:  # a broker just went down
            last[0] = e
            return False
        return last[0][0] >= 0 and last[0][2] == want and last[0]
    return wait_for(f"ISR {sorted(want)} of {topic} (last: {last[0]})", ok, timeout=60, interval=0.25)


def topic_id(via: ClusterBroker, topic: str):
    with kafka_wire.connect(via.bootstrap) as conn:
        return conn.metadata([topic]).topics[0].topic_id


def forged_fetch(address: str, topic: str, tid, offset: int, replica_id: int, leader_epoch: int,
                 replica_epoch: int | None = None) -> ErrorCode:
    """A follower's Fetch of partition 0 as any client can send it: v11 with `replica_id` when no
    broker epoch is given, else v15 with ReplicaState(replica_id, replica_epoch). Sessionless."""
    common = dict(max_wait=datetime.timedelta(0), min_bytes=i32(0), max_bytes=i32(1 << 20), isolation_level=0,
                  session_id=i32(0), session_epoch=i32(-1), forgotten_topics_data=(), rack_id="")
    if replica_epoch is None:
        from kio.schema.fetch.v11 import request as m

        req = m.FetchRequest(replica_id=i32(replica_id), topics=(m.FetchTopic(topic=topic, partitions=(
            m.FetchPartition(partition=i32(0), current_leader_epoch=i32(leader_epoch), fetch_offset=i64(offset),
                             log_start_offset=i64(0), partition_max_bytes=i32(1 << 20)),)),), **common)
    else:
        from kio.schema.fetch.v15 import request as m

        req = m.FetchRequest(replica_state=m.ReplicaState(replica_id=i32(replica_id), replica_epoch=i64(replica_epoch)),
                             topics=(m.FetchTopic(topic_id=tid, partitions=(
                                 m.FetchPartition(partition=i32(0), current_leader_epoch=i32(leader_epoch),
                                                  fetch_offset=i64(offset), log_start_offset=i64(0),
                                                  partition_max_bytes=i32(1 << 20)),)),), **common)
    with kafka_wire.KafkaConnection(address) as conn:
        resp = exchange(conn, req).response
    return ErrorCode(resp.responses[0].partitions[0].error_code)


def high_watermark(broker: ClusterBroker, topic: str) -> int:
    with kafka_wire.connect(broker.bootstrap) as conn:
        return conn.list_offsets(topic, 0, -1)


def live_epoch(fleet: BrokerCluster, kube_env, namespace: str, node_id: int) -> int:
    """The broker epoch of a broker's live registration, from its Lease's holder (the incarnation)."""
    holder = kube_env.kubectl("-n", namespace, "get", "lease", f"{fleet.name}-broker-{node_id}",
                              "-o", "jsonpath={.spec.holderIdentity}").stdout.strip()
    assert holder, f"broker {node_id} has no Lease holder"
    return broker_epoch(BrokerRegistration(node_id=node_id, incarnation=holder, endpoints=()))


@pytest.mark.timeout(300)
def test_forged_follower_fetches_move_neither_the_high_watermark_nor_the_isr(fleet, kube_env, kube_namespace):
    topic = create_topic(fleet.brokers[0], 1, configs={"min.insync.replicas": "2"}, prefix="forged")
    leader_id, epoch, _ = wait_isr(fleet.brokers[0], topic, {1, 2, 3})
    leader = fleet.broker(leader_id)
    frozen, dead = [b for b in fleet.brokers if b is not leader]
    tid = topic_id(leader, topic)
    with kafka_wire.connect(leader.bootstrap) as conn:
        assert conn.produce(topic, 0, records_batch([b"a", b"b"]), acks=-1).error_code == ErrorCode.none

    # One follower stopped cleanly (its registration is gone, the controller takes it out of the
    # ISR), the other frozen: still registered and in the ISR, but fetching nothing.
    dead_epoch = live_epoch(fleet, kube_env, kube_namespace, dead.node_id)
    dead.stop()
    wait_isr(leader, topic, {leader_id, frozen.node_id})
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        with kafka_wire.connect(leader.bootstrap) as conn:
            r = conn.produce(topic, 0, records_batch([b"not-replicated"]), acks=1)
            assert r.error_code == ErrorCode.none and int(r.base_offset) == 2
        assert high_watermark(leader, topic) == 2  # the frozen follower has not fetched it

        refused = ErrorCode.not_leader_or_follower
        for address in (leader.bootstrap, leader.replication):
            # the frozen follower's id, at the leader's log end: without a broker epoch, and with guesses
            assert forged_fetch(address, topic, tid, 3, frozen.node_id, epoch) == refused, address
            for guess in (0, 1, 2**62):
                assert forged_fetch(address, topic, tid, 3, frozen.node_id, epoch, guess) == refused, (address, guess)
            # the stopped broker's id: it has no live registration to be believed from
            assert forged_fetch(address, topic, tid, 3, dead.node_id, epoch) == refused, address
            assert forged_fetch(address, topic, tid, 3, dead.node_id, epoch, dead_epoch) == refused, address
        assert high_watermark(leader, topic) == 2  # nothing acknowledged without replication
        assert state(leader, topic)[2] == {leader_id, frozen.node_id}  # the stopped broker is not in the ISR
    finally:
        os.kill(frozen.pid, signal.SIGCONT)

    # The real follower still replicates, and the restarted one rejoins in its new incarnation.
    wait_for("the resumed follower to move the high watermark to 3", lambda: high_watermark(leader, topic) == 3,
             timeout=60)
    assert state(leader, topic)[2] == {leader_id, frozen.node_id}
    dead.start()
    wait_isr(leader, topic, {1, 2, 3})

    # The broker epoch of a live registration is believed, on the inter-broker listener only.
    current = live_epoch(fleet, kube_env, kube_namespace, frozen.node_id)
    assert forged_fetch(leader.bootstrap, topic, tid, 3, frozen.node_id, epoch, current) == refused
    assert forged_fetch(leader.replication, topic, tid, 3, frozen.node_id, epoch, current) == ErrorCode.none
    # ...and a previous incarnation's is not: the restarted broker's old epoch is stale.
    assert live_epoch(fleet, kube_env, kube_namespace, dead.node_id) != dead_epoch
    assert forged_fetch(leader.replication, topic, tid, 3, dead.node_id, epoch, dead_epoch) == refused
