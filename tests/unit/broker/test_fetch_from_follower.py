"""KIP-392 on real logs and a real ReplicaManager (no sockets): the leader's Fetch answers a consumer
in another rack with a preferred read replica and no records; a follower serves consumer fetches
of v11+ up to its high watermark (empty between it and the log end, OFFSET_OUT_OF_RANGE past the
log end), refuses older ones (NOT_LEADER_OR_FOLLOWER) and wakes a parked consumer fetch when the
replica fetcher moves its high watermark."""

from __future__ import annotations

import asyncio
import os
import types

from kio.schema.errors import ErrorCode

from broker.apis.fetch_session import CachedPartition
from broker.apis.handlers.fetch import FetchHandler
from broker.apis.preferred_replica import preferred_read_replica_of
from broker.metadata.store import BrokerRegistration, Endpoint, MetadataImage, PartitionState
from broker.replica.delayed_fetch import DelayedFetch
from broker.replica.replica_fetcher import Followed, ReplicaFetcher
from broker.replica.replica_selector import RACK_AWARE
from tests.unit.broker.test_replica_roles import ImageStore, batch, manager, topic

RACKS = {1: "r1", 2: "r2", 3: "r3"}


def with_racks(store: ImageStore, racks=RACKS) -> None:
    """Registrations with a PLAINTEXT endpoint and a rack each."""
    store.live = {n: BrokerRegistration(n, f"incarnation-{n}", (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + n),), rack)
                  for n, rack in racks.items()}
    store.image = MetadataImage.build("c", store.live, 1, dict(store.image.topics))


def handler_for(rm, store) -> FetchHandler:
    return FetchHandler(broker=types.SimpleNamespace(replicas=rm, store=store, replication_quotas=None))


def read_one(handler: FetchHandler, offset: int, **kw):
    results, total, answer_now, _ = handler.read([CachedPartition("t", None, 0, offset, 1 << 20, -1, -1)], False,
                                                 1 << 20, **kw)
    [(_, pr)] = results
    return pr, total, answer_now


async def test_the_leader_names_the_in_sync_follower_of_the_consumers_rack(tmp_path):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    with_racks(store)
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    for _ in range(4):
        rm.append(part, *batch(1))  # one batch per offset: the high watermark falls between batches
    rm.follower_fetched(part, 2, 4, 0, 0)
    rm.follower_fetched(part, 3, 2, 0, 0)  # 3 holds offsets below 2 only

    def prefer(rack: str):
        return lambda p, offset: preferred_read_replica_of(p, store.image, "PLAINTEXT", RACK_AWARE, rack, offset)

    pr, total, answer_now = read_one(handler_for(rm, store), 0, any_replica=True, prefer=prefer("r2"))
    assert (pr.error_code, pr.preferred_read_replica, total, answer_now) == (0, 2, 0, True)
    assert (pr.high_watermark, pr.last_stable_offset, pr.log_start_offset, pr.records) == (2, 2, 0, b"")
    assert read_one(handler_for(rm, store), 1, any_replica=True, prefer=prefer("r3"))[0].preferred_read_replica == 3
    # 3's log ends at 2: a consumer at 3 stays with the leader (which reads it nothing: above the HW)
    pr, _, _ = read_one(handler_for(rm, store), 3, any_replica=True, prefer=prefer("r3"))
    assert pr.preferred_read_replica == -1 and pr.error_code == 0
    # the leader's own rack, and no selector at all: the leader serves
    pr, total, _ = read_one(handler_for(rm, store), 0, any_replica=True, prefer=prefer("r1"))
    assert pr.preferred_read_replica == -1 and total > 0
    pr, total, _ = read_one(handler_for(rm, store), 0, any_replica=True, prefer=None)
    assert pr.preferred_read_replica == -1 and total > 0
    rm.close()


def leader_and_follower(tmp_path):
    """Broker 1 leading t-0 at epoch 5 and broker 2 following it, in racks, on real logs:
    (store, leader manager, its partition, follower manager, its partition)."""
    store = ImageStore(topic(PartitionState(1, 5, (1, 2, 3), (1, 2, 3))))
    with_racks(store)
    leader = manager(tmp_path / "leader", store, node_id=1)
    leader.apply_image(store.image)
    lpart = leader.get("t", 0)
    follower = manager(tmp_path / "follower", store, node_id=2)
    follower.apply_image(store.image)
    fpart = follower.follower("t", 0, 5)
    return store, leader, lpart, follower, fpart


async def test_a_follower_serves_consumers_up_to_its_high_watermark(tmp_path):
    store, leader, lpart, follower, fpart = leader_and_follower(tmp_path)
    assert fpart is not None
    for _ in range(3):  # offsets 0..2, one batch each
        leader.append(lpart, *batch(1))
    lpart.log.flush()
    copied = b"".join(f.read_bytes() for f in sorted(lpart.log.directory.glob("*.log")))
    follower.append_as_follower(fpart, copied)  # the leader's batches as they are, as the fetcher does
    assert fpart.log.log_end_offset == 3
    fpart.log.high_watermark = 2
    handler = handler_for(follower, store)

    pr, total, _ = read_one(handler, 0, any_replica=True)
    assert pr.error_code == 0 and total > 0 and (pr.high_watermark, pr.log_start_offset) == (2, 0)
    pr, total, answer_now = read_one(handler, 2, any_replica=True)  # at the HW, below the log end: nothing yet
    assert (pr.error_code, total, answer_now) == (0, 0, False)
    pr, total, answer_now = read_one(handler, 3, any_replica=True)  # the log end: nothing, no error
    assert (pr.error_code, total, answer_now) == (0, 0, False)
    pr, _, answer_now = read_one(handler, 4, any_replica=True)  # past the log end
    assert pr.error_code == ErrorCode.offset_out_of_range and answer_now
    pr, _, _ = read_one(handler, 0)  # a Fetch before v11 (or from a replica) is the leader's alone
    assert pr.error_code == ErrorCode.not_leader_or_follower and pr.current_leader == (1, 5)
    # the consumer's epoch is checked as on the leader (KIP-320)
    results, _, _, _ = handler.read([CachedPartition("t", None, 0, 0, 1 << 20, -1, 4)], False, 1 << 20,
                                    any_replica=True)
    assert results[0][1].error_code == ErrorCode.fenced_leader_epoch
    # READ ACLs apply at the follower as at the leader
    pr, total, _ = read_one(handler, 0, any_replica=True, may_read=lambda topic: False)
    assert (pr.error_code, total) == (ErrorCode.topic_authorization_failed, 0)
    # read_committed reads to the last stable offset (the HW here: no transaction)
    pr, total, _ = read_one(handler, 0, any_replica=True, read_committed=True)
    assert pr.error_code == 0 and pr.last_stable_offset == 2 and total > 0

    # a parked consumer fetch at the HW completes when the replica fetcher moves it
    cp = CachedPartition("t", None, 0, 2, 1 << 20, -1, -1)
    op = DelayedFetch(follower, {("t", 0): cp}.get, {}, min_bytes=1, any_replica=True)
    waiting = asyncio.ensure_future(follower.fetch_purgatory.wait(op, [("t", 0)], 10.0))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    fetcher = ReplicaFetcher(types.SimpleNamespace(quotas=None), 1)
    fetcher.partitions[("t", 0)] = Followed(5, truncated=True)
    answer = types.SimpleNamespace(error_code=ErrorCode.none, records=b"", high_watermark=3, log_start_offset=0)
    fetcher._apply(follower, ("t", 0), answer, {("t", 0): (3, 5, 0)})
    await asyncio.wait_for(waiting, 2.0)
    assert fpart.log.high_watermark == 3 and op.accumulated > 0

    # no longer a replica here: NOT_LEADER_OR_FOLLOWER, naming the leader
    store.set(topic(PartitionState(1, 6, (1, 3), (1, 3))))
    with_racks(store)
    follower.apply_image(store.image)
    pr, _, _ = read_one(handler, 0, any_replica=True)
    assert pr.error_code == ErrorCode.not_leader_or_follower and pr.current_leader == (1, 6)
    leader.close()
    follower.close()


def copy_to_follower(lpart, fpart, follower) -> None:
    """The leader's batches the follower lacks, appended as the replica fetcher does."""
    lpart.log.flush()
    region = lpart.log.read(fpart.log.log_end_offset, 1 << 20, upper_bound=lpart.log.log_end_offset, min_one=True)
    follower.append_as_follower(fpart, os.pread(region.fd, region.length, region.position))


async def test_read_committed_at_a_follower_stops_at_its_last_stable_offset_and_names_aborted_transactions(tmp_path):
    from broker.protocol import records as record_headers
    from flotilla.testenv import kafka_wire

    store, leader, lpart, follower, fpart = leader_and_follower(tmp_path)
    txn = kafka_wire.build_batch([kafka_wire.Msg(None, b"in-txn")], producer_id=7, producer_epoch=0, base_sequence=0,
                                 transactional=True)
    leader.append(lpart, *batch(1))  # offset 0
    leader.append(lpart, txn, record_headers.validate_batches(txn, 1 << 20))  # offset 1, transaction open
    leader.append(lpart, *batch(1))  # offset 2
    copy_to_follower(lpart, fpart, follower)
    fpart.log.high_watermark = 3
    handler = handler_for(follower, store)
    pr, total, _ = read_one(handler, 0, any_replica=True, read_committed=True)
    assert (pr.error_code, pr.high_watermark, pr.last_stable_offset) == (0, 3, 1) and total > 0
    assert pr.records.length < read_one(handler, 0, any_replica=True)[0].records.length  # stops below offset 1
    pr, total, _ = read_one(handler, 1, any_replica=True, read_committed=True)
    assert (pr.error_code, total) == (0, 0)  # at the last stable offset: nothing yet
    lpart.log.append_marker(7, 0, commit=False, coordinator_epoch=0, leader_epoch=5)  # offset 3: ABORT
    copy_to_follower(lpart, fpart, follower)
    fpart.log.high_watermark = 4
    pr, total, _ = read_one(handler, 0, any_replica=True, read_committed=True)
    assert (pr.last_stable_offset, pr.aborted_transactions) == (4, [(7, 1)]) and total > 0
    leader.close()
    follower.close()
