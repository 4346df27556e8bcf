"""The operator's election Lease, decided without I/O: what to write next, from the Lease as read,
what this candidate saw of it before, and its own clocks.

As client-go's leaderelection: a Lease held by another is taken only once `leaseDurationSeconds`
have passed *on this process's monotonic clock* since it last saw the Lease change (a new holder or
renewTime); the writer's renewTime, from another machine's clock, is never compared with ours. A
leader that has not renewed within `renew_deadline_s` (less than the duration) stops leading
before any candidate can take over. A Lease released by its holder (no holderIdentity) is free at
once. Every write is a compare-and-set on the resourceVersion read.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

ACQUIRE, RENEW, WAIT = "acquire", "renew", "wait"
LABELS = {"app.kubernetes.io/name": "flotilla", "app.kubernetes.io/component": "operator"}


@dataclass(frozen=True)
class Timing:
    """client-go's defaults; tests pass shorter ones."""

    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("leader election needs 0 < retry period < renew deadline < lease duration, got "
                             f"{self.retry_period_s}, {self.renew_deadline_s}, {self.lease_duration_s}")


@dataclass(frozen=True)
class Seen:
    """The Lease as this candidate last saw it change, and when (monotonic seconds)."""

    holder: str
    renew_time: str
    duration_s: float
    seen_at: float


@dataclass(frozen=True)
class Decision:
    action: str  # ACQUIRE (create or take over), RENEW, or WAIT
    body: dict[str, Any] | None  # the Lease to create or to PUT; None for WAIT
    create: bool = False  # no Lease yet: POST instead of PUT
    wait_s: float = 0.0  # WAIT: how long until the holder's Lease would expire, as we see it
    holder: str = ""


def micro_time(now: datetime) -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds, UTC."""
    return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def holder_of(lease: dict[str, Any] | None) -> str:
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def observe(previous: Seen | None, lease: dict[str, Any] | None, now: float) -> Seen | None:
    """What we remember after reading `lease` at monotonic `now`: a changed holder or renewTime
    counts as a renewal seen now; the same one keeps the moment we first saw it."""
    if lease is None:
        return None
    spec = lease.get("spec") or {}
    holder, renew = spec.get("holderIdentity") or "", spec.get("renewTime") or ""
    duration = float(spec.get("leaseDurationSeconds") or 0)
    if previous is not None and previous.holder == holder and previous.renew_time == renew:
        return Seen(holder, renew, duration, previous.seen_at)
    return Seen(holder, renew, duration, now)


def expired(seen: Seen | None, now: float) -> bool:
    """The holder's Lease has run out by our clock (or was released: no holder)."""
    return seen is None or not seen.holder or now >= seen.seen_at + seen.duration_s


def new_lease(namespace: str, name: str, identity: str, timing: Timing, wall: datetime) -> dict[str, Any]:
    t = micro_time(wall)
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {"holderIdentity": identity, "leaseDurationSeconds": _whole(timing.lease_duration_s),
                 "acquireTime": t, "renewTime": t, "leaseTransitions": 0},
    }


def decide(lease: dict[str, Any] | None, seen: Seen | None, identity: str, timing: Timing, *,
           now: float, wall: datetime, namespace: str = "", name: str = "") -> Decision:
    """The next step of a candidate (or of the leader) that has just read `lease` (None: there is
    none) and remembers `seen` (already updated with `observe`)."""
    if lease is None:
        return Decision(ACQUIRE, new_lease(namespace, name, identity, timing, wall), create=True, holder=identity)
    holder = holder_of(lease)
    spec = lease.get("spec") or {}
    body = copy.deepcopy(lease)
    new = body.setdefault("spec", {})
    new["renewTime"] = micro_time(wall)
    new["leaseDurationSeconds"] = _whole(timing.lease_duration_s)
    if holder == identity:
        return Decision(RENEW, body, holder=identity)
    if not expired(seen, now):
        assert seen is not None
        return Decision(WAIT, None, wait_s=seen.seen_at + seen.duration_s - now, holder=holder)
    new["holderIdentity"] = identity
    new["acquireTime"] = new["renewTime"]
    new["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
    return Decision(ACQUIRE, body, holder=identity)


def still_leading(last_renewed: float | None, now: float, timing: Timing) -> bool:
    """A leader keeps leading only while its last successful renewal (monotonic) is younger than
    the renew deadline: past it, a candidate may soon take the Lease, so it must stop first."""
    return last_renewed is not None and now - last_renewed < timing.renew_deadline_s


def released(lease: dict[str, Any], identity: str, wall: datetime) -> dict[str, Any] | None:
    """The Lease to write on a clean stop: no holder, so a candidate takes it at its next try
    (client-go's ReleaseOnCancel). None when we do not hold it (nothing to release)."""
    if holder_of(lease) != identity:
        return None
    body = copy.deepcopy(lease)
    spec = body["spec"]
    spec.pop("holderIdentity", None)
    spec["leaseDurationSeconds"] = 1
    spec["renewTime"] = micro_time(wall)
    return body


def _whole(seconds: float) -> int:
    """leaseDurationSeconds is an integer: round up, never below one second."""
    return max(1, int(-(-seconds // 1)))
