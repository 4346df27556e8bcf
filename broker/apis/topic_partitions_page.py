"""One page of DescribeTopicPartitions (KIP-966), as Kafka's KRaftMetadataCache.describeTopicResponse:
topics in name order from the cursor's topic (its partitions from the cursor's index), at most
`limit` partitions in all; the next cursor points at the first partition left out (a topic's
first partition when the limit ran out exactly at a topic's end). Pure: the handler builds the
answer from it.

Replica sets come from `reported_replicas`: during a partition reassignment Kafka reports the
replicas as the full set, the target's replicas (the adding ones among them) followed by the
removing ones, which is how PartitionState.replicas holds them (controller/reassignment.py).
Neither DescribeTopicPartitions nor Metadata has fields for the adding/removing sets: clients
(`kafka-topics.sh --describe`) ask ListPartitionReassignments for those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from kio.schema.errors import ErrorCode

from broker.controller.assignment import NO_LEADER
from broker.metadata.store import MetadataImage, PartitionState, TopicRecord


@dataclass(frozen=True)
class PartitionRow:
    index: int
    error: ErrorCode
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


@dataclass(frozen=True)
class TopicRow:
    name: str
    error: ErrorCode
    record: TopicRecord | None
    partitions: tuple[PartitionRow, ...] = ()


@dataclass(frozen=True)
class Page:
    topics: tuple[TopicRow, ...]
    next_cursor: tuple[str, int] | None


def reported_replicas(state: PartitionState) -> tuple[int, ...]:
    """The replica set Kafka reports for a partition: during a reassignment the target (adding
    replicas included) and then the removing replicas, as Kafka's PartitionRegistration.replicas."""
    return tuple(state.replicas)


def partition_row(image: MetadataImage, index: int, state: PartitionState) -> PartitionRow:
    live = image.brokers
    replicas = reported_replicas(state)
    offline = tuple(r for r in replicas if r not in live)
    if state.leader == NO_LEADER or state.leader not in live:
        return PartitionRow(index, ErrorCode.leader_not_available, NO_LEADER, state.leader_epoch,
                            replicas, tuple(state.isr), offline)
    return PartitionRow(index, ErrorCode.none, state.leader, state.leader_epoch, replicas, tuple(state.isr), offline)


def page(image: MetadataImage, names: Iterable[str], cursor: tuple[str, int] | None, limit: int,
         all_topics: bool, name_error) -> Page:
    """`names`: the topics asked for (or all, `all_topics`), at or after the cursor's topic;
    `name_error(name)`: the error of a topic the image lacks (UNKNOWN_TOPIC_OR_PARTITION or
    INVALID_TOPIC_EXCEPTION); such topics are left out when all topics were asked for."""
    remaining = limit
    rows: list[TopicRow] = []
    for name in sorted(set(names)):
        if remaining <= 0:
            return Page(tuple(rows), (name, 0))
        record = image.topics.get(name)
        if record is None:
            if not all_topics:
                rows.append(TopicRow(name, name_error(name), None))
            continue
        assignment = record.assignment
        if assignment is None:  # not assigned by the controller yet: as Metadata, clients retry
            rows.append(TopicRow(name, ErrorCode.leader_not_available, record))
            continue
        start = cursor[1] if cursor is not None and name == cursor[0] else 0
        count = min(record.partitions, len(assignment))
        upper = min(count, start + remaining)
        parts = tuple(partition_row(image, i, assignment[i]) for i in range(start, upper))
        rows.append(TopicRow(name, ErrorCode.none, record, parts))
        if upper < count:
            return Page(tuple(rows), (name, upper))
        remaining -= len(parts)
    return Page(tuple(rows), None)
