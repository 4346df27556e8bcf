"""Lease liveness judged by our own clock (renewals we saw), not by another machine's renewTime."""

from datetime import datetime, timedelta, timezone

from broker.metadata.lease_clock import LeaseClock


class FakeTime:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_live_until_a_duration_passes_without_a_renewal():
    t = FakeTime()
    c = LeaseClock(monotonic=t)
    c.observe("b1", "inc-1", "r1", 10)
    t.now += 9.9
    assert c.live("b1")
    c.observe("b1", "inc-1", "r1", 10)  # the same renewTime again is not a renewal
    t.now += 0.2
    assert not c.live("b1")
    c.observe("b1", "inc-1", "r2", 10)
    assert c.live("b1")


def test_a_released_lease_is_not_live_and_a_long_dead_one_is_not_revived():
    t = FakeTime()
    c = LeaseClock(monotonic=t)
    c.observe("ctl", "", "r1", 10)
    assert not c.live("ctl")
    old = datetime.now(timezone.utc) - timedelta(hours=1)
    c.observe("b2", "inc-2", "r1", 10, renewed_wall=old)
    assert not c.live("b2")
    c.observe("b3", "inc-3", "r1", 10, renewed_wall=datetime.now(timezone.utc) - timedelta(seconds=5))
    assert c.live("b3")


def test_restart_after_a_stale_view_judges_afresh_only_leases_live_when_it_began():
    t = FakeTime()
    c = LeaseClock(monotonic=t)
    c.observe("dead-before", "x", "r", 10)
    t.now += 11
    c.observe("alive", "y", "r", 10)
    stale_since = t.now
    t.now += 60  # the outage
    assert not c.live("alive")
    c.restart(stale_since)
    assert c.live("alive") and not c.live("dead-before")
    t.now += 10.1
    assert not c.live("alive")
