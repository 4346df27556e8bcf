"""The fleet under the faults real clusters meet (issue 18's "Done when"), one after another, on
three broker processes with their metadata in the test API server: RF=3, min.insync.replicas=2, an
idempotent acks=all producer and a reader running throughout.

Faults, each followed by recovery to a full ISR: kill -9 of a leader; kill -9 of the controller;
SIGSTOP of a leader for longer than its Lease; two brokers down at once; the API server stopped,
with a broker restarted while it is down. At the end: no acknowledged record lost or moved, no
duplicate, nothing the reader saw missing from the final log at that offset, and after a clean stop
every partition's replicas byte-identical.

These are process crashes and pauses, not power loss: data the kernel had accepted survives a
kill -9 even when it was never fsynced.

    pytest -m kube tests/e2e/test_fleet_faults.py
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tests.e2e.test_replication import (
    assert_identical_after_clean_stop, check_after_failovers, create_topic, leader_of, partition_states, producer,
    read_all, wait_isr)
from flotilla.testenv.brokers.cluster import LEASE_SETTINGS, BrokerCluster, ClusterBroker
from flotilla.testenv.waiting import wait_for
from tests.support.txn_workload import LogReader

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("faults of a Flotilla fleet on Kubernetes metadata"),
]

PARTITIONS = 6
LEASE_S = int(LEASE_SETTINGS["flotilla.metadata.lease.duration.ms"]) / 1000
OVERRIDES = {"replica.lag.time.max.ms": "4000", "replica.fetch.backoff.ms": "200",
             "min.insync.replicas": "2", "default.replication.factor": "3"}
ALL = {1, 2, 3}


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        yield c


class Writer(threading.Thread):
    """An idempotent acks=all producer writing increasing numbers round-robin over the partitions."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.unflushed = -1

    def run(self) -> None:
        p = producer(self.bootstrap, **{"message.timeout.ms": 180000})

        def report(err, msg) -> None:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), msg.value()))
            else:
                self.failed.append(str(err))
        i = 0
        while not self.stop.is_set():
            try:
                p.produce(self.topic, partition=i % PARTITIONS, value=f"{i:08d}".encode(), on_delivery=report)
            except BufferError:
                p.poll(0.1)
                continue
            i += 1
            p.poll(0.01)
        self.unflushed = p.flush(200)


def start_load(cluster: BrokerCluster, topic: str) -> tuple[Writer, LogReader]:
    """The idempotent acks=all writer and the reader of every partition, running."""
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers)
    writer, reader = Writer(bootstrap, topic), LogReader(bootstrap, topic, PARTITIONS, isolation="read_uncommitted")
    writer.start()
    reader.start()
    return writer, reader


def stop_load(writer: Writer, reader: LogReader) -> None:
    writer.stop.set()
    writer.join(240)
    reader.stop.set()
    reader.join(30)


def check_load(cluster: BrokerCluster, topic: str, writer: Writer, reader: LogReader, at_least: int, after: object,
               also=()) -> None:
    """The checker, after the load stopped: the writer finished with more than `at_least`
    acknowledged; every acknowledged record at its offset once (none lost, moved or duplicated);
    no offset ever held two records and everything the reader saw is still at its offset (no
    reads of truncated data); after a clean stop every replica byte-identical (of the topics
    `also` names too)."""
    assert not writer.is_alive() and writer.unflushed == 0, f"producer did not finish: {writer.unflushed}"
    assert len(writer.acked) > at_least, f"only {len(writer.acked)} acknowledged after {after}; {writer.failed[:5]}"
    final = read_all(cluster.bootstrap, topic, PARTITIONS, len(writer.acked), timeout=180)
    assert not reader.conflicts, f"an offset held two different records: {reader.conflicts[:5]}"
    assert reader.seen, "the reader read nothing"
    # what the reader was given is a snapshot: every offset it saw holds the same value at the end
    check_after_failovers(writer.acked, final, [reader.seen])
    assert_identical_after_clean_stop(cluster, topic, PARTITIONS, also)


def wait_recovered(cluster: BrokerCluster, topic: str, what: str) -> None:
    cluster.wait_formed(timeout=120)
    wait_isr(cluster, topic, PARTITIONS, ALL, timeout=120)


def wait_moved_off(cluster: BrokerCluster, topic: str, victims: set[int]) -> None:
    survivor = next(b for b in cluster.brokers if b.node_id not in victims)
    wait_for(f"leadership of {topic} to leave brokers {sorted(victims)}", lambda: (lambda s: all(
        st[0] >= 0 and st[0] not in victims for st in s.values()) and s)(
            partition_states(cluster, topic, survivor)), timeout=90, interval=0.25)


def pause(broker: ClusterBroker) -> None:
    os.kill(broker.pid, signal.SIGSTOP)


def resume(broker: ClusterBroker) -> None:
    os.kill(broker.pid, signal.SIGCONT)


@pytest.mark.timeout(1500)
def test_no_acknowledged_record_is_lost_or_moved_under_a_sequence_of_faults(cluster, kube_env):
    topic = create_topic(cluster.brokers[0], PARTITIONS)
    cluster.wait_leaders(topic, PARTITIONS)
    wait_isr(cluster, topic, PARTITIONS, ALL)
    writer, reader = start_load(cluster, topic)
    steps: list[str] = []
    try:
        time.sleep(2)
        # 1. kill -9 of a leader
        victim = cluster.broker(leader_of(cluster, topic, 0))
        victim.kill9()
        wait_moved_off(cluster, topic, {victim.node_id})
        victim.start()
        wait_recovered(cluster, topic, "after a leader's kill -9")
        steps.append(f"leader {victim.node_id} killed")

        # 2. kill -9 of the controller
        controller = cluster.broker(cluster.controller_id())
        controller.kill9()
        cluster.wait_formed(timeout=90, expect=[b.node_id for b in cluster.running()])
        controller.start()
        wait_recovered(cluster, topic, "after the controller's kill -9")
        steps.append(f"controller {controller.node_id} killed")

        # 3. SIGSTOP of a leader past its Lease, then SIGCONT
        victim = cluster.broker(leader_of(cluster, topic, 1))
        pause(victim)
        try:
            wait_moved_off(cluster, topic, {victim.node_id})
            time.sleep(LEASE_S)  # the paused leader is well past its Lease
        finally:
            resume(victim)
        wait_recovered(cluster, topic, "after a leader paused past its Lease")
        steps.append(f"leader {victim.node_id} paused")

        # 4. two brokers down at once
        a, b = [cluster.broker(n) for n in sorted(ALL - {cluster.controller_id()})]
        a.kill9()
        b.kill9()
        time.sleep(LEASE_S + 2)
        a.start()
        b.start()
        wait_recovered(cluster, topic, "after two brokers were down")
        steps.append(f"brokers {a.node_id} and {b.node_id} down together")

        # 5. the API server stopped; a broker restarted while it is down
        cp = kube_env.control_plane
        restarted = cluster.broker(leader_of(cluster, topic, 2))
        cp.stop_apiserver()
        try:
            restarted.kill9()
            restarter = threading.Thread(target=lambda: restarted.start(), daemon=True)
            restarter.start()  # it cannot register until the API server answers again
            time.sleep(20)
        finally:
            cp.start_apiserver()
        restarter.join(180)
        assert restarted.is_running(), restarted.log_tail()
        wait_recovered(cluster, topic, "after the API server outage")
        steps.append(f"API server stopped, broker {restarted.node_id} restarted meanwhile")
        time.sleep(2)
    finally:
        stop_load(writer, reader)
    check_load(cluster, topic, writer, reader, 500, steps)
