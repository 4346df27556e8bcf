"""Answers that must not show uncommitted or stale data, on three brokers (issue 18, item 7).

One follower is frozen (SIGSTOP) while it is still in the ISR, so the high watermark stops:
- the leader tells consumers of no record past it: MAX_TIMESTAMP, whose record is not committed
  yet, answers no offset, as Kafka's ListOffsets does;
- the leader stops gracefully and the other follower, which has every record, takes over: its
  high watermark is below the start of its epoch, so `latest` (and MAX_TIMESTAMP) answer
  OFFSET_NOT_AVAILABLE (KIP-207) until the frozen follower is back and caught up, rather than
  an offset smaller than one a consumer may already have read;
- a consumer naming the old leader epoch is FENCED_LEADER_EPOCH there, one naming a later epoch
  UNKNOWN_LEADER_EPOCH (KIP-320).

Three broker processes on the test API server; long Leases and replica.lag.time.max.ms so the
frozen follower stays registered and in the ISR while it is stopped.
"""

from __future__ import annotations

import datetime
import os
import signal
import urllib.request

import pytest
from kio.schema.errors import ErrorCode

from tests.e2e.test_leader_epoch_checks import LATEST, MAX_TIMESTAMP, fetch, leader_epoch, list_offsets
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("replication on a Flotilla cluster on Kubernetes metadata"),
]

OVERRIDES = {"flotilla.metadata.lease.duration.ms": "60000", "replica.lag.time.max.ms": "60000",
             "replica.fetch.backoff.ms": "200", "offsets.topic.replication.factor": "1"}


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        yield c


class Seen:
    """What a wait last saw, true when it is what the wait wants (so a timeout names the value)."""

    def __init__(self, ok: bool, value: object) -> None:
        self.ok, self.value = ok, value

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return repr(self.value)


def follower_lag(broker, follower: int) -> float | None:
    """The leader `broker`'s flotilla_follower_max_lag_offsets for `follower`."""
    with urllib.request.urlopen(broker.metrics_url, timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(f'flotilla_follower_max_lag_offsets{{follower="{follower}"}} '):
                return float(line.rsplit(" ", 1)[1])
    return None


def partition_state(conn, topic: str) -> tuple[int, int, list[int], list[int]]:
    [p] = conn.metadata([topic]).topics[0].partitions
    return int(p.leader_id), int(p.leader_epoch), [int(r) for r in p.replica_nodes], [int(r) for r in p.isr_nodes]


def test_a_new_leader_with_a_lagging_high_watermark_tells_no_stale_offsets(cluster):
    topic = kafka_wire.unique_topic("stale")
    via = cluster.brokers[0]
    with kafka_wire.connect(via.bootstrap) as conn:
        # The broker frozen below must not be the controller: a frozen controller elects nobody
        # until its Lease (60 s here) runs out, and the stopped leader's partition would stay led by
        # no one who answers. The controller is the successor; the other two lead and freeze.
        controller = cluster.controller_id()
        leader_id, frozen_id = [b.node_id for b in cluster.brokers if b.node_id != controller]
        assert conn.create_topic(topic, assignment=[[leader_id, controller, frozen_id]]) == ErrorCode.none
        leader_id, first_epoch, replicas, _ = wait_for(
            "three replicas in sync", lambda: Seen(len((s := partition_state(conn, topic))[3]) == 3, s),
            timeout=60).value
    # the next leader is the first other replica in assignment order; the last one is frozen
    successor_id, frozen_id = [r for r in replicas if r != leader_id]
    leader, successor, frozen = (cluster.broker(n) for n in (leader_id, successor_id, frozen_id))
    t0 = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=1)
    late = t0 + datetime.timedelta(seconds=30)
    with kafka_wire.connect(leader.bootstrap) as conn:
        assert conn.produce(topic, 0, kafka_wire.build_batch([(None, b"a"), (None, b"b")], timestamp=t0)).error_code == 0
        assert list_offsets(conn, topic, LATEST) == (ErrorCode.none, 2, -1)  # acks=all: committed

    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        with kafka_wire.connect(leader.bootstrap) as conn:
            resp = conn.produce(topic, 0, kafka_wire.build_batch([(None, b"c")] * 3, timestamp=late), acks=1)
            assert (resp.error_code, int(resp.base_offset)) == (ErrorCode.none, 2)
            # offsets 2-4 are written, not committed: consumers are told of none of them
            assert list_offsets(conn, topic, LATEST)[:2] == (ErrorCode.none, 2)
            assert list_offsets(conn, topic, MAX_TIMESTAMP) == (ErrorCode.none, -1, -1)
            assert list_offsets(conn, topic, int(late.timestamp() * 1000)) == (ErrorCode.none, -1, -1)
        wait_for(f"follower {successor_id} holding all 5 records",
                 lambda: Seen((lags := (follower_lag(leader, successor_id), follower_lag(leader, frozen_id))) == (0, 3),
                              lags), timeout=60)

        leader.stop()  # graceful: its Lease goes at once, and the successor is elected
        with kafka_wire.connect(successor.bootstrap) as conn:
            new_epoch = wait_for(f"{successor_id} leading", lambda: Seen(
                (s := partition_state(conn, topic))[0] == successor_id, s), timeout=60).value[1]
            assert new_epoch > first_epoch
            # its epoch starts at 5; its high watermark is what the old leader had told it (2)
            assert list_offsets(conn, topic, LATEST)[0] == ErrorCode.offset_not_available
            assert list_offsets(conn, topic, MAX_TIMESTAMP)[0] == ErrorCode.offset_not_available
            assert list_offsets(conn, topic, LATEST, new_epoch)[0] == ErrorCode.offset_not_available
            # KIP-320: the consumer's leader epoch is checked before anything is read
            assert list_offsets(conn, topic, LATEST, first_epoch)[0] == ErrorCode.fenced_leader_epoch
            assert fetch(conn, topic, 0, first_epoch)[0] == ErrorCode.fenced_leader_epoch
            assert fetch(conn, topic, 0, new_epoch + 1)[0] == ErrorCode.unknown_leader_epoch
            code, hw, has_records = fetch(conn, topic, 0, new_epoch)
            assert code == ErrorCode.none and hw < 5 and has_records
    finally:
        os.kill(frozen.pid, signal.SIGCONT)

    with kafka_wire.connect(successor.bootstrap) as conn:
        wait_for("latest once the high watermark passed the epoch start",
                 lambda: Seen((r := list_offsets(conn, topic, LATEST))[:2] == (ErrorCode.none, 5), r), timeout=90)
        assert list_offsets(conn, topic, MAX_TIMESTAMP)[:2] == (ErrorCode.none, 2)
        assert leader_epoch(conn, topic) == new_epoch
