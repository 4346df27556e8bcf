"""The plans of `python -m bench drain` (bench/commands/drain.py), kept apart from the brokers so that unit
tests reach them: where the topic's replicas start, the move that empties one broker, the JSON
`kafka-reassign-partitions.sh` reads, the least time a KIP-73 throttle allows for that move, and
the latency samples of a time window.

The same plan is given to both targets: both fleets number their brokers 1..3, and the broker
drained is the highest id.
"""

from __future__ import annotations

from typing import Mapping, Sequence

Layout = dict[int, list[int]]  # partition -> replicas, preferred leader first


def initial_layout(nodes: Sequence[int], partitions: int) -> Layout:
    """Replication factor 2 with the drained broker (the highest id) in every partition, so that it
    holds the whole topic: the other brokers alternate as its partner, and the drained broker leads
    half the partitions (the others lead a quarter each, with 4k partitions)."""
    nodes = sorted(nodes)
    if len(nodes) < 3:
        raise ValueError(f"a drain needs at least three brokers, not {nodes}")
    victim, others = nodes[-1], nodes[:-1]
    out: Layout = {}
    for p in range(partitions):
        partner = others[p % len(others)]
        out[p] = [victim, partner] if (p // len(others)) % 2 == 0 else [partner, victim]
    return out


def drain_plan(layout: Mapping[int, Sequence[int]], victim: int, nodes: Sequence[int]) -> Layout:
    """Every replica on `victim` replaced, in place, by a broker the partition does not use yet
    (the lowest id), keeping the replication factor; partitions without `victim` are left out."""
    plan: Layout = {}
    for p, replicas in sorted(layout.items()):
        if victim not in replicas:
            continue
        spare = [n for n in sorted(nodes) if n != victim and n not in replicas]
        if not spare:
            raise ValueError(f"partition {p} ({list(replicas)}) has nowhere to go off broker {victim}")
        plan[p] = [spare[0] if r == victim else r for r in replicas]
    return plan


def plan_json(topic: str, plan: Mapping[int, Sequence[int]]) -> dict:
    """The reassignment file of `kafka-reassign-partitions.sh --reassignment-json-file`."""
    return {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for p, r in sorted(plan.items())]}


def throttle_floor(leaders: Mapping[int, int], layout: Mapping[int, Sequence[int]],
                   plan: Mapping[int, Sequence[int]], sizes: Mapping[int, int], rate: float) -> dict:
    """The least time a move can take under `rate` bytes/s per broker and direction, as
    `kafka-reassign-partitions.sh --throttle` sets it: each partition's leader sends its new
    replicas their copy through its leader-side throttle, each new replica's broker fetches
    through its follower-side one. Returns the bytes per broker and side and the floor in seconds
    (the busiest broker's bytes / rate); a move faster than that did not hold to the throttle
    (Kafka's quota is a rate over 1 s windows, so a few seconds of burst may show)."""
    out_bytes: dict[int, int] = {}
    in_bytes: dict[int, int] = {}
    for p, target in plan.items():
        new = [r for r in target if r not in layout[p]]
        for n in new:
            in_bytes[n] = in_bytes.get(n, 0) + sizes.get(p, 0)
            out_bytes[leaders[p]] = out_bytes.get(leaders[p], 0) + sizes.get(p, 0)
    busiest = max([*out_bytes.values(), *in_bytes.values(), 0])
    return {"leader_out_bytes": out_bytes, "follower_in_bytes": in_bytes,
            "floor_s": busiest / rate if rate else 0.0}


def window(sent_at: Sequence[float], lat: Sequence[float], start: float, end: float) -> list[float]:
    """Send-to-acknowledgement latencies of the records sent in [start, end)."""
    return [d for s, d in zip(sent_at, lat) if start <= s < end]


def leader_changes(observations: Sequence[tuple[float, Mapping[int, int]]]) -> list[float]:
    """The times, among (time, partition -> leader) observations in time order, at which some
    partition's leader differs from the observation before (a partition not seen before is no change)."""
    out: list[float] = []
    for (_, before), (t, now) in zip(observations, observations[1:]):
        if any(p in before and before[p] != leader for p, leader in now.items()):
            out.append(t)
    return out


def split_near(sent_at: Sequence[float], lat: Sequence[float], start: float, end: float, marks: Sequence[float],
               before: float = 1.0, after: float = 3.0) -> tuple[list[float], list[float]]:
    """The latencies of records sent in [start, end), split into those sent from `before` seconds
    before to `after` seconds after any of `marks` (a leader change: the producer waits for the
    new leader) and the others."""
    near: list[float] = []
    away: list[float] = []
    for s, d in zip(sent_at, lat):
        if start <= s < end:
            (near if any(m - before <= s < m + after for m in marks) else away).append(d)
    return near, away


def peak_rate(samples: Sequence[tuple[float, int]], span: float) -> float | None:
    """The fastest growth, in bytes/s, over any `span` seconds of (time, bytes) samples taken in
    time order: from each sample to the first one at least `span` later. None if the samples cover
    less than `span`."""
    best = None
    j = 0
    for i, (t0, b0) in enumerate(samples):
        j = max(j, i + 1)
        while j < len(samples) and samples[j][0] - t0 < span:
            j += 1
        if j == len(samples):
            break
        t1, b1 = samples[j]
        rate = (b1 - b0) / (t1 - t0)
        best = rate if best is None else max(best, rate)
    return best
