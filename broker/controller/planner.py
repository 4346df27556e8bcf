"""What the controller wants a topic's assignment to be, given the live brokers: a pure function.

`plan_topic` is the whole decision; the controller only applies its result with a CAS write.
- A topic without an assignment (created by CreateTopics on any broker, or by `kubectl apply` of
  a KafkaTopic) gets one for all its partitions.
- A topic whose spec asks for more partitions than it has gets the new ones (CreatePartitions).
- Every partition's leader is re-elected from its live ISR; each change of leader (including to
  and from "none") bumps the leader epoch, so clients and followers can order what they saw.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass

from broker.controller.assignment import AssignmentError, assign_replicas, continuation, elect_leader
from broker.metadata.store import PartitionState, TopicRecord


# Until followers replicate (next issue), a replica list longer than one would be a lie.
MAX_REPLICATION_FACTOR = 1


@dataclass(frozen=True)
class Plan:
    """The assignment to write (None: nothing to change) and why it could not be completed."""

    assignment: tuple[PartitionState, ...] | None
    problem: str | None = None


def plan_topic(topic: TopicRecord, live: Mapping[int, str | None], rng: random.Random | None = None,
               holding: frozenset[int] = frozenset()) -> Plan:
    """The next assignment of `topic`; `live` maps each live broker id to its rack (or None).
    Brokers in `holding` keep the leadership they have even if not live (a new controller's
    grace period); they get no new partitions."""
    current = list(topic.assignment or ())
    if topic.replication_factor > MAX_REPLICATION_FACTOR and len(current) < topic.partitions:
        return Plan(None, f"cannot assign {topic.name!r}: replication factor {topic.replication_factor} is not"
                          f" supported yet (followers do not replicate); use 1")
    electable = set(live) | set(holding)
    states = [_reelect(s, electable) for s in current]
    problem = None
    missing = topic.partitions - len(current)
    if missing > 0:
        try:
            replicas = assign_replicas(
                missing, topic.replication_factor, live, first_partition=len(current),
                start_index=continuation([s.replicas for s in current], live), rng=rng)
        except AssignmentError as e:
            problem = f"cannot assign {missing} partition(s) of {topic.name!r}: {e}"
        else:
            states += [PartitionState(leader=elect_leader(r, r, live), leader_epoch=0, replicas=r, isr=r)
                       for r in replicas]
    new = tuple(states)
    if topic.assignment is not None and new == tuple(topic.assignment):
        return Plan(None, problem)
    if topic.assignment is None and not new:
        return Plan(None, problem)
    return Plan(new, problem)


def _reelect(state: PartitionState, electable: set[int]) -> PartitionState:
    if state.leader in electable and state.leader in state.isr:
        return state  # a live leader keeps its place: no churn back to the preferred one
    leader = elect_leader(state.replicas, state.isr, electable)
    if leader == state.leader:
        return state
    return dataclasses.replace(state, leader=leader, leader_epoch=state.leader_epoch + 1)
