"""The rebalance planner: where every partition's replicas and preferred leader should be.

When a KafkaCluster grows, the new brokers hold nothing; when it shrinks, the brokers to remove must
be drained first. The operator moves data with partition reassignment (KIP-455), and every replica
moved is a full copy of a partition sent over the network, so the plan must balance the fleet while
moving as little as possible. Pure: no I/O, no randomness, the same input gives the same plan.

The steps, and why they are these:

1. Keep what may stay. A replica stays where it is unless its broker is leaving, or it repeats a
   broker, or (with racks) it would put one rack over its share of the partition.
2. Choose each topic's quotas. A topic with R replicas on n brokers is balanced when every broker
   holds floor(R/n) or ceil(R/n) of them, so R % n brokers take the ceiling. Which ones is chosen for
   the whole fleet at once: those "extras" go first to brokers that already hold more than the
   floor (keeping a replica costs nothing), but no broker takes more than its even share of all
   topics' extras. Without the second rule, many small topics would all pile onto broker 0;
   with it, the fleet's total per broker is balanced as well as each topic.
3. Fill each topic to its quotas (a b-matching of partitions to brokers). Brokers over quota give
   up replicas (where a broker short of replicas can take the hole, followers before the preferred
   leader); the holes go to the least loaded eligible brokers. When a hole has no eligible broker
   left with room, an augmenting path shifts replicas along a chain of brokers (the chain that
   shifts fewest replicas kept from the current assignment: one placed by this plan shifts free),
   the classic step that makes a greedy matching complete, so the quotas are always met when racks
   do not forbid it.
4. Choose preferred leaders per topic the same way among each partition's replicas, keeping the
   current leader where balance allows (a leadership change moves no data, but disturbs clients),
   then even out the fleet's total leaders by chains of transfers that keep every topic balanced.

Guaranteed: every partition keeps its replication factor (the length of its replica list), on
distinct brokers from `brokers` only; with racks, no two replicas of a partition share a rack when
its replication factor is at most the number of racks among `brokers` (a broker missing from
`racks` is a rack of its own). Without racks, also: each topic's replicas per broker and the fleet's
total replicas per broker are within floor..ceil; each topic's preferred leaders per broker are
within floor..ceil whenever its partitions' replica sets allow any such choice (the search is
complete); an assignment already balanced in all four ways is returned unchanged.

Best-effort: balance with racks (rack spread wins: a rack with few brokers may have to hold more
than an even share; with the same number of brokers in every rack it is met in practice); the
fleet's total leaders per broker (chains stop at a local optimum); the fewest copies (replicas move
only to meet the quotas, but which broker takes a topic's ceiling is chosen before the partitions
are placed, so a plan can copy one replica more than the optimum).
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Collection, Hashable, Iterable, Mapping, Sequence

Partition = tuple[str, int]                        # (topic, partition index)
Assignment = Mapping[Partition, Sequence[int]]      # replicas, preferred leader first

Row = Hashable  # a partition when placing replicas or leaders, a topic when choosing quotas


class Unsatisfiable(ValueError):
    """Some topics' replication factor exceeds the brokers left; `.topics` names them, sorted."""

    def __init__(self, message: str, topics: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.topics: tuple[str, ...] = tuple(sorted(topics))


@dataclass(frozen=True)
class Move:
    """One partition's change from its current replicas to its target replicas."""

    partition: Partition
    current: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def moves_data(self) -> bool:
        """True when a broker gains or loses a replica; an order-only change just moves leadership."""
        return set(self.target) != set(self.current)

    @property
    def adding(self) -> tuple[int, ...]:
        """Brokers in target not in current (each gets a full copy), in target order."""
        return tuple(b for b in self.target if b not in self.current)

    @property
    def removing(self) -> tuple[int, ...]:
        """Brokers in current not in target (their copy is deleted once the move completes)."""
        return tuple(b for b in self.current if b not in self.target)

    @property
    def leader_changes(self) -> bool:
        return self.target[:1] != self.current[:1]


def target_assignment(current: Assignment, brokers: Collection[int],
                      racks: Mapping[int, str] | None = None) -> dict[Partition, tuple[int, ...]]:
    """The assignment to move to: every partition keeps its replication factor; replicas only on
    `brokers` (a scale-down passes the brokers that stay, so the removed ones are drained); replicas
    and preferred leaders spread evenly per topic and over the fleet; as few replica moves as
    possible. See the module docstring for what is guaranteed and what is best-effort.
    Raises Unsatisfiable when a partition has more replicas than `brokers`."""
    live = sorted(set(brokers))
    now = {p: tuple(replicas) for p, replicas in current.items()}
    _check_satisfiable(now, len(live))
    if not now:
        return {}
    if not live:  # only partitions without replicas are left
        return {p: () for p in sorted(now)}
    rack_of = _rack_keys(live, racks)
    limit = _rack_limits(now, rack_of)
    topics = _partitions_by_topic(now)
    kept = {p: _kept_replicas(now[p], rack_of, limit[p]) for p in now}
    quotas = _quotas(topics, now, kept, live, rack_of, limit, racked=any(b in (racks or {}) for b in live))
    replicas: dict[Partition, list[int]] = {}
    placed = Counter[int]()
    for topic in sorted(topics):
        replicas.update(_place_topic(topics[topic], now, kept, quotas[topic], live, rack_of, limit, placed))
    leaders = _choose_leaders(topics, now, replicas, live)
    return {p: _ordered(now[p], replicas[p], leaders.get(p)) for p in sorted(now)}


def moves(current: Assignment, target: Mapping[Partition, Sequence[int]]) -> list[Move]:
    """Partitions whose replicas (or their order) differ, sorted by (topic, partition). A partition
    only in `target` is a move from no replicas; one only in `current` is left alone."""
    out = []
    for partition in sorted(target):
        was, will = tuple(current.get(partition, ())), tuple(target[partition])
        if was != will:
            out.append(Move(partition, was, will))
    return out


def next_batch(pending: Sequence[Move], in_flight: Collection[Partition], max_in_flight: int) -> list[Move]:
    """The moves to start now so that at most max_in_flight data moves run at once (every partition in
    `in_flight` counts as one; `max_in_flight` < 1 starts none, a pause). Order-only moves (leadership)
    are not limited and start only when no data move is pending or in flight, so leaders are settled
    last, on replicas that are all in sync. Moves already in flight are not started again."""
    running = set(in_flight)
    waiting = [m for m in pending if m.partition not in running]
    data = [m for m in waiting if m.moves_data]
    if data or running:
        return data[:max(0, max_in_flight - len(running))]
    return [m for m in waiting if not m.moves_data]


# --- step 0: input ----------------------------------------------------------------------------

def _check_satisfiable(now: Mapping[Partition, tuple[int, ...]], brokers: int) -> None:
    too_big: dict[str, int] = {}
    for (topic, _), replicas in now.items():
        if len(replicas) > brokers:
            too_big[topic] = max(too_big.get(topic, 0), len(replicas))
    if not too_big:
        return
    by_factor: dict[int, list[str]] = defaultdict(list)
    for topic in sorted(too_big):
        by_factor[too_big[topic]].append(topic)
    parts = [f"replication factor {rf} of topic(s) {', '.join(names)}" for rf, names in sorted(by_factor.items())]
    verb = "exceeds" if len(parts) == 1 else "exceed"
    raise Unsatisfiable(f"{'; '.join(parts)} {verb} the {brokers} broker(s) left", too_big)


def _rack_keys(live: Sequence[int], racks: Mapping[int, str] | None) -> dict[int, tuple]:
    """Each broker's rack; without racks (or for a broker without one) a rack of its own."""
    racks = racks or {}
    return {b: ("rack", racks[b]) if b in racks else ("broker", b) for b in live}


def _rack_limits(now: Mapping[Partition, tuple[int, ...]], rack_of: Mapping[int, tuple]) -> dict[Partition, int]:
    """How many replicas of a partition one rack may hold: 1 when its replication factor fits in
    the racks, else as even a spread as the racks allow."""
    racks = len(set(rack_of.values()))
    return {p: max(1, -(-len(replicas) // racks)) for p, replicas in now.items()}


def _partitions_by_topic(now: Mapping[Partition, tuple[int, ...]]) -> dict[str, list[Partition]]:
    topics: dict[str, list[Partition]] = defaultdict(list)
    for partition in sorted(now):
        topics[partition[0]].append(partition)
    return dict(topics)


def _kept_replicas(replicas: Sequence[int], rack_of: Mapping[int, tuple], limit: int) -> list[int]:
    """Step 1: the current replicas that may stay, in their current order (the leader first)."""
    kept: list[int] = []
    for broker in replicas:
        if broker in rack_of and broker not in kept and _rack_room(broker, kept, rack_of, limit):
            kept.append(broker)
    return kept


def _rack_room(broker: int, others: Iterable[int], rack_of: Mapping[int, tuple], limit: int) -> bool:
    rack = rack_of[broker]
    return sum(1 for b in others if rack_of[b] == rack) < limit


# --- step 2: quotas ---------------------------------------------------------------------------

def _even_shares(total: int, live: Sequence[int], weight: Mapping[int, int]) -> dict[int, int]:
    """floor(total/n) each, and one more for the total % n brokers with the largest weight."""
    base, extra = divmod(total, len(live))
    favoured = set(sorted(live, key=lambda b: (-weight.get(b, 0), b))[:extra])
    return {b: base + (b in favoured) for b in live}


def _quota_groups(live: Sequence[int], rack_of: Mapping[int, tuple], racked: bool) -> dict[tuple, list[int]]:
    """The brokers that share out a topic's replicas evenly among themselves: all of them, or with
    racks each rack (a rack's share of a topic is fixed first, as racks limit what it can hold)."""
    if not racked:
        return {("fleet",): list(live)}
    groups: dict[tuple, list[int]] = defaultdict(list)
    for broker in live:
        groups[rack_of[broker]].append(broker)
    return dict(groups)


def _group_totals(topics: Mapping[str, list[Partition]], now: Mapping[Partition, tuple[int, ...]],
                  kept: Mapping[Partition, list[int]], groups: Mapping[tuple, list[int]],
                  rack_of: Mapping[int, tuple], limit: Mapping[Partition, int]) -> dict[str, dict[tuple, int]]:
    """Each topic's replicas per group: one at a time to the group whose brokers would then hold
    fewest (of this topic, then of the fleet so far; then one that holds more of them now), within
    what its racks allow a partition."""
    group_of = {b: g for g, members in groups.items() for b in members}
    fleet = Counter[tuple]()
    out: dict[str, dict[tuple, int]] = {}
    for topic in sorted(topics):
        partitions = topics[topic]
        held = Counter(group_of[b] for p in partitions for b in kept[p])
        racks = {g: len({rack_of[b] for b in members}) for g, members in groups.items()}
        room = {g: sum(min(len(now[p]), len(members), limit[p] * racks[g]) for p in partitions)
                for g, members in groups.items()}
        hard = {g: sum(min(len(now[p]), len(members)) for p in partitions) for g, members in groups.items()}
        total = {g: 0 for g in groups}
        for _ in range(sum(len(now[p]) for p in partitions)):
            open_ = [g for g in groups if total[g] < room[g]] or [g for g in groups if total[g] < hard[g]]
            g = min(open_, key=lambda g: (Fraction(total[g] + 1, len(groups[g])),
                                         Fraction(fleet[g], len(groups[g])), total[g] >= held[g], g))
            total[g] += 1
        fleet.update(total)
        out[topic] = total
    return out


def _quotas(topics: Mapping[str, list[Partition]], now: Mapping[Partition, tuple[int, ...]],
            kept: Mapping[Partition, list[int]], live: Sequence[int], rack_of: Mapping[int, tuple],
            limit: Mapping[Partition, int], racked: bool) -> dict[str, dict[int, int]]:
    """Step 2: per topic, how many replicas each broker holds: floor or ceil of its group's share,
    the ceilings ("extras") going to brokers that already hold more than the floor, but no broker
    taking more than its even share of all topics' extras in its group."""
    groups = _quota_groups(live, rack_of, racked)
    group_of = {b: g for g, members in groups.items() for b in members}
    totals = _group_totals(topics, now, kept, groups, rack_of, limit)
    floors: dict[tuple, int] = {}
    need: dict[tuple, int] = {}
    wanted: dict[tuple, list[int]] = {}
    for topic, partitions in topics.items():
        held = Counter(b for p in partitions for b in kept[p])
        for g, members in groups.items():
            row = (topic, g)
            floors[row], need[row] = divmod(totals[topic][g], len(members))
            above = sorted((b for b in members if held[b] > floors[row]), key=lambda b: (-held[b], b))
            wanted[row] = above[:need[row]]
    shares: dict[int, int] = {}
    for g, members in groups.items():
        mine = [row for row in wanted if row[1] == g]
        weight = Counter(b for row in mine for b in wanted[row])
        shares.update(_even_shares(sum(need[row] for row in mine), members, weight))

    def in_group(row: Row, col: int, others: Sequence[int]) -> bool:
        return group_of[col] == row[1]

    packing = _Packing(cells={row: list(bs) for row, bs in wanted.items()}, need=need, quota=shares,
                       allowed=in_group, kept={row: set(bs) for row, bs in wanted.items()})
    packing.trim(lambda row, col: (row,))
    for row in packing.fill(lambda load, col: (load[col] - shares[col], col)):
        _fill_anyhow(packing, row, lambda col: (packing.load[col], col), in_group)
    return {t: {b: floors[(t, group_of[b])] + (b in packing.cells[(t, group_of[b])]) for b in live}
            for t in topics}


# --- step 3: replicas -------------------------------------------------------------------------

def _place_topic(partitions: Sequence[Partition], now: Mapping[Partition, tuple[int, ...]],
                 kept: Mapping[Partition, list[int]], quota: Mapping[int, int], live: Sequence[int],
                 rack_of: Mapping[int, tuple], limit: Mapping[Partition, int],
                 placed: Counter[int]) -> dict[Partition, list[int]]:
    """Step 3 for one topic; `placed` (the fleet's replicas per broker so far) breaks ties and is
    updated with this topic's replicas."""
    def rack_ok(row: Row, col: int, others: Sequence[int]) -> bool:
        return _rack_room(col, others, rack_of, limit[row])

    packing = _Packing(cells={p: list(kept[p]) for p in partitions}, need={p: len(now[p]) for p in partitions},
                       quota=quota, allowed=rack_ok, kept={p: set(now[p]) for p in partitions})

    short_of = [b for b in live if packing.load[b] < quota[b]]  # they will take the holes

    def give_up_first(p: Row, broker: int) -> tuple:
        """Partitions a broker short of replicas can take directly (else filling the hole would
        shift other replicas), then followers (else the leader changes), then fewest holes."""
        cells = packing.cells[p]
        direct = any(b not in cells and rack_ok(p, b, [c for c in cells if c != broker]) for b in short_of)
        return (not direct, now[p][:1] == (broker,), packing.need[p] - len(cells), p)

    packing.trim(give_up_first)
    short = packing.fill(lambda load, col: (load[col] - quota[col], placed[col] + load[col], col))
    for p in short:  # racks forbid the quotas: keep the racks, then at least distinct brokers
        by_load = lambda col: (packing.load[col], placed[col] + packing.load[col], col)  # noqa: E731
        _fill_anyhow(packing, p, by_load, rack_ok)
    placed.update(packing.load)
    return packing.cells


def _fill_anyhow(packing: _Packing, row: Row, rank: Callable[[int], tuple],
                 allowed: Callable[[Row, int, Sequence[int]], bool]) -> None:
    """Fill a row over quota: first with brokers `allowed`, then with any broker not in it."""
    while len(packing.cells[row]) < packing.need[row]:
        cells = packing.cells[row]
        free = [c for c in packing.columns if c not in cells]
        fitting = [c for c in free if allowed(row, c, cells)]
        packing.add(row, min(fitting or free, key=rank))


# --- step 4: leaders --------------------------------------------------------------------------

def _choose_leaders(topics: Mapping[str, list[Partition]], now: Mapping[Partition, tuple[int, ...]],
                    replicas: Mapping[Partition, list[int]], live: Sequence[int]) -> dict[Partition, int]:
    """Step 4: one preferred leader per partition among its replicas."""
    leaders: dict[Partition, int] = {}
    led = Counter[int]()
    bounds: dict[str, tuple[int, int]] = {}
    for topic in sorted(topics):
        partitions = [p for p in topics[topic] if replicas[p]]
        bounds[topic] = (len(partitions) // len(live), -(-len(partitions) // len(live)))
        leaders.update(_topic_leaders(partitions, now, replicas, live, bounds[topic], led))
    _even_fleet_leaders(topics, replicas, leaders, bounds, led)
    return leaders


def _topic_leaders(partitions: Sequence[Partition], now: Mapping[Partition, tuple[int, ...]],
                   replicas: Mapping[Partition, list[int]], live: Sequence[int], bounds: tuple[int, int],
                   led: Counter[int]) -> dict[Partition, int]:
    """Current leaders stay unless their broker leads more than the ceiling; the rest go to the
    replica leading least (of this topic, then of the fleet); then brokers under the floor take
    leadership along augmenting paths. Updates `led`, the fleet's leaders per broker."""
    floor, ceil = bounds
    members = {p: set(replicas[p]) for p in partitions}
    current = {p: now[p][0] for p in partitions if now[p] and now[p][0] in members[p]}
    packing = _Packing(cells={p: [current[p]] if p in current else [] for p in partitions},
                       need={p: 1 for p in partitions}, quota={b: ceil for b in live},
                       allowed=lambda row, col, others: col in members[row],
                       kept={p: {current[p]} if p in current else set() for p in partitions})
    packing.trim(lambda p, broker: (p,))
    short = packing.fill(lambda load, col: (load[col], led[col] + load[col], col))
    for p in short:  # no balanced choice exists: the least loaded replica
        packing.add(p, min(members[p], key=lambda col: (packing.load[col], led[col] + packing.load[col], col)))
    leader = {p: cells[0] for p, cells in packing.cells.items()}
    count = Counter({b: 0 for b in live})
    count.update(leader.values())
    for broker in live:
        while count[broker] < floor and _pull_leadership(broker, partitions, members, leader, count, floor):
            pass
    led.update(leader.values())
    return leader


def _pull_leadership(taker: int, partitions: Sequence[Partition], members: Mapping[Partition, set[int]],
                     leader: dict[Partition, int], count: Counter[int], floor: int) -> bool:
    """Give `taker` one more leadership along the shortest chain of transfers that ends at a broker
    leading more than the floor (each broker on the chain takes one and gives one)."""
    via: dict[int, tuple[int, Partition]] = {}  # giver -> (the broker that takes from it, partition)
    queue = deque([taker])
    while queue:
        broker = queue.popleft()
        for p in partitions:
            giver = leader[p]
            if broker not in members[p] or giver == taker or giver in via:
                continue
            via[giver] = (broker, p)
            if count[giver] > floor:
                count[giver] -= 1
                count[taker] += 1
                while giver != taker:
                    broker, p = via[giver]
                    leader[p] = broker
                    giver = broker
                return True
            queue.append(giver)
    return False


def _even_fleet_leaders(topics: Mapping[str, list[Partition]], replicas: Mapping[Partition, list[int]],
                        leaders: dict[Partition, int], bounds: Mapping[str, tuple[int, int]],
                        led: Counter[int]) -> None:
    """Even out the fleet's leaders per broker: pass leadership along chains of transfers from a
    broker to one leading at least two fewer, each transfer keeping its topic within bounds. Each
    chain lowers the sum of squares of the fleet's counts, so this ends; it stops when no chain is
    left (a local optimum: best-effort)."""
    per_topic = {t: Counter(leaders[p] for p in topics[t] if p in leaders) for t in topics}
    while any(_pass_leadership(giver, replicas, leaders, bounds, led, per_topic)
              for giver in sorted(led, key=lambda b: (-led[b], b))):
        pass


def _pass_leadership(start: int, replicas: Mapping[Partition, list[int]], leaders: dict[Partition, int],
                     bounds: Mapping[str, tuple[int, int]], led: Counter[int],
                     per_topic: Mapping[str, Counter[int]]) -> bool:
    """One chain of leadership transfers from `start` to a broker leading at least two fewer."""
    led_by: dict[int, list[Partition]] = defaultdict(list)
    for p in sorted(leaders):
        led_by[leaders[p]].append(p)
    via: dict[int, tuple[int, Partition]] = {}  # taker -> (the broker it takes from, partition)
    queue = deque([start])
    while queue:
        giver = queue.popleft()
        for p in led_by[giver]:
            floor, ceil = bounds[p[0]]
            if per_topic[p[0]][giver] <= floor:
                continue
            for taker in sorted(replicas[p]):
                if taker == start or taker in via or per_topic[p[0]][taker] >= ceil:
                    continue
                via[taker] = (giver, p)
                if led[taker] <= led[start] - 2:
                    led[start] -= 1
                    led[taker] += 1
                    while taker != start:
                        giver, p = via[taker]
                        leaders[p] = taker
                        per_topic[p[0]][giver] -= 1
                        per_topic[p[0]][taker] += 1
                        taker = giver
                    return True
                queue.append(taker)
    return False


def _ordered(current: Sequence[int], replicas: Sequence[int], leader: int | None) -> tuple[int, ...]:
    """The leader first, then the replicas that stay in their current order, then the new ones:
    a partition whose replicas and leader do not change keeps its list exactly."""
    chosen = set(replicas)
    rest = [b for b in current if b in chosen] + [b for b in replicas if b not in current]
    head = [leader] if leader is not None else []
    return tuple(head + [b for b in dict.fromkeys(rest) if b != leader])


# --- the matching -----------------------------------------------------------------------------

class _Packing:
    """Rows that each need `need[row]` distinct columns, columns that take at most `quota[col]`
    rows, and a rule `allowed(row, col, the row's other columns)` (racks, or replica sets).

    `trim` takes rows off columns over quota; `fill` gives every row its columns: the best-ranked
    column with room, else an augmenting path (a chain of rows each shifting to another column,
    ending at a column with room). Shifting a row off a column it holds in `kept` costs a move, so
    chains shift other rows first."""

    def __init__(self, cells: dict[Row, list[int]], need: Mapping[Row, int], quota: Mapping[int, int],
                 allowed: Callable[[Row, int, Sequence[int]], bool], kept: Mapping[Row, set[int]]) -> None:
        self.cells, self.need, self.quota, self.allowed, self.kept = cells, need, quota, allowed, kept
        self.columns = sorted(quota)
        self.load = Counter({c: 0 for c in self.columns})
        self.holders: dict[int, set[Row]] = {c: set() for c in self.columns}
        for row, cols in cells.items():
            for col in cols:
                self.load[col] += 1
                self.holders[col].add(row)

    def add(self, row: Row, col: int) -> None:
        self.cells[row].append(col)
        self.load[col] += 1
        self.holders[col].add(row)

    def remove(self, row: Row, col: int) -> None:
        self.cells[row].remove(col)
        self.load[col] -= 1
        self.holders[col].discard(row)

    def shift(self, row: Row, old: int, new: int) -> None:
        cells = self.cells[row]
        cells[cells.index(old)] = new
        self.load[old] -= 1
        self.load[new] += 1
        self.holders[old].discard(row)
        self.holders[new].add(row)

    def trim(self, give_up_first: Callable[[Row, int], tuple]) -> None:
        """Take rows off every column over its quota, smallest `give_up_first(row, col)` first (the
        key of a row may change as other columns are trimmed, not as its own column is)."""
        for col in self.columns:
            excess = self.load[col] - self.quota[col]
            if excess > 0:
                for row in sorted(self.holders[col], key=lambda row: give_up_first(row, col))[:excess]:
                    self.remove(row, col)

    def fill(self, rank: Callable[[Counter[int], int], tuple]) -> list[Row]:
        """Fill every row within quotas, preferring the smallest `rank(load, col)`; the rows that
        cannot be filled (only when `allowed` forbids it) are returned, sorted."""
        short = []
        for row in sorted(self.cells):
            while len(self.cells[row]) < self.need[row]:
                if not (self._direct(row, rank) or self._augment(row, rank)):
                    short.append(row)
                    break
        return short

    def _fits(self, row: Row, col: int, others: Sequence[int]) -> bool:
        return col not in others and self.allowed(row, col, others)

    def _direct(self, row: Row, rank: Callable[[Counter[int], int], tuple]) -> bool:
        cells = self.cells[row]
        room = [c for c in self.columns if self.load[c] < self.quota[c] and self._fits(row, c, cells)]
        if room:
            self.add(row, min(room, key=lambda c: rank(self.load, c)))
        return bool(room)

    def _augment(self, row: Row, rank: Callable[[Counter[int], int], tuple]) -> bool:
        """`row` takes a full column c0, a row holding c0 shifts to c1, ... until a column with
        room. Of such chains, one that shifts fewest rows off columns they keep (a 0-1 breadth-first
        search: shifting a replica placed in this plan is free). False when no chain exists."""
        order = sorted(self.columns, key=lambda c: rank(self.load, c))
        parent: dict[int, tuple[int | None, Row]] = {}
        cost: dict[int, int] = {}
        queue: deque[int] = deque()
        for col in order:
            if self._fits(row, col, self.cells[row]):
                parent[col], cost[col] = (None, row), 0
                queue.append(col)
        done: set[int] = set()
        while queue:
            col = queue.popleft()
            if col in done:
                continue
            done.add(col)
            if self.load[col] < self.quota[col]:
                self._apply(col, parent)
                return True
            on_path = self._rows_on_path(col, parent)
            for other in sorted(self.holders[col], key=lambda r: (col in self.kept.get(r, ()), r)):
                if other in on_path:
                    continue
                step = int(col in self.kept.get(other, ()))
                rest = [c for c in self.cells[other] if c != col]
                for nxt in order:
                    if nxt in done or cost.get(nxt, cost[col] + step + 1) <= cost[col] + step:
                        continue
                    if self._fits(other, nxt, rest):
                        parent[nxt], cost[nxt] = (col, other), cost[col] + step
                        queue.appendleft(nxt) if step == 0 else queue.append(nxt)
        return False

    @staticmethod
    def _rows_on_path(col: int | None, parent: Mapping[int, tuple[int | None, Row]]) -> set[Row]:
        rows = set()
        while col is not None:
            col, row = parent[col]
            rows.add(row)
        return rows

    def _apply(self, end: int, parent: Mapping[int, tuple[int | None, Row]]) -> None:
        col: int | None = end
        while col is not None:
            prev, row = parent[col]
            if prev is None:
                self.add(row, col)
            else:
                self.shift(row, prev, col)
            col = prev
