"""Committed offsets are replicated writes (issue 11): an OffsetCommit is answered only once the
in-sync replicas of its `__consumer_offsets` partition hold it, as Kafka's coordinator appends
with acks=all, so an acknowledged commit survives a kill -9 of its coordinator's broker. So are
the group's other records (issue 18, item 13): a SyncGroup's assignment and a DeleteGroups'
tombstones; a write the replicas cannot take answers COORDINATOR_NOT_AVAILABLE, as Kafka maps it.

Three broker processes on the test API server, offsets.topic.replication.factor=3.
"""

from __future__ import annotations

import datetime
import os
import signal
import time

import pytest
from kio.schema.errors import ErrorCode

from tests.e2e.test_cluster import coordinator_of
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("replication on a Flotilla cluster on Kubernetes metadata"),
]

COMMIT_TIMEOUT_MS = 3000
OVERRIDES = {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "6",
             "min.insync.replicas": "2", "offsets.commit.timeout.ms": str(COMMIT_TIMEOUT_MS),
             "replica.lag.time.max.ms": "60000", "replica.fetch.backoff.ms": "200"}


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        yield c


def commit(bootstrap: str, group: str, topic: str, offset: int) -> ErrorCode:
    from kio.schema.offset_commit.v8.request import (OffsetCommitRequest, OffsetCommitRequestPartition,
                                                     OffsetCommitRequestTopic)
    from kio.static.primitive import i32, i64

    with kafka_wire.connect(bootstrap, timeout=30) as conn:
        resp = conn.request(OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
            topics=(OffsetCommitRequestTopic(name=topic, partitions=(OffsetCommitRequestPartition(
                partition_index=i32(0), committed_offset=i64(offset), committed_leader_epoch=i32(-1),
                committed_metadata=""),)),)))
    return resp.topics[0].partitions[0].error_code


def committed(bootstrap: str, group: str, topic: str) -> tuple[ErrorCode, int]:
    from kio.schema.offset_fetch.v8.request import (OffsetFetchRequest, OffsetFetchRequestGroup,
                                                    OffsetFetchRequestTopics)

    with kafka_wire.connect(bootstrap) as conn:
        resp = conn.request(OffsetFetchRequest(require_stable=False, groups=(OffsetFetchRequestGroup(
            group_id=group, topics=(OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)),)))
    g = resp.groups[0]
    if g.error_code != ErrorCode.none:
        return g.error_code, -1
    return g.topics[0].partitions[0].error_code, int(g.topics[0].partitions[0].committed_offset)


def offsets_partition_state(cluster: BrokerCluster, group: str) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader, replicas, isr) of the group's __consumer_offsets partition."""
    from broker.coordinator.group import codec

    md = cluster.metadata(cluster.running()[0], ["__consumer_offsets"])
    parts = {int(p.partition_index): p for p in md.topics[0].partitions}
    p = parts[codec.partition_for(group, len(parts))]
    return int(p.leader_id), tuple(int(r) for r in p.replica_nodes), tuple(int(r) for r in p.isr_nodes)


def join_and_sync(bootstrap: str, group: str, assignment: bytes) -> tuple[ErrorCode, ErrorCode, str]:
    """A static member joins `group` and, as its leader, syncs `assignment` to itself:
    (JoinGroup error, SyncGroup error, member id)."""
    from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
    from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
    from kio.static.primitive import i32, i32Timedelta

    with kafka_wire.connect(bootstrap, timeout=60) as conn:
        joined = conn.request(JoinGroupRequest(
            group_id=group, session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), member_id="",
            group_instance_id="instance-1", protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b"meta"),)))
        if joined.error_code != ErrorCode.none:
            return joined.error_code, ErrorCode.none, ""
        synced = conn.request(SyncGroupRequest(
            group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
            group_instance_id="instance-1",
            assignments=(SyncGroupRequestAssignment(member_id=joined.member_id, assignment=assignment),)))
    return ErrorCode.none, synced.error_code, joined.member_id


def describe(bootstrap: str, group: str) -> tuple[ErrorCode, str, list[tuple[str, bytes]]]:
    """(error, state, [(member id, assignment)]) of `group`, as DescribeGroups tells it."""
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

    with kafka_wire.connect(bootstrap) as conn:
        g = conn.request(DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)).groups[0]
    return g.error_code, g.group_state, [(m.member_id, m.member_assignment) for m in g.members]


def delete_group(bootstrap: str, group: str) -> ErrorCode:
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest

    with kafka_wire.connect(bootstrap, timeout=30) as conn:
        return conn.request(DeleteGroupsRequest(groups_names=(group,))).results[0].error_code


def in_sync_coordinator(cluster: BrokerCluster, group: str):
    """The group's coordinator and the other replicas of its offsets partition, once all in sync."""
    coordinator = coordinator_of(cluster.brokers[0].bootstrap, group)
    leader, replicas, _ = wait_for("the offsets partition fully in sync",
                                   lambda: (s := offsets_partition_state(cluster, group))[2] and
                                   len(s[2]) == 3 and s, timeout=60)
    assert leader == coordinator and len(replicas) == 3
    return cluster.broker(coordinator), [cluster.broker(n) for n in replicas if n != coordinator]


def new_coordinator(cluster: BrokerCluster, group: str, old: int):
    """After a kill -9 of broker `old`: the group's new coordinator."""
    survivor = next(b for b in cluster.brokers if b.node_id != old)
    new = wait_for("a new coordinator", lambda: (n := coordinator_of(survivor.bootstrap, group)) != old
                   and n, timeout=60)
    return cluster.broker(new)


def test_a_commit_is_acknowledged_only_once_its_replicas_hold_it(cluster):
    via = cluster.brokers[0]
    topic = kafka_wire.unique_topic("committed")
    with kafka_wire.connect(via.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1, replication_factor=3)) == 0
    group = kafka_wire.unique_topic("g")
    coord, followers = in_sync_coordinator(cluster, group)
    coordinator = coord.node_id

    # Followers frozen: the commit is in the coordinator's log but not in its replicas', so it is
    # not acknowledged (offsets.commit.timeout.ms), and OffsetFetch does not show it.
    for f in followers:
        os.kill(f.pid, signal.SIGSTOP)
    started = time.monotonic()
    try:
        code = commit(coord.bootstrap, group, topic, 41)
    finally:
        for f in followers:
            os.kill(f.pid, signal.SIGCONT)
    assert code == ErrorCode.coordinator_not_available, code  # REQUEST_TIMED_OUT, as Kafka 4.1 maps it
    assert time.monotonic() - started >= COMMIT_TIMEOUT_MS / 1000 * 0.9
    assert committed(coord.bootstrap, group, topic) == (ErrorCode.none, -1)

    # With the replicas back, a commit is acknowledged, and survives its coordinator's kill -9.
    wait_for("an acknowledged commit", lambda: commit(coord.bootstrap, group, topic, 42) == ErrorCode.none,
             timeout=60)
    coord.kill9()
    survivor = next(b for b in cluster.brokers if b.node_id != coordinator)
    new = wait_for("a new coordinator", lambda: (n := coordinator_of(survivor.bootstrap, group)) != coordinator
                   and n, timeout=60)
    assert wait_for("the commit at the new coordinator", lambda: (r := committed(cluster.broker(new).bootstrap,
                                                                                 group, topic))[0]
                    == ErrorCode.none and r, timeout=60) == (ErrorCode.none, 42)


def test_an_assignment_is_answered_only_once_its_replicas_hold_it(cluster):
    group = kafka_wire.unique_topic("g")
    coord, followers = in_sync_coordinator(cluster, group)

    # Followers frozen: the leader's SyncGroup appends the assignment, which the replicas cannot
    # take; it answers COORDINATOR_NOT_AVAILABLE (not the assignment) and the group rebalances.
    for f in followers:
        os.kill(f.pid, signal.SIGSTOP)
    try:
        joined, synced, _ = join_and_sync(coord.bootstrap, group, b"frozen")
    finally:
        for f in followers:
            os.kill(f.pid, signal.SIGCONT)
    assert (joined, synced) == (ErrorCode.none, ErrorCode.coordinator_not_available)

    # With the replicas back, an acknowledged assignment survives its coordinator's kill -9.
    member = wait_for("an acknowledged assignment",
                      lambda: (r := join_and_sync(coord.bootstrap, group, b"held"))[:2]
                      == (ErrorCode.none, ErrorCode.none) and r[2], timeout=60)
    coord.kill9()
    new = new_coordinator(cluster, group, coord.node_id)
    assert wait_for("the group at the new coordinator",
                    lambda: (d := describe(new.bootstrap, group))[0] == ErrorCode.none and d, timeout=60) == (
        ErrorCode.none, "Stable", [(member, b"held")])


def test_a_group_deletion_is_answered_only_once_its_replicas_hold_it(cluster):
    via = cluster.brokers[0]
    topic = kafka_wire.unique_topic("deleted")
    with kafka_wire.connect(via.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1, replication_factor=3)) == 0
    group = kafka_wire.unique_topic("g")
    coord, followers = in_sync_coordinator(cluster, group)
    wait_for("an acknowledged commit", lambda: commit(coord.bootstrap, group, topic, 42) == ErrorCode.none,
             timeout=60)

    # Followers frozen: the tombstones are in the coordinator's log only, so the deletion is not
    # acknowledged and the group keeps its offsets.
    for f in followers:
        os.kill(f.pid, signal.SIGSTOP)
    try:
        code = delete_group(coord.bootstrap, group)
    finally:
        for f in followers:
            os.kill(f.pid, signal.SIGCONT)
    assert code == ErrorCode.coordinator_not_available, code
    assert committed(coord.bootstrap, group, topic) == (ErrorCode.none, 42)

    # With the replicas back, an acknowledged deletion survives its coordinator's kill -9.
    wait_for("an acknowledged deletion", lambda: delete_group(coord.bootstrap, group) in (
        ErrorCode.none, ErrorCode.group_id_not_found), timeout=60)
    coord.kill9()
    new = new_coordinator(cluster, group, coord.node_id)
    assert wait_for("the deleted group's offsets at the new coordinator",
                    lambda: (r := committed(new.bootstrap, group, topic))[0] == ErrorCode.none and r,
                    timeout=60) == (ErrorCode.none, -1)
