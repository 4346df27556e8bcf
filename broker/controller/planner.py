"""What the controller wants a topic's assignment to be, given the live brokers: a pure function.

`plan_topic` is the whole decision; the controller only applies its result with a CAS write.
- A topic without an assignment (created by CreateTopics on any broker, or by `kubectl apply` of
  a KafkaTopic) gets one for all its partitions.
- A topic whose spec asks for more partitions than it has gets the new ones (CreatePartitions).
  Partitions a CreateTopics placed by hand (`requested_replicas`) go where asked, led by the first
  active replica (controller/manual_assignment.py).
- Every partition's leader is re-elected from its live ISR; each change of leader (including to
  and from "none") bumps the leader epoch, so clients and followers can order what they saw.
- A broker whose Lease expired leaves the ISR of every partition (as Kafka's controller removes a
  fenced broker), except the last member: a partition with no live in-sync replica keeps the ISR
  it had and goes offline (leader -1) until one returns, unless unclean.leader.election.enable
  lets any live replica lead (its log becomes the truth, the ISR just itself).
- A broker shutting down (Kafka's controlled shutdown, announced on its registration) is elected
  nowhere: partitions it leads move to another live in-sync replica (if there is none it keeps
  leading until it stops), and it leaves every ISR that keeps a leader without it.
- A partition being reassigned (controller/reassignment.py) finishes once every target replica
  is in the ISR.
The leader changes the ISR too (followers falling behind or catching up; replica/isr_updates.py),
with a compare-and-set of the same record; both read the newest image before writing.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass

from broker.controller import manual_assignment, reassignment
from broker.controller.assignment import NO_LEADER, AssignmentError, assign_replicas, continuation, elect_leader
from broker.metadata.store import PartitionState, TopicRecord

UNCLEAN_KEY = "unclean.leader.election.enable"


@dataclass(frozen=True)
class Plan:
    """The assignment to write (None: nothing to change) and why it could not be completed."""

    assignment: tuple[PartitionState, ...] | None
    problem: str | None = None


def plan_topic(topic: TopicRecord, live: Mapping[int, str | None], rng: random.Random | None = None,
               holding: frozenset[int] = frozenset(), unclean_default: bool = False,
               stopping: frozenset[int] = frozenset()) -> Plan:
    """The next assignment of `topic`; `live` maps each live broker id to its rack (or None).
    Brokers in `holding` keep the leadership they have even if not live (a new controller's
    grace period); they get no new partitions. `unclean_default` is the broker's
    unclean.leader.election.enable, which the topic's own setting overrides. Brokers in
    `stopping` announced a controlled shutdown: their leaderships move to another live in-sync
    replica, they leave ISRs that keep a leader without them, and they are elected nowhere."""
    current = list(topic.assignment or ())
    unclean = topic.configs.get(UNCLEAN_KEY, "true" if unclean_default else "false").strip().lower() == "true"
    electable = set(live) | set(holding)
    states = [_reelect(s, electable, unclean, stopping) for s in current]
    # Reassignments whose target replicas all caught up (entered the ISR) finish (KIP-455).
    eligible = electable - stopping
    states = [(reassignment.complete(s, eligible) or s) if reassignment.in_progress(s) else s for s in states]
    problem = None
    missing = topic.partitions - len(current)
    asked = topic.requested_replicas or ()
    if missing > 0 and len(asked) > len(current):
        # Placed by hand at creation (CreateTopics' assignments): where they were asked for.
        by_hand = asked[len(current):len(current) + missing]
        states += [manual_assignment.first_state(r, eligible) for r in by_hand]
        missing -= len(by_hand)
    if missing > 0:
        if stopping:
            live = {n: rack for n, rack in live.items() if n not in stopping}  # no new replicas there
        try:
            replicas = assign_replicas(
                missing, topic.replication_factor, live, first_partition=len(states),
                start_index=continuation([s.replicas for s in states], live), rng=rng)
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


def _reelect(state: PartitionState, electable: set[int], unclean: bool = False,
             stopping: frozenset[int] = frozenset()) -> PartitionState:
    eligible = electable - stopping  # who may lead: live and not shutting down
    live_isr = tuple(r for r in state.isr if r in electable)
    staying_isr = tuple(r for r in live_isr if r not in stopping)
    if state.leader in electable and state.leader in state.isr:
        if state.leader not in stopping:
            # A live leader keeps its place (no churn back to the preferred one); dead or
            # stopping followers leave its ISR (no epoch bump: the leader did not change).
            return state if staying_isr == tuple(state.isr) else dataclasses.replace(state, isr=staying_isr)
        successor = elect_leader(state.replicas, state.isr, eligible)
        if successor == NO_LEADER:
            # Controlled shutdown with nobody in sync to take over: it leads until it stops.
            return state if live_isr == tuple(state.isr) else dataclasses.replace(state, isr=live_isr)
        return dataclasses.replace(state, leader=successor, leader_epoch=state.leader_epoch + 1, isr=staying_isr)
    leader = elect_leader(state.replicas, state.isr, eligible)
    isr = staying_isr if leader != NO_LEADER else live_isr
    if leader == NO_LEADER and unclean:
        leader = next((r for r in state.replicas if r in eligible), NO_LEADER)
        isr = (leader,) if leader != NO_LEADER else tuple(state.isr)
    if leader == NO_LEADER:
        isr = live_isr or tuple(state.isr)  # the last in-sync replica stays, to be elected when it returns
    if leader == state.leader and isr == tuple(state.isr):
        return state
    epoch = state.leader_epoch + 1 if leader != state.leader else state.leader_epoch
    return dataclasses.replace(state, leader=leader, leader_epoch=epoch, isr=isr)


PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types


def elect_on_request(state: PartitionState, electable: set[int], election_type: int) -> tuple[PartitionState | None, str]:
    """An election an admin asked for (ElectLeaders, or the controller's own preferred-leader
    rebalance): (the new state, "none") or (None, the Kafka error name why not).

    Preferred: the first replica leads if it is live and in the ISR. Unclean: only for a
    partition without a live leader: the first live in-sync replica, else any live replica (whose
    log becomes the truth; ISR just it)."""
    if election_type == PREFERRED:
        preferred = state.replicas[0] if state.replicas else NO_LEADER
        if state.leader == preferred:
            return None, "election_not_needed"
        if preferred not in electable or preferred not in state.isr:
            return None, "preferred_leader_not_available"
        return dataclasses.replace(state, leader=preferred, leader_epoch=state.leader_epoch + 1), "none"
    if state.leader != NO_LEADER and state.leader in electable:
        return None, "election_not_needed"
    leader = elect_leader(state.replicas, state.isr, electable)
    isr = tuple(r for r in state.isr if r in electable)
    if leader == NO_LEADER:
        leader = next((r for r in state.replicas if r in electable), NO_LEADER)
        isr = (leader,)
    if leader == NO_LEADER:
        return None, "eligible_leaders_not_available"
    return dataclasses.replace(state, leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr), "none"


def imbalanced(topics, live: set[int]) -> dict[str, list[int]]:
    """Kafka's (KRaft) auto leader rebalance: every partition not led by its preferred replica (the
    first of its replicas) while that replica is live and in the ISR, so it can lead again. No
    per-broker share gates it (leader.imbalance.per.broker.percentage was the ZooKeeper
    controller's). topic name -> partition indexes."""
    out: dict[str, list[int]] = {}
    for t in topics:
        for i, s in enumerate(t.assignment or ()):
            if not s.replicas:
                continue
            p = s.replicas[0]
            if s.leader != p and p in live and p in s.isr:
                out.setdefault(t.name, []).append(i)
    return out
