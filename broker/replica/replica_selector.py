"""Which replica a consumer should fetch from (KIP-392, Kafka's ReplicaSelector plugins), pure.

With `replica.selector.class` set, a partition's leader answers a consumer's Fetch (v11+, which
carries the client's `rack_id`) with a preferred read replica instead of records when another
replica suits the client better. The candidates are those of Kafka's
ReplicaManager.findPreferredReadReplica: every follower in the ISR whose log holds the fetch offset
(log start <= fetch offset <= log end) and reachable on the client's listener, plus the leader.

- `RackAwareReplicaSelector` (Kafka's class of that name): a client without a rack gets the leader;
  otherwise the candidates in the client's rack: none, the leader; the leader among them, the
  leader; else the most caught up of them (largest log end, then the shortest time since it was
  last caught up; Flotilla breaks a remaining tie by the lowest broker id).
- `LeaderSelector` (Kafka's default class): always the leader.

The leader chosen means "no preferred replica": the answer carries -1 and the leader serves the
fetch itself (Kafka never sends the leader's own id back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER = "org.apache.kafka.common.replica.LeaderSelector"
SELECTORS = (RACK_AWARE, LEADER)  # the values replica.selector.class accepts ("" = none, as Kafka)
NO_REPLICA = -1


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as the selector sees it (Kafka's ReplicaView)."""

    broker_id: int
    rack: str | None  # of its registration; None: no rack, or no endpoint on the client's listener
    log_end_offset: int
    time_since_caught_up_ms: int  # 0 for the leader


@dataclass(frozen=True, slots=True)
class FollowerView:
    """What the leader knows of one follower, before the candidates are chosen."""

    view: ReplicaView
    in_isr: bool
    log_start_offset: int
    reachable: bool = True  # it has an endpoint on the listener the client came in on


def candidates(followers: Iterable[FollowerView], fetch_offset: int) -> list[ReplicaView]:
    """The followers a consumer at `fetch_offset` may be sent to: in the ISR, holding the offset
    (log start <= fetch offset <= log end), reachable by the client."""
    return [f.view for f in followers
            if f.in_isr and f.reachable and f.view.log_end_offset >= fetch_offset
            and f.log_start_offset <= fetch_offset]


def select(selector: str, client_rack: str | None, leader: ReplicaView,
           replicas: Iterable[ReplicaView]) -> ReplicaView:
    """The replica `selector` picks for a client in `client_rack` among `replicas` and `leader`."""
    if selector not in SELECTORS:
        raise ValueError(f"unknown replica selector {selector!r}; known: {', '.join(SELECTORS)}")
    if selector == LEADER or not client_rack:
        return leader
    if leader.rack == client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack and r.broker_id != leader.broker_id]
    if not same_rack:
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms, -r.broker_id))


def preferred_read_replica(selector: str, client_rack: str | None, leader: ReplicaView,
                           followers: Iterable[FollowerView], fetch_offset: int) -> int:
    """The broker id to answer as preferred read replica, or NO_REPLICA (-1) when the leader is
    the one to read from."""
    chosen = select(selector, client_rack, leader, candidates(followers, fetch_offset))
    return NO_REPLICA if chosen.broker_id == leader.broker_id else chosen.broker_id
