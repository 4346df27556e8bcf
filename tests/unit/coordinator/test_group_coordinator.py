"""The group coordinator's API logic on a real (socket-less) broker: logs, topics and the
`__consumer_offsets` partitions are real; requests are direct coordinator calls."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from kio.schema.errors import ErrorCode

from broker.config import load_config
from broker.coordinator.group.group_metadata import GroupState, OffsetAndMetadata
from broker.coordinator.group.coordinator import LeaveMember
from broker.server.broker import Broker

E = ErrorCode


def make_broker(tmp_path, **overrides) -> Broker:
    settings = {"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": "3",
                "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "10",
                "listeners": "PLAINTEXT://127.0.0.1:0"}
    settings.update({k.replace("__", "."): str(v) for k, v in overrides.items()})
    return Broker(load_config(None, [f"{k}={v}" for k, v in settings.items()]))


async def open_broker(tmp_path, **overrides) -> Broker:
    b = make_broker(tmp_path, **overrides)
    await b.start_core()
    await b.groups.ensure_topic(timeout_s=10)
    return b


async def close_broker(b: Broker) -> None:
    await b.groups.stop()
    await b.controller.stop()
    b.replicas.close()


@pytest.fixture
async def broker(tmp_path):
    b = await open_broker(tmp_path)
    yield b
    await close_broker(b)


def join(b: Broker, group="g", member_id="", instance=None, protocols=(("range", b"meta"),), session_ms=5000,
         rebalance_ms=5000, v4=True):
    return b.groups.join_group(group_id=group, member_id=member_id, group_instance_id=instance,
                               require_known_member_id=v4, client_id="c", client_host="/127.0.0.1",
                               rebalance_timeout_ms=rebalance_ms, session_timeout_ms=session_ms,
                               protocol_type="consumer", protocols=list(protocols))


def sync(b: Broker, member_id, generation, group="g", assignments=None, instance=None):
    return b.groups.sync_group(group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance, protocol_type=None, protocol_name=None,
                               assignments=assignments or {})


async def join_new(b: Broker, **kw):
    """v4+ flow: MEMBER_ID_REQUIRED, then rejoin with the id; returns the task of the rejoin."""
    first = await join(b, **kw)
    assert first.error == E.member_id_required and first.member_id
    kw.pop("member_id", None)
    return asyncio.ensure_future(join(b, member_id=first.member_id, **kw)), first.member_id


async def single_member_group(b: Broker, group="g", **kw):
    task, mid = await join_new(b, group=group, **kw)
    res = await asyncio.wait_for(task, 5)
    assert res.error == E.none
    s = await sync(b, mid, res.generation_id, group=group, assignments={mid: b"A"})
    assert s.error == E.none and s.assignment == b"A"
    return mid, res.generation_id


async def test_member_id_required_then_join_as_leader(broker):
    first = await join(broker)
    assert first.error == E.member_id_required
    assert first.member_id.startswith("c-")
    res = await asyncio.wait_for(join(broker, member_id=first.member_id), 5)
    assert res.error == E.none
    assert res.generation_id == 1 and res.leader_id == first.member_id and res.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in res.members] == [(first.member_id, b"meta")]
    assert broker.groups.groups["g"].is_(GroupState.COMPLETING_REBALANCE)


async def test_v3_join_gets_an_id_at_once(broker):
    res = await asyncio.wait_for(join(broker, v4=False), 5)
    assert res.error == E.none and res.member_id


async def test_invalid_session_timeout(broker):
    res = await join(broker, session_ms=5)
    assert res.error == E.invalid_session_timeout
    res = await join(broker, session_ms=10**8)
    assert res.error == E.invalid_session_timeout


async def test_unknown_member_on_unknown_group(broker):
    assert (await join(broker, member_id="nobody")).error == E.unknown_member_id
    assert (await sync(broker, "nobody", 1)).error == E.unknown_member_id
    assert broker.groups.heartbeat(group_id="g", member_id="nobody", group_instance_id=None,
                                   generation_id=1) == E.unknown_member_id


async def test_inconsistent_protocol(broker):
    await single_member_group(broker)
    res = await join(broker, protocols=(("sticky", b""),))
    assert res.error == E.inconsistent_group_protocol


async def test_rebalance_waits_for_every_member_then_sync_relays_assignments(broker):
    a, gen1 = await single_member_group(broker)
    # b joins: the group rebalances; a learns it from its heartbeat and rejoins.
    b_task, b = await join_new(broker)
    await asyncio.sleep(0.05)
    assert not b_task.done()
    assert broker.groups.heartbeat(group_id="g", member_id=a, group_instance_id=None,
                                   generation_id=gen1) == E.rebalance_in_progress
    a_task = asyncio.ensure_future(join(broker, member_id=a))
    ra, rb = await asyncio.wait_for(asyncio.gather(a_task, b_task), 5)
    assert ra.generation_id == rb.generation_id == gen1 + 1
    assert ra.leader_id == rb.leader_id == a
    assert sorted(m.member_id for m in ra.members) == sorted([a, b])  # leader gets the list
    assert rb.members == []  # followers do not
    # The follower's SyncGroup waits for the leader's.
    b_sync = asyncio.ensure_future(sync(broker, b, rb.generation_id))
    await asyncio.sleep(0.05)
    assert not b_sync.done()
    sa = await sync(broker, a, ra.generation_id, assignments={a: b"\x01A", b: b"\x02B"})
    sb = await asyncio.wait_for(b_sync, 5)
    assert (sa.error, sa.assignment) == (E.none, b"\x01A")
    assert (sb.error, sb.assignment) == (E.none, b"\x02B")
    assert broker.groups.groups["g"].is_(GroupState.STABLE)
    assert broker.groups.heartbeat(group_id="g", member_id=b, group_instance_id=None,
                                   generation_id=rb.generation_id) == E.none
    assert broker.groups.heartbeat(group_id="g", member_id=b, group_instance_id=None,
                                   generation_id=gen1) == E.illegal_generation


async def test_member_that_does_not_rejoin_is_dropped_after_rebalance_timeout(broker):
    a, gen1 = await single_member_group(broker, rebalance_ms=200)
    b_task, b = await join_new(broker, rebalance_ms=200)
    rb = await asyncio.wait_for(b_task, 5)  # a never rejoins
    assert rb.error == E.none and rb.leader_id == b
    assert not broker.groups.groups["g"].has(a)


async def test_session_timeout_removes_member_and_rebalances(broker):
    a, gen = await single_member_group(broker)
    b_task, b = await join_new(broker, session_ms=300)
    a_task = asyncio.ensure_future(join(broker, member_id=a))
    ra, rb = await asyncio.wait_for(asyncio.gather(a_task, b_task), 5)
    await sync(broker, a, ra.generation_id, assignments={a: b"A", b: b"B"})
    await sync(broker, b, rb.generation_id)
    # b stops heartbeating; a keeps going.
    for _ in range(8):
        await asyncio.sleep(0.1)
        broker.groups.heartbeat(group_id="g", member_id=a, group_instance_id=None, generation_id=ra.generation_id)
    group = broker.groups.groups["g"]
    assert not group.has(b)
    assert group.is_(GroupState.PREPARING_REBALANCE)
    assert broker.groups.heartbeat(group_id="g", member_id=b, group_instance_id=None,
                                   generation_id=ra.generation_id) == E.unknown_member_id


async def test_leave_group_triggers_rebalance_and_empty_group(broker):
    a, gen = await single_member_group(broker)
    top, errs = broker.groups.leave_group("g", [LeaveMember(a, None), LeaveMember("ghost", None)])
    assert top == E.none and errs == [E.none, E.unknown_member_id]
    group = broker.groups.groups["g"]
    assert group.is_(GroupState.EMPTY) and group.generation_id == gen + 1


async def test_static_member_rejoin_without_rebalance_and_fencing(broker):
    first = await asyncio.wait_for(join(broker, instance="inst-1"), 5)  # no MEMBER_ID_REQUIRED for static
    assert first.error == E.none
    s = await sync(broker, first.member_id, first.generation_id, assignments={first.member_id: b"A"},
                   instance="inst-1")
    assert s.assignment == b"A"
    # The same instance restarts and joins with no member id.
    again = await asyncio.wait_for(join(broker, instance="inst-1"), 5)
    assert again.error == E.none
    assert again.member_id != first.member_id
    assert again.generation_id == first.generation_id  # no rebalance
    assert again.skip_assignment  # it is the leader: keep the current assignment
    s2 = await sync(broker, again.member_id, again.generation_id, instance="inst-1")
    assert (s2.error, s2.assignment) == (E.none, b"A")
    assert broker.groups.groups["g"].is_(GroupState.STABLE)
    # The old member id is fenced.
    assert broker.groups.heartbeat(group_id="g", member_id=first.member_id, group_instance_id="inst-1",
                                   generation_id=first.generation_id) == E.fenced_instance_id
    top, errs = broker.groups.leave_group("g", [LeaveMember(first.member_id, "inst-1")])
    assert errs == [E.fenced_instance_id]


async def test_offset_commit_validation(broker):
    await broker.topics.create("t", 2, timeout_s=10)
    off = {("t", 0): OffsetAndMetadata(5, metadata="m"), ("nope", 0): OffsetAndMetadata(1)}
    # Standalone commit on an unknown group.
    res = await broker.groups.commit_offsets(group_id="simple", member_id="", group_instance_id=None, generation_id=-1,
                                       offsets=off)
    assert res == {("t", 0): E.none, ("nope", 0): E.unknown_topic_or_partition}
    a, gen = await single_member_group(broker)
    ok = {("t", 1): OffsetAndMetadata(9)}
    assert await broker.groups.commit_offsets(group_id="g", member_id="", group_instance_id=None, generation_id=-1,
                                        offsets=ok) == {("t", 1): E.unknown_member_id}
    assert await broker.groups.commit_offsets(group_id="g", member_id="x", group_instance_id=None, generation_id=gen,
                                        offsets=ok) == {("t", 1): E.unknown_member_id}
    assert await broker.groups.commit_offsets(group_id="g", member_id=a, group_instance_id=None, generation_id=gen + 5,
                                        offsets=ok) == {("t", 1): E.illegal_generation}
    assert await broker.groups.commit_offsets(group_id="g", member_id=a, group_instance_id=None, generation_id=gen,
                                        offsets=ok) == {("t", 1): E.none}
    assert await broker.groups.commit_offsets(group_id="other", member_id="m", group_instance_id=None, generation_id=3,
                                        offsets=ok) == {("t", 1): E.illegal_generation}
    big = {("t", 0): OffsetAndMetadata(1, metadata="x" * 5000)}
    assert await broker.groups.commit_offsets(group_id="simple", member_id="", group_instance_id=None,
                                        generation_id=-1, offsets=big) == {("t", 0): E.offset_metadata_too_large}
    err, got = broker.groups.fetch_offsets("g", [("t", 1), ("t", 0)])
    assert err == E.none and got[("t", 1)].offset == 9 and got[("t", 0)] is None
    err, everything = broker.groups.fetch_offsets("simple", None)
    assert list(everything) == [("t", 0)] and everything[("t", 0)].metadata == "m"


async def test_list_describe_delete(broker):
    a, gen = await single_member_group(broker)
    await broker.topics.create("t", 1, timeout_s=10)
    await broker.groups.commit_offsets(group_id="empty", member_id="", group_instance_id=None, generation_id=-1,
                                 offsets={("t", 0): OffsetAndMetadata(1)})
    err, groups = broker.groups.list_groups()
    assert sorted((g.group_id, g.protocol_type, g.state) for g in groups) == [
        ("empty", "", "Empty"), ("g", "consumer", "Stable")]
    d = broker.groups.describe_group("g")
    assert (d.error, d.state, d.protocol_type, d.protocol_data) == (E.none, "Stable", "consumer", "range")
    assert [(m.member_id, m.metadata, m.assignment) for m in d.members] == [(a, b"meta", b"A")]
    assert broker.groups.describe_group("missing").error == E.group_id_not_found
    assert await broker.groups.delete_groups(["g", "empty", "missing"]) == {
        "g": E.non_empty_group, "empty": E.none, "missing": E.group_id_not_found}
    assert broker.groups.fetch_offsets("empty", [("t", 0)])[1][("t", 0)] is None


async def test_state_survives_restart(tmp_path):
    b = await open_broker(tmp_path)
    try:
        await b.topics.create("t", 2, timeout_s=10)
        first = await asyncio.wait_for(join(b, instance="inst"), 5)
        await sync(b, first.member_id, first.generation_id, assignments={first.member_id: b"ASSIGN"}, instance="inst")
        assert await b.groups.commit_offsets(group_id="g", member_id=first.member_id, group_instance_id="inst",
                                       generation_id=first.generation_id,
                                       offsets={("t", 1): OffsetAndMetadata(17, 2, "meta")}) == {("t", 1): E.none}
        await b.groups.commit_offsets(group_id="gone", member_id="", group_instance_id=None, generation_id=-1,
                                offsets={("t", 0): OffsetAndMetadata(3)})
        assert await b.groups.delete_groups(["gone"]) == {"gone": E.none}
    finally:
        await close_broker(b)
    b2 = await open_broker(tmp_path)
    try:
        group = b2.groups.groups["g"]
        assert group.is_(GroupState.STABLE)
        assert (group.generation_id, group.protocol_name, group.leader_id) == (
            first.generation_id, "range", first.member_id)
        assert group.static_member_id("inst") == first.member_id
        assert group.get(first.member_id).assignment == b"ASSIGN"
        err, got = b2.groups.fetch_offsets("g", [("t", 1)])
        assert got[("t", 1)] == OffsetAndMetadata(17, 2, "meta", got[("t", 1)].commit_timestamp_ms)
        assert "gone" not in b2.groups.groups
        # The member carries on with its generation.
        assert b2.groups.heartbeat(group_id="g", member_id=first.member_id, group_instance_id="inst",
                                   generation_id=first.generation_id) == E.none
        # The static instance restarting too: no rebalance, same assignment.
        again = await asyncio.wait_for(join(b2, instance="inst"), 5)
        assert again.generation_id == first.generation_id
        s = await sync(b2, again.member_id, again.generation_id, instance="inst")
        assert s.assignment == b"ASSIGN"
    finally:
        await close_broker(b2)


async def test_expired_offsets_of_empty_groups(broker):
    await broker.topics.create("t", 1, timeout_s=10)
    await broker.groups.commit_offsets(group_id="old", member_id="", group_instance_id=None, generation_id=-1,
                                 offsets={("t", 0): OffsetAndMetadata(1, commit_timestamp_ms=1)})
    assert await broker.groups.expire_offsets(now=10**13) == 1
    assert "old" not in broker.groups.groups


async def test_log_cleaner_compacts_consumer_offsets_and_state_survives_restart(tmp_path):
    settings = dict(offsets__topic__num__partitions=1, offsets__topic__segment__bytes=2000,
                    log__cleaner__min__cleanable__ratio="0.1")
    b = await open_broker(tmp_path, **settings)
    try:
        await b.topics.create("t", 3, timeout_s=10)
        for i in range(60):
            for p in range(3):
                await b.groups.commit_offsets(group_id="g", member_id="", group_instance_id=None, generation_id=-1,
                                        offsets={("t", p): OffsetAndMetadata(i * 10 + p)})
        await b.groups.commit_offsets(group_id="gone", member_id="", group_instance_id=None, generation_id=-1,
                                offsets={("t", 0): OffsetAndMetadata(1)})
        assert await b.groups.delete_groups(["gone"]) == {"gone": E.none}
        part = b.replicas.get("__consumer_offsets", 0)
        part.log.roll()  # everything written so far becomes cleanable
        await b.groups.commit_offsets(group_id="other", member_id="", group_instance_id=None, generation_id=-1,
                                offsets={("t", 1): OffsetAndMetadata(7)})
        records_before = sum(s.size for s in part.log.segments)
        stats = b.replicas.cleaner.clean_filthiest()
        assert stats is not None and stats.records_read >= 180
        # "g": one offset record per partition; "gone": its tombstones (kept for
        # delete.retention.ms); nothing else of the 180 commits
        assert stats.records_kept <= 3 + 2
        assert sum(s.size for s in part.log.segments) < records_before / 10
        assert part.log.log_start_offset == 0  # compaction never moves the log start
    finally:
        await close_broker(b)
    b2 = await open_broker(tmp_path, **settings)
    try:
        err, got = b2.groups.fetch_offsets("g", None)
        assert {tp: om.offset for tp, om in got.items()} == {("t", p): 590 + p for p in range(3)}
        err, got = b2.groups.fetch_offsets("other", None)
        assert {tp: om.offset for tp, om in got.items()} == {("t", 1): 7}
        assert "gone" not in b2.groups.groups
    finally:
        await close_broker(b2)


async def test_a_shard_unloads_when_leadership_moves_and_reloads_its_groups_from_the_log(broker):
    """Coordinator shards: a broker that stops leading a __consumer_offsets partition answers
    NOT_COORDINATOR for its groups and wakes their pending joins; leading it again replays it."""
    await broker.topics.create("t", 1, timeout_s=10)
    member, generation = await single_member_group(broker, "g")
    assert await broker.groups.commit_offsets(group_id="g", member_id=member, group_instance_id=None,
                                        generation_id=generation,
                                        offsets={("t", 0): OffsetAndMetadata(42)}) == {("t", 0): E.none}
    shard = broker.groups.store.partition_for("g")
    other = next(g for g in (f"other-{i}" for i in range(100)) if broker.groups.store.partition_for(g) != shard)
    pending, _ = await join_new(broker, group="g")  # waits for the first member to rejoin
    await asyncio.sleep(0.01)
    assert not pending.done()

    await broker.controller.stop()  # the test plays the controller: move leadership away and back

    async def set_leader(leader: int) -> None:
        await move_shard_leader(broker, shard, leader)

    await set_leader(-1)
    assert broker.replicas.get("__consumer_offsets", shard) is None
    assert (await asyncio.wait_for(pending, 5)).error == E.not_coordinator
    assert broker.groups.fetch_offsets("g", [("t", 0)])[0] == E.not_coordinator
    assert broker.groups.heartbeat(group_id="g", member_id=member, group_instance_id=None,
                                   generation_id=generation) == E.not_coordinator
    assert (await join(broker, group=other)).error == E.member_id_required  # other shards still served

    await set_leader(broker.node_id)
    error, offsets = await loaded_offsets(broker, "g", [("t", 0)])
    assert error == E.none and offsets[("t", 0)].offset == 42


async def move_shard_leader(b: Broker, shard: int, leader: int) -> None:
    """Plays the controller: gives a __consumer_offsets partition a new leader and epoch."""
    rec = b.store.image.topics["__consumer_offsets"]
    states = list(rec.assignment)
    states[shard] = dataclasses.replace(states[shard], leader=leader, leader_epoch=states[shard].leader_epoch + 1)
    await b.store.update_topic(dataclasses.replace(rec, assignment=tuple(states)))


async def loaded_offsets(b: Broker, group: str, partitions, timeout_s: float = 5.0):
    """OffsetFetch once the group's shard is served: answers NOT_COORDINATOR until leadership
    arrives and COORDINATOR_LOAD_IN_PROGRESS while the shard replays."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    seen = []
    while True:
        error, offsets = b.groups.fetch_offsets(group, partitions)
        seen.append(error)
        if error not in (E.not_coordinator, E.coordinator_load_in_progress):
            return error, offsets
        assert asyncio.get_running_loop().time() < deadline, seen[-5:]
        await asyncio.sleep(0)


async def test_a_shard_loads_in_the_background_answering_load_in_progress(broker, monkeypatch):
    """Loading a large shard does not hold the event loop (other coroutines run between its
    chunks) and its groups answer COORDINATOR_LOAD_IN_PROGRESS, as Kafka's, until it is loaded."""
    import broker.coordinator.group.coordinator as coordinator_module

    monkeypatch.setattr(coordinator_module, "LOAD_YIELD_RECORDS", 50)
    await broker.topics.create("t", 1, timeout_s=10)
    for i in range(2000):  # 2,000 commit records in the group's shard
        assert await broker.groups.commit_offsets(group_id="big", member_id="", group_instance_id=None, generation_id=-1,
                                            offsets={("t", 0): OffsetAndMetadata(i)}) == {("t", 0): E.none}
    shard = broker.groups.store.partition_for("big")
    await broker.controller.stop()

    async def set_leader(leader: int) -> None:
        await move_shard_leader(broker, shard, leader)

    await set_leader(-1)
    assert broker.groups.fetch_offsets("big", [("t", 0)])[0] == E.not_coordinator
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await set_leader(broker.node_id)
    seen = []
    while (error := broker.groups.fetch_offsets("big", [("t", 0)])[0]) in (E.not_coordinator,
                                                                          E.coordinator_load_in_progress):
        seen.append(error)
        await asyncio.sleep(0)
    stop.set()
    await task
    assert E.coordinator_load_in_progress in seen
    assert broker.groups.list_groups()[0] == E.none  # loaded: ListGroups no longer says loading
    error, offsets = broker.groups.fetch_offsets("big", [("t", 0)])
    assert error == E.none and offsets[("t", 0)].offset == 1999
    assert ticks >= 2000 // 50 // 2, ticks  # the loop ran other work while the shard loaded
