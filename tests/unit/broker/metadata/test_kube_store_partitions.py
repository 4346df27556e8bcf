"""What the Kubernetes store tells a broker about its own standing when the API server is cut
off (issue 35), with the store's clock moved by the test:
- registration_may_have_lapsed: true from 90% of a Lease after the last renewal that landed was
  sent (another broker judges it expired no sooner than a whole Lease after it saw it), and
  false again once a renewal lands; the subscribers hear of it at every tick meanwhile;
- current_since: when the view last became current, None while stale; a view that goes stale
  restarts both watches, and is current again only after they listed."""

from __future__ import annotations

import asyncio
import time
import types

from broker.metadata import kube_store
from broker.metadata.kube_store import LEADER_FENCE_AT, KubernetesMetadataStore
from broker.metadata.store import BrokerRegistration, Endpoint


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store(monkeypatch) -> tuple[KubernetesMetadataStore, Clock]:
    clock = Clock()
    # the store's own clock only (the event loop keeps the real one)
    fake_time = types.SimpleNamespace(**{n: getattr(time, n) for n in dir(time) if not n.startswith("_")})
    fake_time.monotonic = clock
    monkeypatch.setattr(kube_store, "time", fake_time)
    s = KubernetesMetadataStore(cluster_id="c", cluster_name="fleet", namespace="ns", lease_duration_s=10)
    return s, clock


def test_a_registration_may_have_lapsed_from_nine_tenths_of_a_lease_after_the_last_renewal_was_sent(monkeypatch):
    s, clock = store(monkeypatch)
    heard = []
    s.on_registration_lapse(lambda: heard.append(clock.now))
    assert not s.registration_may_have_lapsed()  # not registered yet: leads nothing
    s._registration = BrokerRegistration(1, "inc-1", (Endpoint("PLAINTEXT", "localhost", 9092),))
    s._renewed(sent=clock.now)
    clock.now += LEADER_FENCE_AT * 10 - 0.01
    s._check_lapse()
    assert not s.registration_may_have_lapsed() and heard == []
    clock.now += 0.02
    s._check_lapse()
    s._check_lapse()
    assert s.registration_may_have_lapsed() and len(heard) == 2  # every tick while lapsed
    s._renewed(sent=clock.now - 1)  # a renewal sent a second ago has landed
    assert not s.registration_may_have_lapsed()
    s._registration = None  # lost to another process (or closed): nothing is ours
    assert s.registration_may_have_lapsed()


async def test_a_stale_view_restarts_the_watches_and_is_current_only_after_they_listed(monkeypatch):
    s, clock = store(monkeypatch)
    started = []

    async def watch(kind, rv):
        started.append((kind, rv))
        await asyncio.sleep(3600)
    monkeypatch.setattr(s, "_watch", watch)
    s._watches = {k: asyncio.get_running_loop().create_task(watch(k, "5")) for k in ("leases", "topics")}
    await asyncio.sleep(0)  # both watching
    s._connected = {"leases": True, "topics": True}
    s._contact_at = clock.now
    assert s._judge_view() and s.current_since() == clock.now
    clock.now += s._contact_s + 1  # no answer for longer than the contact window: stale
    assert not s._judge_view() and s.current_since() is None
    await asyncio.sleep(0.01)
    assert started == [("leases", "5"), ("topics", "5"), ("leases", None), ("topics", None)]  # None: list first
    assert s._connected == {"leases": False, "topics": False}
    s._contact_at = clock.now  # a probe answers again: not enough while the watches have not listed
    assert not s._judge_view()
    s._connected = {"leases": True, "topics": True}  # both listed (what _relist sets)
    assert s._judge_view() and s.current_since() == clock.now
    for t in s._tasks + list(s._watches.values()):
        t.cancel()
    await asyncio.gather(*s._tasks, *s._watches.values(), return_exceptions=True)
