"""Issue 44: every wait on the acks=all path ends on the event that satisfies it, not on a timer.
Checked by the event itself: the waits here have 30 s timeouts, and each assertion is made right
after the event, before the loop could run a timer (on a real ReplicaManager over real logs).
Also the split of a request's time into stages (broker/apis/request_stages.py) and the time a
purgatory records for the request parked in it."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.apis.fetch_session import CachedPartition
from broker.apis.request_stages import RequestStages
from broker.metadata.store import PartitionState
from broker.replica.delayed_fetch import DelayedFetch
from broker.replica.delayed_produce import DelayedProduce
from broker.replica.purgatory import PARKED, ParkedTime
from tests.unit.broker.test_replica_roles import ImageStore, batch, manager, topic

LONG = 30.0  # no wait here may end by its timeout


def leader(tmp_path):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    return rm, rm.get("t", 0)


async def test_a_follower_fetch_parked_before_an_append_completes_on_the_append(tmp_path):
    rm, part = leader(tmp_path)
    cp = CachedPartition("t", None, 0, part.log.log_end_offset, 1 << 20)
    op = DelayedFetch(rm, {("t", 0): cp}.get, {}, min_bytes=1, replica=True)
    waiting = asyncio.ensure_future(rm.fetch_purgatory.wait(op, [("t", 0)], LONG))
    await asyncio.sleep(0)
    assert rm.fetch_purgatory.watched() == 1 and not op.completed  # parked: nothing to read yet
    payload, headers = batch(2)
    rm.append(part, payload, headers)
    assert op.completed  # by the append itself, before any timer could fire
    assert await waiting is True
    rm.close()


async def test_a_consumer_fetch_parked_completes_when_the_high_watermark_passes_its_offset(tmp_path):
    rm, part = leader(tmp_path)
    cp = CachedPartition("t", None, 0, 0, 1 << 20)
    op = DelayedFetch(rm, {("t", 0): cp}.get, {}, min_bytes=1)
    waiting = asyncio.ensure_future(rm.fetch_purgatory.wait(op, [("t", 0)], LONG))
    await asyncio.sleep(0)
    payload, headers = batch(2)
    rm.append(part, payload, headers)
    assert not op.completed  # appended, not yet committed: a consumer reads below the high watermark
    rm.follower_fetched(part, 2, 2, 0, 0)
    assert not op.completed
    rm.follower_fetched(part, 3, 2, 0, 0)
    assert part.log.high_watermark == 2 and op.completed  # by the last follower's fetch
    assert await waiting is True
    rm.close()


async def test_an_acks_all_produce_completes_when_the_last_needed_followers_fetch_arrives(tmp_path):
    rm, part = leader(tmp_path)
    payload, headers = batch(3)
    result = rm.append(part, payload, headers)
    op = DelayedProduce(rm, {("t", 0): (part, 0, result.last_offset + 1)})
    spent = ParkedTime()
    token = PARKED.set(spent)
    try:
        waiting = asyncio.ensure_future(rm.produce_purgatory.wait(op, [("t", 0)], LONG))
    finally:
        PARKED.reset(token)
    await asyncio.sleep(0)
    rm.follower_fetched(part, 2, 3, 0, 0)
    assert not op.completed  # follower 3 is in the ISR and has nothing yet
    rm.follower_fetched(part, 3, 2, 0, 0)
    assert not op.completed  # it has two of the three records
    rm.follower_fetched(part, 3, 3, 0, 0)
    assert op.completed  # by the fetch that brings the last needed follower to the end
    assert await waiting is True and op.results == {("t", 0): ErrorCode.none}
    # The purgatory counted the wait for the request parked in it: remote until the completing
    # fetch, resume from then until the waiting task ran again.
    assert spent.remote_ns > 0 and spent.resume_ns >= 0
    rm.close()


async def test_a_request_is_told_once_when_it_parks(tmp_path):
    rm, part = leader(tmp_path)
    payload, headers = batch(1)
    result = rm.append(part, payload, headers)
    calls = []
    spent = ParkedTime(on_park=lambda: calls.append("parked"))
    token = PARKED.set(spent)
    try:
        waiting = asyncio.ensure_future(rm.wait_for_isr({("t", 0): (part, 0, result.last_offset + 1)}, LONG))
        await asyncio.sleep(0)
        assert calls == ["parked"]
        rm.follower_fetched(part, 2, 1, 0, 0)
        rm.follower_fetched(part, 3, 1, 0, 0)
        assert await waiting == {("t", 0): ErrorCode.none}
        assert calls == ["parked"] and spent.on_park is None
    finally:
        PARKED.reset(token)
    rm.close()


def test_the_stages_add_up_to_the_total():
    stages = RequestStages(None, received_ns=1_000)
    stages.started_ns, stages.ended_ns = 1_200, 9_000
    stages.parked.remote_ns, stages.parked.resume_ns = 5_000, 700
    split = stages.split(send_started_ns=9_300, sent_ns=9_800)
    assert split == {"queue": 200, "local": 7_800 - 5_000 - 700, "remote": 5_000,
                     "response_queue": 700 + 300, "send": 500, "total": 8_800}
    assert sum(v for k, v in split.items() if k != "total") == split["total"]


class Observed:
    def __init__(self) -> None:
        self.values: list[float] = []

    def observe(self, v: float) -> None:
        self.values.append(v)


def test_an_unanswered_request_ends_with_its_handler():
    from broker.apis.request_stages import StageHistograms

    h = StageHistograms(*(Observed() for _ in range(6)))
    stages = RequestStages(h, received_ns=0)
    stages.started_ns, stages.ended_ns = 100, 1_100
    stages.unanswered()
    assert h.total.values == [1_100 / 1e9] and h.send.values == [0.0] and h.local.values == [1_000 / 1e9]
