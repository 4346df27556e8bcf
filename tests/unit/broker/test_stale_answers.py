"""Answers that must not show uncommitted or stale data (issue 18, item 7), on a real
ReplicaManager and logs: KIP-207's OFFSET_NOT_AVAILABLE while a new leader's high watermark lags
its epoch start, MAX_TIMESTAMP and timestamp lookups below the high watermark for consumers,
KIP-320's epoch checks, and acks=all waiting under the epoch the batch was appended at."""

from __future__ import annotations

import asyncio
import datetime
import types

from kio.schema.errors import ErrorCode

from broker.metadata.store import PartitionState
from broker.apis import offset_lookup
from broker.replica.delayed_produce import DelayedProduce
from broker.apis.fetch_session import CachedPartition
from broker.apis.handlers.fetch import FetchHandler
from broker.apis.handlers.produce import ProduceHandler
from broker.replica.leader_epoch_check import check_current_leader_epoch
from broker.server.metrics import BrokerMetrics
from broker.protocol import records
from flotilla.testenv import kafka_wire
from tests.unit.broker.test_replica_roles import ImageStore, batch, manager, topic

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def timed_batch(n: int, at: datetime.datetime) -> tuple[bytes, list]:
    payload = kafka_wire.build_batch([kafka_wire.Msg(None, b"v%d" % i) for i in range(n)], timestamp=at)
    return payload, records.validate_batches(payload, 1 << 20)


def ms(at: datetime.datetime) -> int:
    return int(at.timestamp() * 1000)


def test_current_leader_epoch_check():
    assert check_current_leader_epoch(-1, 4) == ErrorCode.none  # not given: not checked
    assert check_current_leader_epoch(4, 4) == ErrorCode.none
    assert check_current_leader_epoch(3, 4) == ErrorCode.fenced_leader_epoch
    assert check_current_leader_epoch(5, 4) == ErrorCode.unknown_leader_epoch


async def test_latest_is_not_available_while_a_new_leaders_high_watermark_lags(tmp_path):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    rm.append(part, *batch(3))  # written at epoch 0, no follower has it: high watermark 0
    # re-elected at epoch 1: the epoch starts at 3, the high watermark is still 0
    store.set(topic(PartitionState(1, 1, (1, 2, 3), (1, 2, 3)), version=1))
    rm.apply_image(store.image)
    assert (part.leader_epoch, part.epoch_start_offset, part.log.high_watermark) == (1, 3, 0)

    def ask(ts: int, replica_id: int = -1, version: int = 9):
        return offset_lookup.lookup(part.log, part.leader_epoch, part.epoch_start_offset, ts, replica_id, version)

    assert ask(offset_lookup.LATEST).error == ErrorCode.offset_not_available
    assert ask(offset_lookup.LATEST, version=4).error == ErrorCode.leader_not_available  # before KIP-207's v5
    assert ask(offset_lookup.MAX_TIMESTAMP).error == ErrorCode.offset_not_available
    assert ask(0).error == ErrorCode.offset_not_available  # a timestamp lookup landing past the HW
    assert ask(offset_lookup.EARLIEST) == (ErrorCode.none, -1, 0, 0)  # no HW involved
    assert ask(offset_lookup.LATEST, replica_id=2) == (ErrorCode.none, -1, 3, 1)  # a replica: the log end
    # the followers catch up: the high watermark passes the epoch start
    rm.follower_fetched(part, 2, 3, 0, 1)
    rm.follower_fetched(part, 3, 3, 0, 1)
    assert part.log.high_watermark == 3
    assert ask(offset_lookup.LATEST) == (ErrorCode.none, -1, 3, 1)
    rm.close()


async def test_max_timestamp_and_timestamp_lookups_stay_below_the_high_watermark(tmp_path):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2), (1, 2))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    rm.append(part, *timed_batch(2, T0))  # offsets 0-1
    rm.follower_fetched(part, 2, 2, 0, 0)
    assert part.log.high_watermark == 2
    late = T0 + datetime.timedelta(seconds=10)
    rm.append(part, *timed_batch(1, late))  # offset 2: written, not committed

    def ask(ts: int, replica_id: int = -1):
        return offset_lookup.lookup(part.log, part.leader_epoch, part.epoch_start_offset, ts, replica_id, 9)

    # the largest timestamp is on an uncommitted record: a consumer is told of no record
    assert ask(offset_lookup.MAX_TIMESTAMP) == (ErrorCode.none, -1, -1, -1)
    assert ask(ms(late)) == (ErrorCode.none, -1, -1, -1)
    assert ask(ms(T0)) == (ErrorCode.none, ms(T0), 0, 0)
    assert ask(offset_lookup.MAX_TIMESTAMP, replica_id=2) == (ErrorCode.none, ms(late), 2, 0)
    assert ask(offset_lookup.LATEST) == (ErrorCode.none, -1, 2, 0)
    rm.follower_fetched(part, 2, 3, 0, 0)
    assert ask(offset_lookup.MAX_TIMESTAMP) == (ErrorCode.none, ms(late), 2, 0)
    rm.close()


async def test_acks_all_waits_under_the_epoch_the_batch_was_appended_at(tmp_path):
    """Leadership moves away and back while the append's fsync is awaited: the produce must not
    wait for (and be acknowledged by) the high watermark of the later epoch."""
    store = ImageStore(topic(PartitionState(1, 0, (1, 2), (1, 2)), **{"flush.messages": "1"}))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    assert part.log.config.flush_messages == 1
    broker = types.SimpleNamespace(replicas=rm, metrics=BrokerMetrics())
    handler = ProduceHandler(broker=broker)
    request = types.SimpleNamespace(acks=-1, transactional_id=None)
    payload, _ = batch(2)
    appending = asyncio.ensure_future(handler._append(None, store.image.topics["t"], "t", 0, payload, request, None))
    await asyncio.sleep(0)  # the batch is in the log (epoch 0); its fsync is awaited
    assert part.log.log_end_offset == 2 and not appending.done()
    store.set(topic(PartitionState(2, 1, (1, 2), (1, 2)), version=1, **{"flush.messages": "1"}))
    rm.apply_image(store.image)  # broker 2 leads at epoch 1 (and would truncate what 1 wrote)
    store.set(topic(PartitionState(1, 2, (1, 2), (1, 2)), version=2, **{"flush.messages": "1"}))
    rm.apply_image(store.image)  # and 1 leads again at epoch 2
    code, base, _, _, _, required = await appending
    assert (code, base) == (ErrorCode.none, 0)
    assert required == (part, 0, 2)  # epoch 0: the epoch of the append, not the current 2
    op = DelayedProduce(rm, {("t", 0): required})
    assert op.can_complete() and op.results == {("t", 0): ErrorCode.not_leader_or_follower}
    rm.close()


def test_consumer_fetch_with_a_stale_or_newer_leader_epoch(tmp_path):
    store = ImageStore(topic(PartitionState(1, 3, (1,), (1,))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    rm.append(part, *batch(2))
    handler = FetchHandler(broker=types.SimpleNamespace(replicas=rm, store=store, replication_quotas=None))

    def fetch(epoch: int):
        results, _, errors, _ = handler.read([CachedPartition("t", None, 0, 0, 1 << 20, -1, epoch)], False, 1 << 20)
        [(_, pr)] = results
        return pr.error_code, pr.records is not None and pr.records.length > 0

    assert fetch(3) == (ErrorCode.none, True)
    assert fetch(-1) == (ErrorCode.none, True)  # not given: not checked
    assert fetch(2) == (ErrorCode.fenced_leader_epoch, False)
    assert fetch(4) == (ErrorCode.unknown_leader_epoch, False)
    rm.close()
