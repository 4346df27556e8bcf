"""Followers whose logs no longer line up with their leader's come back by themselves (issue 18,
items 4 and 5), on three broker processes with their metadata in the test API server:

- a follower that was down while the leader's retention removed everything it held, or that
  starts on an empty volume after retention moved the leader's log start, starts its log afresh
  at the leader's log start (Kafka's handleOutOfRangeError) instead of being refused
  OFFSET_OUT_OF_RANGE for ever;
- a former leader whose log diverged from the new leader's in two epochs (two unclean elections)
  truncates through both (KIP-279's repeated OffsetForLeaderEpoch) and ends byte-identical.

    pytest -m kube tests/e2e/test_follower_catch_up.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.test_replication import (create_topic, fetch_values, leader_of, partition_states, records_batch,
                                        segment_bytes, wait_isr, wait_replicas_identical)
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster, ClusterBroker
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("replication on a Flotilla cluster on Kubernetes metadata"),
]

# Followers fetch one batch at a time (replica.fetch.max.bytes below two batches), so every replica
# rolls its segments at the same offsets as the leader and retention leaves the same files.
VALUE = b"v" * 150
OVERRIDES = {"replica.lag.time.max.ms": "4000", "replica.fetch.backoff.ms": "200",
             "replica.fetch.max.bytes": "300", "log.retention.check.interval.ms": "300"}
SMALL_SEGMENTS = {"segment.bytes": "1000", "retention.bytes": "2500"}


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        yield c


def write(broker: ClusterBroker, topic: str, start: int, count: int) -> None:
    """`count` one-record batches, acks=1 (a stopped follower must not hold them up)."""
    with kafka_wire.connect(broker.bootstrap) as conn:
        for i in range(start, start + count):
            r = conn.produce(topic, 0, records_batch([b"%06d-" % i + VALUE]), acks=1)
            assert int(r.error_code) == 0, r


def log_start(broker: ClusterBroker, topic: str) -> int:
    with kafka_wire.connect(broker.bootstrap) as conn:
        return conn.list_offsets(topic, 0, -2)


def segment_names(broker: ClusterBroker, topic: str) -> list[str]:
    return sorted(p.name for p in (Path(broker.log_dirs) / f"{topic}-0").glob("*.log"))


def rejoined(cluster: BrokerCluster, topic: str, follower: ClusterBroker, leader: ClusterBroker, total: int) -> None:
    """The follower is back in the ISR with the leader's bytes from the leader's log start on."""
    wait_isr(cluster, topic, 1, {1, 2, 3}, timeout=60)
    wait_replicas_identical(cluster, topic, 1)
    start = log_start(leader, topic)
    assert segment_names(follower, topic)[0] == f"{start:020d}.log"
    assert segment_names(follower, topic) == segment_names(leader, topic)
    assert read_from(leader, topic, start, total) == [b"%06d-" % i + VALUE for i in range(start, total)]


def read_from(broker: ClusterBroker, topic: str, start: int, end: int) -> list[bytes]:
    """Record values from `start` to `end` (a fetch answers from one segment at a time)."""
    values: list[bytes] = []
    with kafka_wire.connect(broker.bootstrap) as conn:
        while start + len(values) < end:
            got = fetch_values(conn, topic, 0, start + len(values))
            assert got, f"nothing at offset {start + len(values)} of {topic}-0 on broker {broker.node_id}"
            values += got
    return values


@pytest.mark.timeout(300)
def test_a_follower_back_after_retention_passed_it_starts_at_the_leaders_log_start(cluster):
    topic = create_topic(cluster.brokers[0], 1, configs=SMALL_SEGMENTS, prefix="behind")
    cluster.wait_leaders(topic, 1)
    wait_isr(cluster, topic, 1, {1, 2, 3})
    leader = cluster.broker(leader_of(cluster, topic, 0))
    follower = next(b for b in cluster.brokers if b is not leader)
    write(leader, topic, 0, 10)
    wait_replicas_identical(cluster, topic, 1)
    follower.stop()
    held = len(segment_bytes(follower, topic, 0))
    assert held > 0
    write(leader, topic, 10, 60)
    # Retention on the leader removed every offset the stopped follower holds.
    start = wait_for("the leader's log start to pass offset 10", lambda: (
        lambda s: s if s > 10 else None)(log_start(leader, topic)), timeout=60)
    follower.start()
    cluster.wait_formed(timeout=90)
    rejoined(cluster, topic, follower, leader, 70)
    assert "below the leader's log start" in follower.log_text(), follower.log_tail()
    assert start <= log_start(leader, topic)


@pytest.mark.timeout(300)
def test_a_follower_on_an_empty_volume_starts_at_the_leaders_log_start(cluster):
    topic = create_topic(cluster.brokers[0], 1, configs=SMALL_SEGMENTS, prefix="empty")
    cluster.wait_leaders(topic, 1)
    wait_isr(cluster, topic, 1, {1, 2, 3})
    leader = cluster.broker(leader_of(cluster, topic, 0))
    follower = next(b for b in cluster.brokers if b is not leader)
    write(leader, topic, 0, 60)
    wait_for("the leader's log start to move past 0", lambda: log_start(leader, topic) > 0, timeout=60)
    wait_replicas_identical(cluster, topic, 1)
    follower.stop()
    data = Path(follower.log_dirs)
    for p in data.iterdir():  # the volume replaced by an empty one
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    follower.start()
    cluster.wait_formed(timeout=90)
    rejoined(cluster, topic, follower, leader, 60)
    assert "below the leader's log start" in follower.log_text(), follower.log_tail()


@pytest.mark.timeout(420)
def test_a_former_leader_diverged_in_two_epochs_truncates_through_both(cluster):
    """Two unclean elections: A (the first leader) takes acks=1 writes after B stopped, then dies;
    B returns alone and is elected (epoch 1), writes, dies; A returns alone and is elected
    (epoch 2), writes, dies; B returns (epoch 3) and writes; A returns as B's follower. A's log
    holds epochs 0 and 2, B's 0, 1 and 3: the first OffsetForLeaderEpoch answer (epoch 1) is an
    epoch A lacks, so A cuts back to its epoch 0 and asks again, then truncates to the end of
    the records both had. With one round A kept its unreplicated epoch-0 records."""
    topic = create_topic(cluster.brokers[0], 1, rf=2, configs={"unclean.leader.election.enable": "true"},
                         prefix="twice")
    cluster.wait_leaders(topic, 1)
    _, _, replicas, _ = partition_states(cluster, topic)[0]
    wait_isr(cluster, topic, 1, set(replicas))
    a = cluster.broker(leader_of(cluster, topic, 0))
    b = cluster.broker(next(r for r in replicas if r != a.node_id))
    third = next(x for x in cluster.brokers if x.node_id not in replicas)

    def produce(broker, values, acks):
        """Written once the broker has taken up leadership (a new leader may answer
        NOT_LEADER_OR_FOLLOWER until it has opened the partition)."""
        last = [None]

        def written():
            with kafka_wire.connect(broker.bootstrap) as conn:
                last[0] = conn.produce(topic, 0, records_batch(values), acks=acks)
            return int(last[0].error_code) == 0
        try:
            wait_for(f"broker {broker.node_id} to take {values}", written, timeout=60)
        except BaseException:
            raise AssertionError(f"broker {broker.node_id} never took {values}; last answer: {last[0]}") from None

    def led_by(broker) -> None:
        wait_for(f"{topic}-0 led by broker {broker.node_id}", lambda: (
            partition_states(cluster, topic, third)[0][0] == broker.node_id), timeout=90)

    def offline() -> None:
        wait_for(f"{topic}-0 without a leader", lambda: partition_states(cluster, topic, third)[0][0] == -1,
                 timeout=90)

    for i in range(4):
        produce(a, [b"common-%d" % i], acks=-1)
    wait_replicas_identical_pair(a, b, topic)
    b.kill9()
    wait_isr(cluster, topic, 1, {a.node_id}, timeout=60)
    for i in range(3):
        produce(a, [b"a0-%d" % i], acks=1)  # epoch 0, never replicated
    a.kill9()
    offline()
    b.start()
    led_by(b)  # unclean: epoch 1
    for i in range(3):
        produce(b, [b"b1-%d" % i], acks=1)
    b.kill9()
    offline()
    a.start()
    led_by(a)  # unclean: epoch 2
    for i in range(2):
        produce(a, [b"a2-%d" % i], acks=1)
    a.kill9()
    offline()
    b.start()
    led_by(b)  # unclean: epoch 3
    for i in range(2):
        produce(b, [b"b3-%d" % i], acks=1)
    a.start()
    cluster.wait_formed(timeout=90)
    wait_isr(cluster, topic, 1, {a.node_id, b.node_id}, timeout=90)
    wait_replicas_identical_pair(a, b, topic)
    values = read_from(b, topic, 0, 9)
    assert values == [b"common-%d" % i for i in range(4)] + [b"b1-%d" % i for i in range(3)] + \
        [b"b3-%d" % i for i in range(2)]
    text = a.log_text()
    assert "asking again" in text and "truncating from 7 to 4" in text, a.log_tail()


def wait_replicas_identical_pair(x: ClusterBroker, y: ClusterBroker, topic: str) -> None:
    wait_for(f"brokers {x.node_id} and {y.node_id} to hold the same bytes of {topic}-0",
             lambda: segment_bytes(x, topic, 0) == segment_bytes(y, topic, 0), timeout=60, interval=0.5)
