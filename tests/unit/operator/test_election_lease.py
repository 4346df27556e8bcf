"""The election's pure decisions (operator/flotilla_operator/election/lease.py) and its runner
(election/elector.py) against an in-memory Lease store with compare-and-set, on fake clocks: who
acquires, who waits and for how long, when a silent holder's Lease is taken over, when a leader
must stop, and that a released Lease is free at once."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from flotilla_operator.clients.kube import ApiError
from flotilla_operator.election import lease as L
from flotilla_operator.election.elector import Elector
from flotilla_operator.election.health import Health

T = L.Timing(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2)
WALL = datetime(2026, 1, 1, tzinfo=timezone.utc)


def held(holder: str | None, renew: str = "2026-01-01T00:00:00.000000Z", transitions: int = 0) -> dict:
    spec = {"leaseDurationSeconds": 15, "renewTime": renew, "acquireTime": renew, "leaseTransitions": transitions}
    if holder is not None:
        spec["holderIdentity"] = holder
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "op", "namespace": "ns", "resourceVersion": "7"}, "spec": spec}


def test_timing_must_leave_room_between_renew_deadline_and_duration():
    with pytest.raises(ValueError):
        L.Timing(lease_duration_s=10, renew_deadline_s=10, retry_period_s=2)
    with pytest.raises(ValueError):
        L.Timing(lease_duration_s=15, renew_deadline_s=10, retry_period_s=10)


def test_no_lease_is_created_with_this_candidate_as_holder():
    d = L.decide(None, None, "a", T, now=0, wall=WALL, namespace="ns", name="op")
    assert d.action == L.ACQUIRE and d.create
    assert d.body["metadata"] == {"name": "op", "namespace": "ns", "labels": L.LABELS}
    assert d.body["spec"]["holderIdentity"] == "a" and d.body["spec"]["leaseDurationSeconds"] == 15
    assert d.body["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z" and d.body["spec"]["leaseTransitions"] == 0


def test_a_live_holder_is_waited_for_by_our_own_clock_not_its_renew_time():
    lease = held("b", renew="1999-01-01T00:00:00.000000Z")  # a skewed writer's clock counts for nothing
    seen = L.observe(None, lease, now=100.0)
    d = L.decide(lease, seen, "a", T, now=100.0, wall=WALL)
    assert d.action == L.WAIT and d.holder == "b" and d.wait_s == 15
    seen = L.observe(seen, lease, now=114.0)  # unchanged: still seen at 100
    assert L.decide(lease, seen, "a", T, now=114.0, wall=WALL).action == L.WAIT
    d = L.decide(lease, seen, "a", T, now=115.0, wall=WALL)
    assert d.action == L.ACQUIRE and not d.create
    assert d.body["spec"]["holderIdentity"] == "a" and d.body["spec"]["leaseTransitions"] == 1
    assert d.body["metadata"]["resourceVersion"] == "7"  # a compare-and-set of what was read
    assert lease["spec"]["holderIdentity"] == "b"  # the read object is left as it was


def test_a_renewal_seen_restarts_the_wait():
    seen = L.observe(None, held("b", renew="r1"), now=0.0)
    seen = L.observe(seen, held("b", renew="r2"), now=12.0)
    assert seen.seen_at == 12.0
    assert L.decide(held("b", renew="r2"), seen, "a", T, now=20.0, wall=WALL).action == L.WAIT
    assert not L.expired(seen, 26.9) and L.expired(seen, 27.0)


def test_the_holder_renews_and_keeps_its_transitions():
    d = L.decide(held("a", transitions=4), None, "a", T, now=0, wall=WALL + timedelta(seconds=3))
    assert d.action == L.RENEW
    assert d.body["spec"]["renewTime"] == "2026-01-01T00:00:03.000000Z"
    assert d.body["spec"]["acquireTime"] == "2026-01-01T00:00:00.000000Z" and d.body["spec"]["leaseTransitions"] == 4


def test_a_released_lease_is_taken_at_once():
    lease = L.released(held("b", transitions=2), "b", WALL)
    assert "holderIdentity" not in lease["spec"] and lease["spec"]["leaseDurationSeconds"] == 1
    seen = L.observe(None, lease, now=50.0)
    d = L.decide(lease, seen, "a", T, now=50.0, wall=WALL)
    assert d.action == L.ACQUIRE and d.body["spec"]["leaseTransitions"] == 3
    assert L.released(held("b"), "a", WALL) is None  # only the holder releases


def test_a_leader_stops_leading_at_the_renew_deadline():
    assert L.still_leading(100.0, 109.9, T)
    assert not L.still_leading(100.0, 110.0, T)
    assert not L.still_leading(None, 0.0, T)


# ---------------------------------------------------------------------------------------------
# The runner, on an in-memory API with compare-and-set


class FakeKube:
    def __init__(self) -> None:
        self.lease: dict | None = None
        self.version = 0
        self.down = False

    async def get(self, kind, namespace, name):
        if self.down:
            raise ApiError(503, "unavailable")
        return None if self.lease is None else {**self.lease, "spec": dict(self.lease["spec"])}

    async def create(self, obj):
        if self.lease is not None:
            return None
        return self._store(obj)

    async def replace(self, obj):
        if self.down:
            raise ApiError(503, "unavailable")
        if obj["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "conflict")
        return self._store(obj)

    def _store(self, obj):
        self.version += 1
        self.lease = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)},
                      "spec": dict(obj["spec"])}
        return self.lease


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def electors(kube, clock, *names):
    wall = lambda: WALL + timedelta(seconds=clock.t)  # noqa: E731
    return [Elector(kube, "ns", "op", n, T, monotonic=clock, wall=wall) for n in names]


async def test_two_candidates_one_leads_the_other_takes_over_after_the_duration():
    kube, clock = FakeKube(), Clock()
    a, b = electors(kube, clock, "a", "b")
    assert await a.try_once() and kube.lease["spec"]["holderIdentity"] == "a"
    assert not await b.try_once() and b.holder == "a"
    clock.t += 5
    assert await a.try_once()  # renewed
    assert not await b.try_once()  # b sees the renewal now
    clock.t += 14
    assert not await b.try_once()  # 14 s since b saw it
    clock.t += 1
    assert await b.try_once() and kube.lease["spec"]["holderIdentity"] == "b"
    assert kube.lease["spec"]["leaseTransitions"] == 1
    assert not await a.try_once() and a.holder == "b"  # the old leader sees it is deposed


async def test_keep_returns_when_another_holder_took_the_lease():
    kube, clock = FakeKube(), Clock()
    (a,) = electors(kube, clock, "a")
    assert await a.campaign(asyncio.Event()) and a.leading
    kube.lease["spec"]["holderIdentity"] = "intruder"
    a.timing = L.Timing(lease_duration_s=0.3, renew_deadline_s=0.2, retry_period_s=0.01)
    why = await asyncio.wait_for(a.keep(), 5)
    assert "intruder" in why and not a.leading


async def test_keep_returns_at_the_renew_deadline_when_the_api_server_is_gone():
    kube, clock = FakeKube(), Clock()
    (a,) = electors(kube, clock, "a")
    a.timing = L.Timing(lease_duration_s=0.3, renew_deadline_s=0.2, retry_period_s=0.01)
    assert await a.try_once()
    a.leading = True
    kube.down = True
    clock.t += 0.2
    why = await asyncio.wait_for(a.keep(), 5)
    assert "renew deadline" in why and not a.leading


async def test_release_lets_the_standby_take_over_without_waiting():
    kube, clock = FakeKube(), Clock()
    a, b = electors(kube, clock, "a", "b")
    assert await a.try_once() and not await b.try_once()
    assert await a.release()
    assert await b.try_once() and kube.lease["spec"]["holderIdentity"] == "b"
    assert not await a.release()  # no longer ours: nothing written


async def test_campaign_stops_when_asked():
    kube, clock = FakeKube(), Clock()
    a, b = electors(kube, clock, "a", "b")
    assert await a.try_once()
    stop = asyncio.Event()
    b.timing = L.Timing(lease_duration_s=3, renew_deadline_s=2, retry_period_s=0.01)
    task = asyncio.create_task(b.campaign(stop))
    await asyncio.sleep(0.05)
    stop.set()
    assert await asyncio.wait_for(task, 5) is False and b.holder == "a"


async def test_ready_is_a_leader_with_kopf_started_or_a_standby_that_reads_the_lease():
    kube, clock = FakeKube(), Clock()
    a, b = electors(kube, clock, "a", "b")
    ha, hb = Health(a, monotonic=clock), Health(b, monotonic=clock)
    assert not hb.ready()  # never read the Lease
    assert await a.try_once() and not await b.try_once()
    a.leading = True
    assert hb.ready() and hb.state()["role"] == "standby"
    assert not ha.ready()  # kopf not started yet
    ha.kopf_ready = asyncio.Event()
    ha.kopf_ready.set()
    assert ha.ready() and ha.state() == {"identity": "a", "role": "leader", "holder": "a", "lease": "ns/op",
                                         "ready": True}
    clock.t += 10  # neither renewed nor read for the renew deadline
    assert not ha.ready() and not hb.ready()


async def test_losing_the_lease_exits_the_process_at_once_and_a_clean_stop_does_not(monkeypatch):
    from flotilla_operator.election import process

    exits = []
    monkeypatch.setattr(process.os, "_exit", exits.append)

    async def lost():
        return "b holds the Lease now"

    task = asyncio.create_task(lost())
    await task
    process._on_keeper_done(task)
    assert exits == [process.EXIT_LOST]
    cancelled = asyncio.create_task(asyncio.sleep(10))
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    process._on_keeper_done(cancelled)
    assert exits == [process.EXIT_LOST]  # a clean stop cancels the keeper: no exit
