"""ReplicaManager as leader and follower of replicated partitions (issue 11), on real logs in a
temporary directory and a metadata image built in the test: which role each partition gets from
the image, follower fetches moving the high watermark, ISR shrinks and expands written as a
compare-and-set of the topic record, and acks=all waits completed by the high watermark."""

from __future__ import annotations

import asyncio
import datetime
import dataclasses
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.config import parse_config
from broker.metadata.store import BrokerRegistration, Conflict, MetadataImage, PartitionState, TopicRecord
from broker.protocol import records
from broker.replica.delayed_produce import DelayedProduce
from broker.replica.purgatory import Purgatory
from broker.replica.replica_manager import ReplicaManager
from flotilla.testenv import kafka_wire

TOPIC_ID = uuid.uuid4()


class ImageStore:
    """The part of a metadata store ReplicaManager uses: an image, and CAS writes of topics."""

    def __init__(self, topic: TopicRecord, conflicts: int = 0, live=(1, 2, 3)) -> None:
        self.live = {n: BrokerRegistration(n, f"incarnation-{n}", ()) for n in live}
        self.image = MetadataImage.build("c", self.live, 1, {topic.name: topic})
        self.conflicts = conflicts
        self.writes: list[TopicRecord] = []

    def set(self, topic: TopicRecord, live=None) -> None:
        if live is not None:
            self.live = {n: BrokerRegistration(n, f"incarnation-{n}", ()) for n in live}
        self.image = MetadataImage.build("c", self.live, 1, {topic.name: topic})

    async def update_topic(self, rec: TopicRecord) -> TopicRecord:
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("someone else wrote first")
        rec = dataclasses.replace(rec, version=int(rec.version) + 1)
        self.writes.append(rec)
        self.set(rec)
        return rec


def topic(state: PartitionState, version: int = 0, **configs: str) -> TopicRecord:
    return TopicRecord("t", TOPIC_ID, 1, 3, dict(configs), (state,), version)


def manager(tmp_path, store, node_id: int = 1, lag_ms: int = 1000) -> ReplicaManager:
    config = parse_config({"node.id": str(node_id), "log.dirs": str(tmp_path / "data"),
                           "replica.lag.time.max.ms": str(lag_ms)})
    return ReplicaManager(config, store, Purgatory("fetch"), Purgatory("produce"))


def batch(n: int = 1) -> tuple[bytes, list]:
    payload = kafka_wire.build_batch([kafka_wire.Msg(None, b"v%d" % i) for i in range(n)])
    return payload, records.validate_batches(payload, 1 << 20)


async def leave_follower_3_behind(rm, part) -> None:
    """Two records appended; follower 2 fetches them all, follower 3 nothing for longer than the
    manager's lag time (50 ms): 3 is out of sync at the next shrink check."""
    payload, headers = batch(2)
    rm.append(part, payload, headers)
    await asyncio.sleep(0.08)
    rm.follower_fetched(part, 2, 2, 0, 0)


async def test_a_replica_that_does_not_lead_follows_and_becomes_leader_when_elected(tmp_path):
    store = ImageStore(topic(PartitionState(2, 0, (2, 1, 3), (2, 1, 3))))
    rm = manager(tmp_path, store)
    follows, leads = [], []
    rm.on_follow_change(follows.append)
    rm.on_leadership_change(lambda t, p, leading: leads.append(leading))
    rm.apply_image(store.image)
    assert rm.get("t", 0) is None  # not led here: invisible to consumers and producers
    assert rm.partitions[("t", 0)].is_leader is False
    assert follows[-1] == {("t", 0): (2, 0)}
    assert rm.leader_or_error("t", 0)[1] == ErrorCode.not_leader_or_follower
    store.set(topic(PartitionState(1, 1, (2, 1, 3), (1, 3)), version=1))
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    assert part is not None and part.leader_epoch == 1 and leads == [True]
    assert follows[-1] == {}
    assert part.replica_state.isr == frozenset({1, 3})
    rm.close()


async def test_follower_fetches_move_the_high_watermark_and_complete_acks_all(tmp_path):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    payload, headers = batch(3)
    result = rm.append(part, payload, headers)
    assert part.log.log_end_offset == 3 and part.log.high_watermark == 0  # followers have nothing yet
    op = DelayedProduce(rm, {("t", 0): (part, 0, result.last_offset + 1)})
    waiting = asyncio.ensure_future(rm.produce_purgatory.wait(op, [("t", 0)], 5))
    await asyncio.sleep(0)
    assert rm.follower_fetched(part, 2, 3, 0, 0) == ErrorCode.none
    assert part.log.high_watermark == 0 and not op.completed  # 3 is in the ISR and still at -1
    assert rm.follower_fetched(part, 3, 3, 0, 0) == ErrorCode.none
    assert part.log.high_watermark == 3
    assert await waiting and op.results == {("t", 0): ErrorCode.none}
    # epoch checks of the follower's fetch
    assert rm.follower_fetched(part, 2, 3, 0, 1) == ErrorCode.unknown_leader_epoch
    # not a replica: Kafka's followerReplicaOrThrow (UNKNOWN_LEADER_EPOCH when the fetch names an epoch)
    assert rm.follower_fetched(part, 4, 3, 0, 0) == ErrorCode.unknown_leader_epoch
    assert rm.follower_fetched(part, 4, 3, 0, -1) == ErrorCode.not_leader_or_follower
    assert rm.follower_fetched(part, 2, 9, 0, 0) == ErrorCode.offset_out_of_range
    rm.close()


async def test_a_lagging_follower_is_shrunk_out_with_a_cas_write_and_rejoins_when_caught_up(tmp_path):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))), conflicts=1)
    rm = manager(tmp_path, store, lag_ms=50)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    await leave_follower_3_behind(rm, part)
    rm.shrink_isrs()
    for _ in range(50):
        await asyncio.sleep(0.05)
        if rm.isr_shrinks:
            break
    assert rm.isr_shrinks == 1
    assert store.image.topics["t"].assignment[0].isr == (1, 2)  # written once, after one lost CAS
    assert len(store.writes) == 1
    assert part.log.high_watermark == 2
    rm.follower_fetched(part, 3, 2, 0, 0)  # caught up: rejoins
    for _ in range(50):
        await asyncio.sleep(0.01)
        if rm.isr_expands:
            break
    assert store.image.topics["t"].assignment[0].isr == (1, 2, 3)
    rm.close()


async def test_a_follower_whose_registration_expired_is_not_added_back_while_it_fetches(tmp_path):
    """The controller removed broker 3 (its Lease expired) but 3 still fetches: the leader must
    not add it back (a loop of writes, each undone by the controller)."""
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    rm.append(part, *batch(2))
    store.set(topic(PartitionState(1, 0, (1, 2, 3), (1, 2)), version=1), live=(1, 2))
    rm.apply_image(store.image)
    assert part.replica_state.isr == frozenset({1, 2})
    assert rm.follower_fetched(part, 3, 2, 0, 0) == ErrorCode.none  # caught up, but fenced
    assert part.replica_state.pending_isr is None
    await asyncio.sleep(0.05)
    assert store.writes == []
    # registered again: the next fetch lets it back in
    store.set(store.image.topics["t"], live=(1, 2, 3))
    rm.follower_fetched(part, 3, 2, 0, 0)
    for _ in range(50):
        await asyncio.sleep(0.01)
        if rm.isr_expands:
            break
    assert store.image.topics["t"].assignment[0].isr == (1, 2, 3)
    rm.close()


async def test_no_isr_write_once_the_leader_epoch_moved(tmp_path):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store, lag_ms=10)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    rm.append(part, *batch(1))
    # the image moved on (another leader, epoch 1) before the leader's write
    store.set(topic(PartitionState(2, 1, (1, 2, 3), (2, 3)), version=5))
    await asyncio.sleep(0.03)
    rm.shrink_isrs()
    await asyncio.sleep(0.1)
    assert store.writes == []
    rm.close()


class EpochAnswers:
    """A leader's connection that answers OffsetForLeaderEpoch with a fixed epoch end."""

    def __init__(self, epoch: int, end: int) -> None:
        self.epoch, self.end = epoch, end
        self.asked = []

    async def request(self, req, timeout_s):
        from kio.schema.offset_for_leader_epoch.v4 import response as r
        from kio.static.primitive import i32, i64

        self.asked.append(req)
        return r.OffsetForLeaderEpochResponse(throttle_time=datetime.timedelta(0), topics=tuple(
            r.OffsetForLeaderTopicResult(topic=t.topic, partitions=tuple(
                r.EpochEndOffset(error_code=ErrorCode.none, partition=p.partition, leader_epoch=i32(self.epoch),
                                 end_offset=i64(self.end)) for p in t.partitions)) for t in req.topics))


async def test_a_former_leader_truncates_to_where_its_epoch_ended_on_the_new_leader(tmp_path):
    from broker.replica.replica_fetcher import ReplicaFetcher, ReplicaFetcherManager

    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    for _ in range(5):
        rm.append(part, *batch(2))  # offsets 0..9 at epoch 0
    store.set(topic(PartitionState(2, 1, (1, 2, 3), (2, 3)), version=1))
    rm.apply_image(store.image)
    assert rm.following() == {("t", 0): (2, 1)}
    fetchers = ReplicaFetcherManager(rm.config, rm)
    fetcher = ReplicaFetcher(fetchers, 2)
    fetcher.set_partitions({("t", 0): 1})
    fetcher.conn = EpochAnswers(epoch=0, end=6)  # the new leader had epoch 0 up to offset 6
    await fetcher._truncate(rm)
    asked = fetcher.conn.asked[0].topics[0].partitions[0]
    assert (asked.current_leader_epoch, asked.leader_epoch) == (1, 0)
    assert part.log.log_end_offset == 6 and fetcher.partitions[("t", 0)].truncated
    rm.close()


async def test_a_reassignment_adds_a_follower_at_the_same_epoch_and_the_broker_moved_off_deletes_its_log(tmp_path):
    # Leader 1 takes a replica added by a reassignment (KIP-455) without a new epoch: broker 4 may
    # fetch, and counts for the high watermark only once it reached the leader's end.
    store = ImageStore(topic(PartitionState(1, 3, (1, 2), (1, 2))), live=(1, 2, 3, 4))
    rm = manager(tmp_path / "one", store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    assert rm.follower_fetched(part, 4, 0, 0, 3) == ErrorCode.unknown_leader_epoch  # not a replica yet
    store.set(topic(PartitionState(1, 3, (1, 4, 2), (1, 2), adding=(4,), removing=(2,)), version=1))
    rm.apply_image(store.image)
    assert rm.get("t", 0) is part and part.leader_epoch == 3 and part.replica_state.replicas == (1, 4, 2)
    rm.append(part, *batch(3))
    assert rm.follower_fetched(part, 2, 3, 0, 3) == ErrorCode.none
    assert part.log.high_watermark == 3  # broker 4 (not in the ISR, behind) does not hold it back
    assert rm.follower_fetched(part, 4, 0, 0, 3) == ErrorCode.none
    assert part.log.high_watermark == 3
    rm.close()

    # Broker 2, a follower being removed, deletes its log only once the committed assignment
    # leaves it out.
    store2 = ImageStore(topic(PartitionState(1, 3, (1, 4, 2), (1, 2, 4), adding=(4,), removing=(2,))), live=(1, 2, 3, 4))
    follower = manager(tmp_path / "two", store2, node_id=2)
    follower.apply_image(store2.image)
    directory = follower.partitions[("t", 0)].log.directory
    assert directory.exists()
    store2.set(topic(PartitionState(1, 4, (1, 4), (1, 4)), version=1))
    follower.apply_image(store2.image)
    assert ("t", 0) not in follower.partitions and not directory.exists()
    follower.close()
