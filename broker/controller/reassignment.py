"""Partition reassignment (KIP-455) as the controller decides it: pure functions, no I/O.

A reassignment is state in the partition's record, not in the controller's memory, so it survives
a controller change (the next controller reads it from the store):
- `replicas` is the target's replicas followed by those being removed (Kafka's
  PartitionReassignmentReplicas), `adding` the target's replicas the partition did not have,
  `removing` the replicas the target drops. The target is `replicas - removing`, the original
  assignment `replicas - adding`.
- Starting one (`start`) only writes these sets: adding replicas open an empty log on their broker,
  follow the leader through the replica fetcher and are added to the ISR by the leader once caught
  up (replica/replica_state.py: at the high watermark and the leader's epoch start), like any
  follower. Until then they count neither in the ISR nor for acks=all.
- Once every target replica is in the ISR, `complete` writes the target as the replicas, the ISR
  without the removed replicas and, if the leader is being removed, a leader elected from the
  target's in-sync replicas. A completion that removes replicas bumps the leader epoch (Kafka's
  triggerLeaderEpochBumpForReplicaReassignmentIfNeeded), which fences the removed replicas. The
  removed replicas' brokers see they are no longer replicas only in the committed record, and then
  delete their logs (replica/replica_manager.py; Kafka's StopReplica with deletion).
- Cancelling (`cancel`) reverts to the original replicas: adding replicas leave the replica set and
  the ISR; if the ISR would be left empty, only an unclean election could revert, which is refused
  unless unclean.leader.election.enable.
- A new target while one is in progress starts from the current (full) replica set, as Kafka's
  controller does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from broker.controller.assignment import NO_LEADER
from broker.metadata.store import PartitionState


class ReassignmentError(ValueError):
    """A request Kafka refuses; `code` is the Kafka error name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def in_progress(state: PartitionState) -> bool:
    return bool(state.adding or state.removing)


def target(state: PartitionState) -> tuple[int, ...]:
    """The replicas the partition is moving to (its replicas when no reassignment is in progress)."""
    return tuple(r for r in state.replicas if r not in state.removing)


def original(state: PartitionState) -> tuple[int, ...]:
    """The replicas the partition had before the reassignment."""
    return tuple(r for r in state.replicas if r not in state.adding)


def validate_target(replicas: Sequence[int], registered: Collection[int]) -> tuple[int, ...]:
    """A requested replica list as Kafka's controller checks it (validateManualPartitionAssignment):
    not empty, no broker twice, every broker registered."""
    if not replicas:
        raise ReassignmentError("invalid_replica_assignment",
                                "The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for r in replicas:
        if r in seen:
            raise ReassignmentError("invalid_replica_assignment",
                                    f"The manual partition assignment includes the broker {r} more than once.")
        seen.add(r)
    for r in replicas:
        if r not in registered:
            raise ReassignmentError("invalid_replica_assignment",
                                    f"The manual partition assignment includes broker {r}, but no such broker is registered.")
    return tuple(int(r) for r in replicas)


def start(state: PartitionState, wanted: Sequence[int], allow_replication_factor_change: bool = True,
          electable: Collection[int] = ()) -> PartitionState:
    """The partition's state with a reassignment to `wanted` (already validated) started; completed
    at once when nothing needs to catch up (a reorder, or only removals of in-sync replicas)."""
    current = tuple(state.replicas)
    if not allow_replication_factor_change and len(wanted) != len(original(state)):
        raise ReassignmentError("invalid_replication_factor",
                                "The replication factor is changed from "
                                f"{len(original(state))} to {len(wanted)} but changing the replication factor is not allowed.")
    adding = tuple(r for r in wanted if r not in current)
    removing = tuple(r for r in current if r not in wanted)
    replicas = tuple(wanted) + removing
    moving = dataclasses.replace(state, replicas=replicas, adding=adding, removing=removing)
    done = complete(moving, electable)
    return done if done is not None else moving


def complete(state: PartitionState, electable: Collection[int]) -> PartitionState | None:
    """The partition with its reassignment finished, if every target replica is in the ISR and the
    target has a live in-sync leader; None while it must wait (or when none is in progress and no
    reorder is pending)."""
    wanted = target(state)
    if not in_progress(state) and tuple(state.replicas) == wanted:
        return None
    isr = set(state.isr)
    if not all(r in isr for r in wanted):
        return None
    new_isr = tuple(r for r in wanted if r in isr)
    leader, epoch = state.leader, state.leader_epoch
    if leader not in wanted:
        leader = next((r for r in wanted if r in isr and r in electable), NO_LEADER)
        if leader == NO_LEADER:
            return None  # nobody of the target can lead yet: wait (the reassignment stays recorded)
        epoch += 1
    elif state.removing:
        epoch += 1  # replicas leave: fence them (the leader stays)
    return PartitionState(leader=leader, leader_epoch=epoch, replicas=wanted, isr=new_isr)


def cancel(state: PartitionState, unclean_allowed: bool, electable: Collection[int]) -> PartitionState:
    """The partition back at its original replicas (Kafka's PartitionReassignmentRevert)."""
    if not in_progress(state):
        raise ReassignmentError("no_reassignment_in_progress", "No ongoing reassignment for this partition.")
    replicas = original(state)
    isr = tuple(r for r in replicas if r in state.isr)
    unclean = False
    if not isr:
        isr, unclean = replicas[:1], True
    if unclean and not unclean_allowed:
        raise ReassignmentError("invalid_replica_assignment",
                                "Unable to revert partition assignment because it would require an unclean leader election.")
    leader, epoch = state.leader, state.leader_epoch
    if leader not in isr:
        leader = next((r for r in isr if r in electable), NO_LEADER)
        epoch += 1
    elif state.adding:
        epoch += 1  # the adding replicas leave: fence them
    return PartitionState(leader=leader, leader_epoch=epoch, replicas=replicas, isr=isr)
