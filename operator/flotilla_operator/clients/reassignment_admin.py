"""The Kafka requests the rebalancer makes (builders/rebalance.py decides, reconcilers/rebalance.py
runs it), on kafka_admin's kio connection: the requests `kafka-reassign-partitions.sh` and
`kafka-leader-election.sh` send, so a rebalance looks to the cluster like an admin with Kafka's
tools at work (and `kafka-reassign-partitions.sh --list` shows what the operator started).

- `cluster_view`: Metadata of every topic (replicas, leaders, registered brokers, the controller)
  and ListPartitionReassignments (what is moving now: the controller holds it, so the operator
  needs no memory of its own across restarts);
- `alter_reassignments`: AlterPartitionReassignments (a target, or None to cancel);
- `elect_preferred`: ElectLeaders PREFERRED;
- `alter_configs`: IncrementalAlterConfigs (the KIP-73 throttles);
- `partition_sizes`: DescribeLogDirs of every broker (the bytes a plan moves).

The controller-only requests go to the controller Metadata names; the others to the bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .kafka_admin import PLAINTEXT, AdminAuth, AdminError, bootstrap_request, request

Partition = tuple[str, int]

#: IncrementalAlterConfigs operations and resource types (Kafka's numbers).
SET, DELETE = 0, 1
TOPIC, BROKER = 2, 4
#: ElectLeaders: PREFERRED; errors that mean "nothing to do".
PREFERRED = 0
ELECTION_NOT_NEEDED = 84
NOT_CONTROLLER = 41


@dataclass(frozen=True)
class Reassignment:
    """One in-flight reassignment as the controller lists it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


@dataclass(frozen=True)
class ClusterView:
    """What the cluster says now."""

    brokers: dict[int, str]  # node id -> host:port
    racks: dict[int, str]
    controller: int
    replicas: dict[Partition, tuple[int, ...]]  # as Metadata lists them (target + removing while moving)
    leaders: dict[Partition, int]
    reassigning: dict[Partition, Reassignment] = field(default_factory=dict)
    auth: AdminAuth = PLAINTEXT  # how every request of this view authenticates (the operator's user)

    def controller_address(self) -> str:
        return _controller_address(self.brokers, self.controller)


def _addresses(md) -> dict[int, str]:
    """node id -> host:port of every broker a Metadata answer lists."""
    return {int(b.node_id): f"{b.host}:{int(b.port)}" for b in md.brokers}


def _controller_address(brokers: Mapping[int, str], controller: int) -> str:
    if controller not in brokers:
        raise AdminError(f"no controller in the cluster's Metadata (controller id {controller})")
    return brokers[controller]


def _check(name: str, code: int, message: str | None, what: str = "") -> None:
    if int(code) != 0:
        raise AdminError(f"{name}{' ' + what if what else ''}: error {int(code)}{': ' + message if message else ''}")


async def cluster_view(bootstrap: str, auth: AdminAuth = PLAINTEXT) -> ClusterView:
    """The controller's in-flight reassignments, then Metadata of every topic from the same
    broker: one broker's image, read in that order, so that a partition the list leaves out
    shows its finished replica set. (Metadata from another broker may lag the controller by a
    moment: a move the controller just finished would still list the removed replica there, and
    the rebalance would take the partition for one with a replica more; the CI run of 91db7ac
    planned __consumer_offsets partitions at four replicas that way.)"""
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

    first = await bootstrap_request(bootstrap, _metadata(()), auth)
    controller = _controller_address(_addresses(first), int(first.controller_id))
    resp = await request(controller, ListPartitionReassignmentsRequest(topics=None), auth=auth)
    _check("ListPartitionReassignments", resp.error_code, resp.error_message)
    reassigning = {(str(t.name), int(p.partition_index)): Reassignment(
        tuple(int(r) for r in p.replicas), tuple(int(r) for r in p.adding_replicas),
        tuple(int(r) for r in p.removing_replicas)) for t in resp.topics for p in t.partitions}
    md = await request(controller, _metadata(None), auth=auth)
    brokers = _addresses(md)
    racks = {int(b.node_id): b.rack for b in md.brokers if b.rack}
    replicas: dict[Partition, tuple[int, ...]] = {}
    leaders: dict[Partition, int] = {}
    for t in md.topics:
        if int(t.error_code) != 0 or t.name is None:
            continue
        for p in t.partitions:
            key = (str(t.name), int(p.partition_index))
            replicas[key] = tuple(int(r) for r in p.replica_nodes)
            leaders[key] = int(p.leader_id)
    return ClusterView(brokers, racks, int(md.controller_id), replicas, leaders, reassigning, auth=auth)


def _metadata(topics):
    from kio.schema.metadata.v12.request import MetadataRequest

    return MetadataRequest(topics=topics, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def _by_topic(partitions: Mapping[Partition, object] | Sequence[Partition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, index in partitions:
        out.setdefault(topic, []).append(index)
    return {t: sorted(ps) for t, ps in sorted(out.items())}


async def alter_reassignments(view: ClusterView, targets: Mapping[Partition, Sequence[int] | None]) -> dict[Partition, str]:
    """Start (a target) or cancel (None) reassignments at the controller; the partitions the
    controller refused, with its message (the others are under way)."""
    from kio.schema.alter_partition_reassignments.v1.request import (AlterPartitionReassignmentsRequest,
                                                                     ReassignablePartition, ReassignableTopic)
    from kio.static.primitive import i32

    if not targets:
        return {}
    topics = tuple(ReassignableTopic(name=t, partitions=tuple(
        ReassignablePartition(partition_index=i32(p), replicas=None if targets[(t, p)] is None
                              else tuple(i32(r) for r in targets[(t, p)]))  # type: ignore[union-attr]
        for p in ps)) for t, ps in _by_topic(targets).items())
    # KIP-860: a rebalance never changes a replication factor; a target of another length (a view
    # that raced a finishing move) is refused by the controller, and the next step plans again.
    resp = await request(view.controller_address(), AlterPartitionReassignmentsRequest(
        topics=topics, allow_replication_factor_change=False), auth=view.auth)
    _check("AlterPartitionReassignments", resp.error_code, resp.error_message)
    return {(str(t.name), int(p.partition_index)): f"error {int(p.error_code)}: {p.error_message or ''}".rstrip(": ")
            for t in resp.responses for p in t.partitions if int(p.error_code) != 0}


async def elect_preferred(view: ClusterView, partitions: Sequence[Partition]) -> dict[Partition, str]:
    """ElectLeaders PREFERRED at the controller; the partitions that failed (ELECTION_NOT_NEEDED,
    the preferred leader already leads, is not a failure)."""
    from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
    from kio.static.primitive import i8, i32

    if not partitions:
        return {}
    req = ElectLeadersRequest(election_type=i8(PREFERRED), topic_partitions=tuple(
        TopicPartitions(topic=t, partitions=tuple(i32(p) for p in ps)) for t, ps in _by_topic(partitions).items()))
    resp = await request(view.controller_address(), req, auth=view.auth)
    _check("ElectLeaders", resp.error_code, None)
    return {(str(r.topic), int(p.partition_id)): f"error {int(p.error_code)}: {p.error_message or ''}".rstrip(": ")
            for r in resp.replica_election_results for p in r.partition_result
            if int(p.error_code) not in (0, ELECTION_NOT_NEEDED)}


async def alter_configs(bootstrap: str, cluster: ClusterView,
                        changes: Mapping[tuple[int, str], Mapping[str, str | None]]) -> None:
    """IncrementalAlterConfigs: per (resource type, name), SET a value or DELETE (None) each key;
    AdminError naming the first resource refused. A broker's own configs go to that broker, as
    Kafka's admin client sends them (a broker refuses another broker's id: INVALID_REQUEST); a
    broker the cluster no longer lists is skipped (nothing of it left to throttle); topics and the
    cluster default go to the bootstrap."""
    from kio.schema.incremental_alter_configs.v1.request import (AlterableConfig, AlterConfigsResource,
                                                                 IncrementalAlterConfigsRequest)
    from kio.static.primitive import i8

    by_address: dict[str | None, list] = {}
    for (rtype, name), keys in changes.items():
        address = None
        if rtype == BROKER and name:
            address = cluster.brokers.get(int(name))
            if address is None:
                continue
        by_address.setdefault(address, []).append(AlterConfigsResource(
            resource_type=i8(rtype), resource_name=name, configs=tuple(
                AlterableConfig(name=k, config_operation=i8(DELETE if v is None else SET), value=v)
                for k, v in keys.items())))
    for address, resources in by_address.items():
        req = IncrementalAlterConfigsRequest(resources=tuple(resources), validate_only=False)
        resp = await (bootstrap_request(bootstrap, req, cluster.auth) if address is None
                      else request(address, req, auth=cluster.auth))
        for r in resp.responses:
            kind = {TOPIC: "topic", BROKER: "broker"}.get(int(r.resource_type), str(int(r.resource_type)))
            _check("IncrementalAlterConfigs", r.error_code, r.error_message, f"{kind} {r.resource_name!r}")


async def partition_sizes(view: ClusterView) -> dict[Partition, int]:
    """The largest size of each partition's replicas (DescribeLogDirs of every broker); brokers
    that do not answer are skipped (sizes are an estimate for status, never a decision)."""
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest

    sizes: dict[Partition, int] = {}
    for address in view.brokers.values():
        try:
            resp = await request(address, DescribeLogDirsRequest(topics=None), auth=view.auth)
        except AdminError:
            continue
        for result in resp.results:
            for t in result.topics:
                for p in t.partitions:
                    key = (str(t.name), int(p.partition_index))
                    sizes[key] = max(sizes.get(key, 0), int(p.partition_size))
    return sizes
