"""Where partitions live and who leads them: pure functions, no I/O, no clock.

Replica placement follows Kafka's rule for new topics and new partitions: walk the brokers
round-robin from a random start so that leaders spread evenly, and shift the followers of each
wrap-around so that a broker's partitions do not all have the same followers. When every broker
has a rack, the walk goes over a rack-alternating order of the brokers and followers avoid racks
that already hold a replica of the partition, until every rack has one.

Leader election picks the first replica (in assignment order: the preferred leader comes first)
that is both live and in the ISR. With one replica that is the replica itself or nobody (-1):
the partition is offline until its broker returns. With more replicas the ISR decides who may
lead (leaders and the controller change it; see planner.py).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

NO_LEADER = -1


class AssignmentError(ValueError):
    """The request cannot be placed on the live brokers (e.g. more replicas than brokers)."""


def rack_alternating(brokers: Mapping[int, str | None]) -> list[int]:
    """Broker ids ordered so that consecutive ids sit in different racks where possible:
    the first broker of each rack (racks sorted), then the second of each, and so on."""
    by_rack: dict[str, list[int]] = {}
    for node, rack in sorted(brokers.items()):
        by_rack.setdefault(rack or "", []).append(node)
    racks = sorted(by_rack)
    out: list[int] = []
    depth = max((len(v) for v in by_rack.values()), default=0)
    for i in range(depth):
        for r in racks:
            if i < len(by_rack[r]):
                out.append(by_rack[r][i])
    return out


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    # Followers start one past the leader and move by `shift`; never land on the leader itself.
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    num_partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    *,
    first_partition: int = 0,
    start_index: int | None = None,
    shift: int | None = None,
    rng: random.Random | None = None,
) -> list[tuple[int, ...]]:
    """Replica lists for partitions first_partition .. first_partition+num_partitions-1.

    `brokers` maps live broker id -> rack (None without one). Rack-aware placement is used only
    when every broker has a rack, as Kafka requires. `start_index`/`shift` fix the random choices
    (tests, and growing a topic from where its existing assignment started)."""
    if num_partitions < 0:
        raise AssignmentError(f"number of partitions must not be negative, got {num_partitions}")
    if replication_factor <= 0:
        raise AssignmentError(f"replication factor must be positive, got {replication_factor}")
    n = len(brokers)
    if replication_factor > n:
        raise AssignmentError(
            f"replication factor {replication_factor} is larger than the {n} available broker"
            + ("" if n == 1 else "s"))
    rng = rng or random.Random()
    start = rng.randrange(n) if start_index is None else start_index % n
    shift0 = rng.randrange(n) if shift is None else shift % n
    racks = {r for r in brokers.values()}
    rack_aware = None not in racks and len(racks) > 1
    order = rack_alternating(brokers) if rack_aware else sorted(brokers)
    out: list[tuple[int, ...]] = []
    for p in range(first_partition, first_partition + num_partitions):
        next_shift = shift0 + (p // n if p > 0 else 0)
        first = (p + start) % n
        leader = order[first]
        if not rack_aware:
            replicas = [leader] + [order[_follower_index(first, next_shift, j, n)]
                                   for j in range(replication_factor - 1)]
        else:
            replicas = _rack_aware_followers(order, brokers, first, next_shift, replication_factor)
        out.append(tuple(replicas))
    return out


def _rack_aware_followers(order: Sequence[int], brokers: Mapping[int, str | None], first: int,
                          shift: int, rf: int) -> list[int]:
    n = len(order)
    num_racks = len({brokers[b] for b in order})
    replicas = [order[first]]
    racks_used = {brokers[order[first]]}
    k = 0
    while len(replicas) < rf:
        candidate = order[_follower_index(first, shift, k, n)]
        k += 1
        if candidate in replicas:
            if k > 4 * n:  # every broker tried; cannot happen while rf <= n
                raise AssignmentError("cannot place replicas")
            continue
        rack = brokers[candidate]
        # Skip a rack that already has a replica until every rack has one.
        if rack in racks_used and len(racks_used) < num_racks and k <= 2 * n:
            continue
        replicas.append(candidate)
        racks_used.add(rack)
        if len(racks_used) == num_racks:
            racks_used = set()
    return replicas


def continuation(existing: Sequence[Sequence[int]], brokers: Mapping[int, str | None]) -> int | None:
    """The start index that continues an existing assignment when a topic grows (Kafka starts
    from where partition 0's leader sits in the broker order), or None to pick one at random."""
    if not existing or not existing[0]:
        return None
    order = sorted(brokers)
    try:
        return order.index(existing[0][0])
    except ValueError:
        return None


def elect_leader(replicas: Sequence[int], isr: Sequence[int], live: Mapping[int, object] | set[int]) -> int:
    """The first replica in assignment order that is live and in the ISR, or NO_LEADER."""
    in_sync = set(isr)
    for r in replicas:
        if r in live and r in in_sync:
            return r
    return NO_LEADER
