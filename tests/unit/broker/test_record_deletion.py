"""DeleteRecords' broker side (KIP-107) on real logs and a ReplicaManager with a metadata image
built in the test: the leader's local step (replica/record_deletion.py), the wait for the low
watermark over the live replicas (replica/delayed_delete_records.py), and segments below the log
start left to the retention pass."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from broker.log.log import OffsetOutOfRange
from broker.metadata.store import PartitionState
from broker.replica.delayed_delete_records import DelayedDeleteRecords
from broker.replica.record_deletion import delete_on_leader
from tests.unit.broker.test_replica_roles import ImageStore, batch, manager, topic


def leader(tmp_path, live=(1, 2, 3), records=10, **configs):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3)), **configs), live=live)
    rm = manager(tmp_path, store)
    rm.apply_image(store.image, chunked=False)
    part = rm.get("t", 0)
    for _ in range(records):
        rm.append(part, *batch())
    for follower in (2, 3):  # both have everything: the high watermark is the log end
        assert rm.follower_fetched(part, follower, part.log.log_end_offset, 0, 0) == ErrorCode.none
    assert part.log.high_watermark == records
    return store, rm, part


def test_the_log_start_moves_forward_only_and_never_past_the_high_watermark(tmp_path):
    _, rm, part = leader(tmp_path)
    lg = part.log
    assert lg.advance_log_start_offset(4) and lg.log_start_offset == 4
    assert not lg.advance_log_start_offset(2) and lg.log_start_offset == 4  # never back
    with pytest.raises(OffsetOutOfRange):
        lg.advance_log_start_offset(11)
    with pytest.raises(OffsetOutOfRange):  # below the log start: unreadable at once
        lg.read(3, 1 << 20, lg.high_watermark)
    assert lg.read(4, 1 << 20, lg.high_watermark) is not None


def test_the_leaders_local_step_answers_as_kafka(tmp_path):
    _, rm, part = leader(tmp_path)
    r = delete_on_leader(rm, "t", 0, 3)
    assert (r.error, r.requested_offset, r.low_watermark) == (ErrorCode.none, 3, 0)  # followers still at 0
    assert part.log.log_start_offset == 3
    assert delete_on_leader(rm, "t", 0, 11).error == ErrorCode.offset_out_of_range  # past the high watermark
    assert delete_on_leader(rm, "t", 0, -2).error == ErrorCode.offset_out_of_range
    assert part.log.log_start_offset == 3
    r = delete_on_leader(rm, "t", 0, 1)  # below the log start: nothing moves, no error
    assert r.error == ErrorCode.none and part.log.log_start_offset == 3
    r = delete_on_leader(rm, "t", 0, -1)  # -1: the high watermark
    assert (r.error, r.requested_offset) == (ErrorCode.none, 10) and part.log.log_start_offset == 10
    assert delete_on_leader(rm, "t", 1, 0).error == ErrorCode.unknown_topic_or_partition
    assert delete_on_leader(rm, "__consumer_offsets", 0, 0).error == ErrorCode.invalid_topic_exception


def test_a_compacted_topic_refuses_with_policy_violation(tmp_path):
    _, rm, part = leader(tmp_path, records=0, **{"cleanup.policy": "compact"})
    assert delete_on_leader(rm, "t", 0, 0).error == ErrorCode.policy_violation


def test_a_follower_answers_not_leader(tmp_path):
    store = ImageStore(topic(PartitionState(2, 0, (2, 1, 3), (2, 1, 3))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image, chunked=False)
    assert delete_on_leader(rm, "t", 0, 0).error == ErrorCode.not_leader_or_follower


async def test_the_request_waits_for_every_live_followers_log_start(tmp_path):
    _, rm, part = leader(tmp_path)
    assert delete_on_leader(rm, "t", 0, 6).low_watermark == 0
    op = DelayedDeleteRecords(rm, {("t", 0): 6})
    waiting = asyncio.ensure_future(rm.delete_records_purgatory.wait(op, [("t", 0)], 30))
    await asyncio.sleep(0)
    rm.follower_fetched(part, 2, 10, 6, 0)  # follower 2 took the new log start
    await asyncio.sleep(0)
    assert not waiting.done() and op.results == {}  # follower 3 still holds offset 0
    rm.follower_fetched(part, 3, 10, 6, 0)
    assert await waiting
    assert op.results == {("t", 0): (ErrorCode.none, 6)}


async def test_a_follower_that_is_not_live_does_not_hold_the_low_watermark(tmp_path):
    store, rm, part = leader(tmp_path)
    delete_on_leader(rm, "t", 0, 6)
    rm.follower_fetched(part, 2, 10, 6, 0)
    op = DelayedDeleteRecords(rm, {("t", 0): 6})
    waiting = asyncio.ensure_future(rm.delete_records_purgatory.wait(op, [("t", 0)], 30))
    await asyncio.sleep(0)
    assert not waiting.done()
    store.set(store.image.topics["t"], live=(1, 2))  # broker 3's registration expired
    rm.live_brokers_changed()
    assert await waiting
    assert op.results == {("t", 0): (ErrorCode.none, 6)}


async def test_a_request_still_short_at_its_timeout_is_not_completed(tmp_path):
    _, rm, part = leader(tmp_path)
    delete_on_leader(rm, "t", 0, 6)
    op = DelayedDeleteRecords(rm, {("t", 0): 6})
    assert not await rm.delete_records_purgatory.wait(op, [("t", 0)], 0.05)
    assert op.results == {} and rm.delete_records_purgatory.watched() == 0


async def test_losing_leadership_answers_not_leader(tmp_path):
    store, rm, part = leader(tmp_path)
    delete_on_leader(rm, "t", 0, 6)
    op = DelayedDeleteRecords(rm, {("t", 0): 6})
    waiting = asyncio.ensure_future(rm.delete_records_purgatory.wait(op, [("t", 0)], 30))
    await asyncio.sleep(0)
    store.set(topic(PartitionState(2, 1, (1, 2, 3), (2, 3)), version=1))
    rm.apply_image(store.image, chunked=False)
    assert await waiting
    assert op.results == {("t", 0): (ErrorCode.not_leader_or_follower, -1)}


def test_whole_segments_below_the_log_start_go_at_the_retention_pass(tmp_path):
    _, rm, part = leader(tmp_path, records=0, **{"segment.bytes": "200"})
    for _ in range(12):
        rm.append(part, *batch())
    rm.follower_fetched(part, 2, part.log.log_end_offset, 0, 0)
    rm.follower_fetched(part, 3, part.log.log_end_offset, 0, 0)
    lg = part.log
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) >= 3
    inside = bases[2] + 1  # inside the third segment: the two before it are wholly below
    assert delete_on_leader(rm, "t", 0, inside).error == ErrorCode.none
    assert [s.base_offset for s in lg.segments] == bases  # nothing deleted by the request itself
    assert rm.enforce_retention() == 2
    assert [s.base_offset for s in lg.segments] == bases[2:]
    assert sorted(int(p.stem) for p in lg.directory.glob("*.log")) == bases[2:]
    assert lg.log_start_offset == inside


def test_timestamp_lookups_pass_over_segments_below_the_log_start(tmp_path):
    """Between the deletion and the retention pass, a timestamp older than the new log start
    answers the first record at or after it, never an offset below it (nor -1)."""
    _, rm, part = leader(tmp_path, records=0, **{"segment.bytes": "200"})
    for _ in range(12):
        rm.append(part, *batch())
    rm.follower_fetched(part, 2, part.log.log_end_offset, 0, 0)
    rm.follower_fetched(part, 3, part.log.log_end_offset, 0, 0)
    lg = part.log
    bases = [s.base_offset for s in lg.segments]
    inside = bases[2] + 1
    assert delete_on_leader(rm, "t", 0, inside).error == ErrorCode.none
    assert lg.offset_for_timestamp(0)[0] == inside
    assert lg.max_timestamp()[0] >= inside


def test_a_failed_request_answers_every_partition_with_low_watermark_minus_one():
    from types import SimpleNamespace

    from broker.apis.handlers.base import RequestContext
    from broker.apis.handlers.delete_records import DeleteRecordsHandler
    from tests.e2e.test_delete_records import delete_request

    for version in (0, 1, 2):
        header = SimpleNamespace(api_key=21, api_version=version, correlation_id=1, client_id="c")
        ctx = RequestContext(header=header, connection=None)  # type: ignore[arg-type]
        resp = DeleteRecordsHandler(None).error_response(  # type: ignore[arg-type]
            ctx, delete_request(version, {("t", 0): 5, ("u", 1): 3}), ErrorCode.unknown_server_error, "boom")
        assert sorted((t.name, p.partition_index, p.low_watermark, p.error_code)
                      for t in resp.topics for p in t.partitions) == [
            ("t", 0, -1, ErrorCode.unknown_server_error), ("u", 1, -1, ErrorCode.unknown_server_error)]
