"""Manual replica assignments (CreateTopics' `assignments`, CreatePartitions' `assignments`, as
`kafka-topics.sh --replica-assignment` sends them): Kafka's checks and its words, and the first
state of a partition placed by hand. Pure functions, no I/O.

Kafka's controller (ReplicationControlManager) checks, in this order: for CreateTopics, that
num_partitions and replication_factor are -1 (INVALID_REQUEST), then per entry that its partition
index is not given twice, that the replica list is not empty, that every broker is registered and
none appears twice (brokers looked at in id order, so the smallest offending id is named), that
every list is as long as the ones before it, and that at least one of its brokers is active (not
fenced, not shutting down); finally that the indexes are 0, 1, 2, ... For CreatePartitions, that
there is one list per new partition and each is as long as the topic's replication factor. The
first replica is the preferred leader; the ISR is the active replicas, led by the first of them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from broker.controller.assignment import NO_LEADER
from broker.metadata.store import PartitionState


class ManualAssignmentError(ValueError):
    """A manual assignment Kafka refuses; `code` is the Kafka error name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_replicas(replicas: Sequence[int], registered: Collection[int], replication_factor: int | None) -> tuple[int, ...]:
    """One partition's replica list (Kafka's validateManualPartitionAssignment)."""
    if not replicas:
        raise ManualAssignmentError("invalid_replica_assignment",
                                    "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker in sorted(replicas):
        if broker not in registered:
            raise ManualAssignmentError("invalid_replica_assignment",
                                        f"The manual partition assignment includes broker {broker}, "
                                        "but no such broker is registered.")
        if broker == previous:
            raise ManualAssignmentError("invalid_replica_assignment",
                                        f"The manual partition assignment includes the broker {broker} more than once.")
        previous = broker
    if replication_factor is not None and len(replicas) != replication_factor:
        raise ManualAssignmentError("invalid_replica_assignment",
                                    f"The manual partition assignment includes a partition with {len(replicas)} "
                                    "replica(s), but this is not consistent with previous partitions, which have "
                                    f"{replication_factor} replica(s).")
    return tuple(int(b) for b in replicas)


def _check_active(replicas: Sequence[int], active: Collection[int], index: int) -> None:
    if not any(b in active for b in replicas):
        raise ManualAssignmentError("invalid_replica_assignment",
                                    "All brokers specified in the manual partition assignment for partition "
                                    f"{index} are fenced or in controlled shutdown.")


def for_new_topic(entries: Sequence[tuple[int, Sequence[int]]], num_partitions: int, replication_factor: int,
                  registered: Collection[int], active: Collection[int]) -> tuple[tuple[int, ...], ...]:
    """CreateTopics: (partition index, broker ids) entries -> replicas per partition, in index order."""
    if replication_factor != -1:
        raise ManualAssignmentError("invalid_request", "A manual partition assignment was specified, "
                                                       "but replication factor was not set to -1.")
    if num_partitions != -1:
        raise ManualAssignmentError("invalid_request", "A manual partition assignment was specified, "
                                                       "but numPartitions was not set to -1.")
    placed: dict[int, tuple[int, ...]] = {}
    factor = None
    for index, brokers in entries:
        if index in placed:
            raise ManualAssignmentError("invalid_replica_assignment",
                                        f"Found multiple manual partition assignments for partition {index}")
        placed[index] = check_replicas(brokers, registered, factor)
        factor = len(brokers)
        _check_active(brokers, active, index)
    if any(i not in placed for i in range(len(placed))):
        raise ManualAssignmentError("invalid_replica_assignment",
                                    "partitions should be a consecutive 0-based integer sequence")
    return tuple(placed[i] for i in range(len(placed)))


def for_new_partitions(lists: Sequence[Sequence[int]], first_index: int, adding: int, replication_factor: int,
                       registered: Collection[int], active: Collection[int]) -> tuple[tuple[int, ...], ...]:
    """CreatePartitions: one broker list per new partition (indexes first_index, first_index+1, ...)."""
    if len(lists) != adding:
        raise ManualAssignmentError("invalid_replica_assignment",
                                    f"Attempted to add {adding} additional partition(s), but only {len(lists)} "
                                    "assignment(s) were specified.")
    out = []
    for i, brokers in enumerate(lists):
        out.append(check_replicas(brokers, registered, replication_factor))
        _check_active(brokers, active, first_index + i)
    return tuple(out)


def first_state(replicas: Sequence[int], active: Collection[int]) -> PartitionState:
    """A partition placed by hand: the ISR is its active replicas (all of them if none is: it is
    offline until one returns), led by the first of them at epoch 0."""
    isr = tuple(b for b in replicas if b in active)
    leader = isr[0] if isr else NO_LEADER
    return PartitionState(leader=leader, leader_epoch=0, replicas=tuple(replicas), isr=isr or tuple(replicas))
