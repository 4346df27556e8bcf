"""A leader whose Lease may have lapsed, and whose in-sync followers stopped fetching from it,
takes no more writes (issue 35): the controller may have elected another leader, so waiting
acks=all produces are answered NOT_LEADER_OR_FOLLOWER (retriable: the client finds the new
leader) at once instead of at their timeout. Through an outage of the API server itself, when
every Lease lapses but the followers fetch on, writes go on. Real logs and ReplicaManager; the
Lease clock is the flag the broker wires from its store."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.metadata.store import PartitionState
from broker.replica.delayed_produce import DelayedProduce
from tests.unit.broker.test_replica_roles import ImageStore, batch, manager, topic


async def parked_write(tmp_path):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store)
    rm.follower_silence_ms = 100
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    payload, headers = batch(2)
    result = rm.append(part, payload, headers)
    op = DelayedProduce(rm, {("t", 0): (part, 0, result.last_offset + 1)})
    waiting = asyncio.ensure_future(rm.produce_purgatory.wait(op, [("t", 0)], 30))
    return rm, part, op, waiting


async def test_waiting_writes_are_answered_when_the_lease_lapsed_and_a_follower_went_silent(tmp_path):
    rm, part, op, waiting = await parked_write(tmp_path)
    lapsed = False
    rm.may_have_lapsed = lambda: lapsed
    rm.follower_fetched(part, 2, 1, 0, 0)
    rm.follower_fetched(part, 3, 1, 0, 0)
    await asyncio.sleep(0.15)
    rm.registration_lapsed()
    assert not op.completed  # the Lease is fine: followers are only slow
    lapsed = True
    rm.follower_fetched(part, 2, 1, 0, 0)  # 2 fetches on, 3 follows someone else now
    rm.registration_lapsed()
    assert await asyncio.wait_for(waiting, 1) and op.results == {("t", 0): ErrorCode.not_leader_or_follower}
    assert rm.writes_fenced(part)
    rm.close()


async def test_writes_go_on_through_an_api_server_outage_while_the_followers_fetch(tmp_path):
    rm, part, op, waiting = await parked_write(tmp_path)
    rm.may_have_lapsed = lambda: True  # every Lease lapses in an outage of the API server
    for _ in range(3):
        rm.follower_fetched(part, 2, 1, 0, 0)
        rm.follower_fetched(part, 3, 1, 0, 0)
        rm.registration_lapsed()
        assert not rm.writes_fenced(part)
        await asyncio.sleep(0.05)
    rm.follower_fetched(part, 2, 2, 0, 0)
    rm.follower_fetched(part, 3, 2, 0, 0)
    assert await asyncio.wait_for(waiting, 1) and op.results == {("t", 0): ErrorCode.none}
    rm.close()
