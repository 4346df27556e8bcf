"""When and how the operator moves partition replicas between brokers: pure, no I/O.
reconcilers/rebalance.py reads the cluster, calls `decide`, and carries out the Step it returns.

When (nothing else moves data; a user's own assignments are left alone):
- scale down (spec.replicas below the StatefulSet's): drain the brokers to remove, by planning over
  brokers 0..replicas-1; builders/scale_down.py shrinks the StatefulSet once they hold nothing;
- scale up: once every broker of the StatefulSet is Ready and registered (Metadata lists it), if
  the broker set differs from the one the last rebalance completed for (status.rebalance.
  completedBrokers; the first set the operator sees is adopted as is);
- on demand: a new value of the annotation `flotilla.io/rebalance`.
`flotilla.io/rebalance-paused: "true"` lets moves in flight finish and starts no new ones.

How: the plan is builders/rebalance_plan.py's (balanced replicas and preferred leaders per topic,
fewest moves), made at the rebalance's first step from what the cluster holds (each in-flight
reassignment counted at its target) and kept (builders/rebalance_target.py: the ConfigMap
`<cluster>-rebalance-plan`): later steps head for the same target, so status.rebalance, that
ConfigMap and the controller's in-flight reassignments carry a rebalance across operator or
controller restarts, and a rebalance moves no more partitions than it announced. Data moves go
in batches of at most spec.rebalance.maxPartitionMovesInFlight under KIP-73 throttles set as
`kafka-reassign-partitions.sh --throttle` sets them; reorders (a new preferred leader) follow, with
a preferred election; at the end every partition's preferred leader is elected and the throttles
are removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Collection, Mapping

from . import rebalance_plan as rp
from .rebalance_target import Target, heading

REBALANCE = "flotilla.io/rebalance"
REBALANCE_PAUSED = "flotilla.io/rebalance-paused"

IDLE, MOVING, PAUSED, BLOCKED = "Idle", "Moving", "Paused", "Blocked"
SCALE_UP, SCALE_DOWN, REQUESTED = "ScaleUp", "ScaleDown", "Requested"
CONDITION = "Rebalancing"

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"

Partition = tuple[str, int]


@dataclass(frozen=True)
class Inputs:
    """What the KafkaCluster and its StatefulSet say (no Kafka request needed)."""

    desired: int  # spec.replicas
    statefulset_replicas: int | None  # the StatefulSet's spec.replicas (None: not created yet)
    ready_replicas: int  # its status.readyReplicas
    throttle: int  # spec.rebalance.throttleBytesPerSecond (0: none)
    max_in_flight: int  # spec.rebalance.maxPartitionMovesInFlight
    previous: Mapping[str, Any]  # status.rebalance ({} when none)
    token: str | None = None  # the flotilla.io/rebalance annotation
    paused: bool = False  # flotilla.io/rebalance-paused
    kept: Target | None = None  # the plan kept in <cluster>-rebalance-plan (None: none, or unreadable)


@dataclass(frozen=True)
class View:
    """What the cluster says (reassignment_admin.ClusterView, reduced to what decisions need)."""

    registered: frozenset[int]
    replicas: Mapping[Partition, tuple[int, ...]]  # Metadata's (target + removing while moving)
    leaders: Mapping[Partition, int]
    in_flight: Mapping[Partition, tuple[tuple[int, ...], tuple[int, ...]]]  # partition -> (original, target)
    racks: Mapping[int, str] | None = None


@dataclass(frozen=True)
class Step:
    """What to do now, then the status.rebalance to write."""

    status: dict[str, Any]
    start: dict[Partition, tuple[int, ...]] = field(default_factory=dict)  # AlterPartitionReassignments
    elect: tuple[Partition, ...] = ()  # ElectLeaders PREFERRED, after `start`
    configs: dict[tuple[int, str], dict[str, str | None]] = field(default_factory=dict)  # IncrementalAlterConfigs
    copies: dict[Partition, int] = field(default_factory=dict)  # a new plan: replicas each partition gains (bytesToMove)
    keep: Target | None = None  # a new or extended plan, to keep before anything starts

    @property
    def acts(self) -> bool:
        return bool(self.start or self.elect or self.configs)


def inputs_from(body: Mapping[str, Any], statefulset: Mapping[str, Any] | None, *, desired: int, throttle: int,
                max_in_flight: int, kept: Target | None = None) -> Inputs:
    """Inputs from the KafkaCluster object and its StatefulSet."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    sts = statefulset or {}
    replicas = (sts.get("spec") or {}).get("replicas")
    token = annotations.get(REBALANCE)
    return Inputs(desired=desired, statefulset_replicas=None if replicas is None else int(replicas),
                  ready_replicas=int((sts.get("status") or {}).get("readyReplicas") or 0),
                  throttle=throttle, max_in_flight=max_in_flight,
                  previous=dict((body.get("status") or {}).get("rebalance") or {}),
                  token=str(token).strip() or None if token is not None else None,
                  paused=str(annotations.get(REBALANCE_PAUSED, "")).strip().lower() == "true", kept=kept)


def _active(prev: Mapping[str, Any]) -> bool:
    return prev.get("phase") in (MOVING, PAUSED)


def _new_token(inp: Inputs) -> bool:
    return inp.token is not None and inp.token != inp.previous.get("token")


def _fleet(inp: Inputs) -> tuple[int, ...]:
    return tuple(range(inp.statefulset_replicas or 0))


def needs_cluster(inp: Inputs) -> bool:
    """Whether a step may have anything to do (a cheap check before any Kafka request)."""
    sts = inp.statefulset_replicas
    if sts is None:
        return False
    if inp.desired < sts or _new_token(inp) or _active(inp.previous) or inp.previous.get("phase") == BLOCKED:
        return True
    whole = sts == inp.desired and inp.ready_replicas >= sts
    completed = inp.previous.get("completedBrokers")
    return whole and (completed is None or set(completed) != set(_fleet(inp)))


def trigger(inp: Inputs, registered: Collection[int]) -> tuple[tuple[int, ...], str] | None:
    """(the brokers to plan over, why), or None: nothing to rebalance now. `registered`: the
    brokers Metadata lists."""
    sts, prev = inp.statefulset_replicas, inp.previous
    if sts is None:
        return None
    fleet = _fleet(inp)
    whole = sts == inp.desired and inp.ready_replicas >= sts and set(fleet) <= set(registered)
    if inp.desired < sts:
        return tuple(range(inp.desired)), SCALE_DOWN
    if _new_token(inp):
        return (fleet, REQUESTED) if whole else None
    if _active(prev) or prev.get("phase") == BLOCKED:
        if set(prev.get("brokers") or ()) == set(fleet) and prev.get("reason"):
            return fleet, str(prev["reason"])
        if whole:
            return fleet, SCALE_UP
        return None
    completed = prev.get("completedBrokers")
    if whole and completed is not None and set(completed) != set(fleet):
        return fleet, SCALE_UP
    return None


def _now(now: datetime) -> str:
    return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _throttled(partitions: Mapping[Partition, tuple[tuple[int, ...], tuple[int, ...]]]) -> dict[str, tuple[str, str]]:
    """topic -> (leader.replication.throttled.replicas, follower...) for moves (original, target),
    as kafka-reassign-partitions.sh writes them: the leader side on every original replica, the
    follower side on the replicas being added."""
    leader: dict[str, set[tuple[int, int]]] = {}
    follower: dict[str, set[tuple[int, int]]] = {}
    for (topic, index), (original, target) in partitions.items():
        leader.setdefault(topic, set()).update((index, b) for b in original)
        follower.setdefault(topic, set()).update((index, b) for b in target if b not in original)
    text = lambda pairs: ",".join(f"{p}:{b}" for p, b in sorted(pairs))  # noqa: E731
    return {t: (text(leader[t]), text(follower.get(t, set()))) for t in leader}


def _clear(prev: Mapping[str, Any]) -> dict[tuple[int, str], dict[str, str | None]]:
    from ..clients.reassignment_admin import BROKER, TOPIC

    out: dict[tuple[int, str], dict[str, str | None]] = {}
    for topic in prev.get("throttledTopics") or ():
        out[(TOPIC, topic)] = {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None}
    for b in sorted(set(prev.get("throttledBrokers") or ())):  # a removed broker's too: its id may come back
        out[(BROKER, str(b))] = {LEADER_RATE: None, FOLLOWER_RATE: None}
    return out


def _changed_rate(prev: Mapping[str, Any], inp: Inputs, view: View,
                  status: dict[str, Any]) -> dict[tuple[int, str], dict[str, str | None]]:
    """The brokers' rates when spec.rebalance.throttleBytesPerSecond differs from the rate last set
    (status.rebalance.throttleRate): set at once, so a throttle raised because moves crawl speeds up
    the moves in flight, not only the next batch (0 removes the rates: full speed). Notes the new
    rate in `status`."""
    from ..clients.reassignment_admin import BROKER

    applied = prev.get("throttleRate")
    if applied is None or int(applied) == inp.throttle:
        return {}
    rate = str(inp.throttle) if inp.throttle > 0 else None
    brokers = sorted(set(prev.get("throttledBrokers") or ()) | (set(view.registered) if rate else set()))
    status["throttleRate"] = inp.throttle
    if rate:
        status["throttledBrokers"] = brokers
    return {(BROKER, str(b)): {LEADER_RATE: rate, FOLLOWER_RATE: rate} for b in brokers}


def _base(prev: Mapping[str, Any], brokers: tuple[int, ...], reason: str, fresh: bool, now: datetime,
          inp: Inputs) -> dict[str, Any]:
    status = {k: v for k, v in prev.items()}
    status.update(brokers=list(brokers), reason=reason)
    if fresh:
        status.update(startedAt=_now(now), partitionsTotal=0, partitionsMoved=0)
        status.pop("bytesToMove", None)
    if reason == REQUESTED and inp.token is not None:
        status["token"] = inp.token
    return status


def decide(inp: Inputs, view: View, now: datetime) -> Step:
    """The step to take now. The returned status always says where the rebalance stands."""
    from ..clients.reassignment_admin import BROKER, TOPIC

    prev = dict(inp.previous)
    found = trigger(inp, view.registered)
    if found is None:
        if prev.get("completedBrokers") is None and inp.statefulset_replicas and inp.ready_replicas >= inp.statefulset_replicas \
                and set(_fleet(inp)) <= view.registered:
            # The first balanced-or-not set seen is the users' own: adopted, nothing moved.
            return Step({**prev, "phase": IDLE, "completedBrokers": list(_fleet(inp)),
                         "message": "adopted the current assignment"})
        return Step(prev)
    brokers, reason = found
    fresh = not _active(prev) or set(prev.get("brokers") or ()) != set(brokers) or prev.get("reason") != reason
    status = _base(prev, brokers, reason, fresh, now, inp)
    effective = {p: (view.in_flight[p][1] if p in view.in_flight else r) for p, r in view.replicas.items()}
    try:
        fresh_plan = rp.target_assignment(effective, brokers, view.racks or None)
    except rp.Unsatisfiable as exc:
        topics = ", ".join(sorted(getattr(exc, "topics", ()) or ()))
        status.update(phase=BLOCKED, message=f"cannot place every replica on broker(s) "
                      f"{', '.join(map(str, brokers))}: {exc}" + (f" (topics: {topics})" if topics and topics not in str(exc) else ""))
        return Step(status)
    kept = inp.kept if inp.kept is not None and not fresh and inp.kept.belongs_to(status) else None
    plan = heading(kept, fresh_plan, effective, brokers)
    keep = None
    if kept is None or any(kept.replicas.get(p) != t for p, t in plan.items()):
        keep = Target(started_at=str(status.get("startedAt") or ""), reason=reason, brokers=tuple(brokers),
                      replicas={**(kept.replicas if kept is not None else {}), **plan})
    pending = rp.moves(effective, plan)
    in_flight = set(view.in_flight)
    remaining = len(pending) + len(in_flight)
    if fresh:
        status["partitionsTotal"] = remaining
    total = max(int(status.get("partitionsTotal") or 0), int(status.get("partitionsMoved") or 0) + remaining)
    status.update(partitionsTotal=total, partitionsMoved=total - remaining)

    if not pending and not in_flight:
        if not _active(prev) and prev.get("phase") == IDLE and set(prev.get("completedBrokers") or ()) == set(brokers):
            return Step({**prev, **({"token": status["token"]} if "token" in status else {})})  # steady
        # Done (or nothing was needed): preferred leaders elected, throttles removed.
        elect = tuple(p for p in sorted(plan) if plan[p] and view.leaders.get(p) != plan[p][0])
        status.update(phase=IDLE, completedBrokers=list(brokers),
                      message=f"balanced over broker(s) {', '.join(map(str, brokers))}")
        status.pop("throttledTopics", None)
        status.pop("throttledBrokers", None)
        status.pop("throttleRate", None)
        return Step(status, elect=elect, configs=_clear(prev))

    rates = _changed_rate(prev, inp, view, status) if in_flight else {}
    if inp.paused:
        status.update(phase=PAUSED, message=f"paused by {REBALANCE_PAUSED}: {len(in_flight)} move(s) in flight "
                      f"finish, {len(pending)} wait")
        return Step(status, configs=rates)

    batch = rp.next_batch(pending, in_flight, inp.max_in_flight)
    data = [m for m in batch if m.moves_data]
    order = [m for m in batch if not m.moves_data]
    start = {m.partition: tuple(m.target) for m in batch}
    configs: dict[tuple[int, str], dict[str, str | None]] = dict(rates)
    if data and inp.throttle > 0:
        topics = {m.partition[0] for m in data}
        moving = {p: ft for p, ft in view.in_flight.items() if p[0] in topics}
        moving.update({m.partition: (tuple(m.current), tuple(m.target)) for m in data})
        for topic, (leader, follower) in _throttled(moving).items():
            configs[(TOPIC, topic)] = {LEADER_REPLICAS: leader, FOLLOWER_REPLICAS: follower or None}
        rate = str(inp.throttle)
        for b in sorted(view.registered):
            configs[(BROKER, str(b))] = {LEADER_RATE: rate, FOLLOWER_RATE: rate}
        status["throttledTopics"] = sorted(set(status.get("throttledTopics") or ()) | topics)
        status["throttledBrokers"] = sorted(set(status.get("throttledBrokers") or ()) | set(view.registered))
        status["throttleRate"] = inp.throttle
    elif data and not rates:
        configs.update(_changed_rate(prev, inp, view, status))  # unthrottled now: earlier rates removed
    status.update(phase=MOVING, message=(
        f"moving {len(in_flight) + len(data)} partition(s), {max(0, len(pending) - len(batch))} waiting, "
        f"{total - remaining}/{total} done; target broker(s) {', '.join(map(str, brokers))}"))
    copies = {m.partition: len(m.adding) for m in pending if m.moves_data} if fresh else {}
    return Step(status, start=start, elect=tuple(m.partition for m in order), configs=configs, copies=copies,
                keep=keep)


def unreachable(inp: Inputs, why: str) -> dict[str, Any] | None:
    """status.rebalance when the cluster cannot be asked, or None to leave it as it is: a drain
    the scale-down waits for, and a rebalance under way, say why they do not progress."""
    prev = dict(inp.previous)
    if inp.statefulset_replicas is not None and inp.desired < inp.statefulset_replicas:
        return {**prev, "phase": BLOCKED, "reason": SCALE_DOWN, "brokers": list(range(inp.desired)),
                "message": f"cannot reach the cluster to move replicas off the removed brokers: {why}"}
    if prev.get("phase") == BLOCKED and prev.get("reason") == SCALE_DOWN:
        # The StatefulSet shrank meanwhile (the removed brokers held nothing): no drain is owed.
        return {**prev, "phase": IDLE, "message": "the scale-down needed no rebalance"}
    if _active(prev) or _new_token(inp):
        return {**prev, "message": f"cannot reach the cluster: {why}"}
    return None


def draining(rebalance: Mapping[str, Any] | None) -> bool:
    """Whether a scale-down held for the replicas on its brokers is under way (the rebalancer
    moves them, is about to, or has and the topics' status has yet to show it) rather than
    blocked: only a Blocked rebalance (a plan that cannot be met, a cluster that cannot be
    reached) blocks it, or one that has never run (no status.rebalance: no rebalancer has looked)."""
    return bool(rebalance) and rebalance.get("phase") not in (None, BLOCKED)


def condition_fields(rebalance: Mapping[str, Any] | None) -> tuple[bool, str, str] | None:
    """(status, reason, message) of the Rebalancing condition, None before any rebalance status."""
    r = rebalance or {}
    phase = r.get("phase")
    if not phase:
        return None
    if phase == MOVING:
        return True, str(r.get("reason") or REQUESTED), str(r.get("message") or "")
    return False, str(phase), str(r.get("message") or "")
