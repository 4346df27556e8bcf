"""A follower whose fetch offset the leader refuses (OFFSET_OUT_OF_RANGE), as Kafka's
AbstractFetcherThread.handleOutOfRangeError: below the leader's log start it starts afresh there
(Log.truncate_fully_and_start_at), past the leader's log end it truncates to it. On real logs."""

from __future__ import annotations

import datetime
import time

from kio.schema.errors import ErrorCode

from broker.log.leader_epoch import LEADER_EPOCH_CHECKPOINT, read_epoch_checkpoint
from broker.log.log import Log, LogConfig
from broker.metadata.store import PartitionState
from broker.protocol import records
from tests.unit.broker.batches import make_batch
from tests.unit.broker.test_replica_roles import ImageStore, manager, topic


def fill(lg: Log, count: int, epoch: int, producer_id: int = -1) -> None:
    now = int(time.time() * 1000)
    for i in range(count):
        data = make_batch([b"v%d" % i], producer_id=producer_id, epoch=0 if producer_id >= 0 else -1,
                          base_sequence=lg.log_end_offset if producer_id >= 0 else -1, timestamp_ms=now)
        lg.append(data, records.validate_batches(data, 1 << 20), leader_epoch=epoch)
    lg.high_watermark = lg.log_end_offset


def test_truncate_fully_and_start_at_leaves_an_empty_log_at_that_offset(tmp_path):
    lg = Log.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=300))
    fill(lg, 12, epoch=3, producer_id=9)
    lg.flush()
    lg.producer_state.take_snapshot(lg.log_end_offset)
    assert len(lg.segments) > 2 and 9 in lg.producer_state.producers
    lg.truncate_fully_and_start_at(40)
    assert [s.base_offset for s in lg.segments] == [40]
    assert sorted(p.name for p in lg.directory.glob("*.log")) == [f"{40:020d}.log"]
    assert lg.log_start_offset == lg.log_end_offset == lg.high_watermark == lg.recovery_point == 40
    assert lg.leader_epochs.entries == [] and read_epoch_checkpoint(lg.directory / LEADER_EPOCH_CHECKPOINT) == []
    assert lg.producer_state.producers == {} and not list(lg.directory.glob("*.snapshot"))
    # the leader's batches from 40 on are appended as they are, and the log reopens there
    leader = Log.open(tmp_path / "leader", "t", 0, LogConfig())
    leader.truncate_fully_and_start_at(40)
    data = make_batch([b"x", b"y"])
    leader.append(data, records.validate_batches(data, 1 << 20), leader_epoch=5)
    lg.append_as_follower(leader.segments[0].log_path.read_bytes())
    assert lg.log_end_offset == 42 and lg.leader_epochs.entries == [(5, 40)]
    lg.close()
    again = Log.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=300), recovery_point=0, log_start_offset=0)
    assert again.log_start_offset == 40 and again.log_end_offset == 42


class LeaderOffsets:
    """The leader's connection answering ListOffsets (as a replica asks: latest is the log end)
    from a real leader log."""

    def __init__(self, leader: Log) -> None:
        self.leader = leader
        self.asked: list[tuple[int, int]] = []

    async def request(self, req, timeout_s):
        from kio.schema.list_offsets.v7 import response as r
        from kio.static.primitive import i32, i64

        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                self.asked.append((int(req.replica_id), int(p.timestamp)))
                off = self.leader.log_end_offset if p.timestamp == -1 else self.leader.log_start_offset
                parts.append(r.ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                                            error_code=ErrorCode.none, timestamp=i64(-1),
                                                            offset=i64(off), leader_epoch=i32(5)))
            topics.append(r.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
        return r.ListOffsetsResponse(throttle_time=datetime.timedelta(0), topics=tuple(topics))


def follower_setup(tmp_path):
    from broker.replica.replica_fetcher import ReplicaFetcher, ReplicaFetcherManager

    store = ImageStore(topic(PartitionState(2, 4, (1, 2, 3), (2, 3))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image, chunked=False)
    part = rm.follower("t", 0, 4)
    fetcher = ReplicaFetcher(ReplicaFetcherManager(rm.config, rm), 2)
    fetcher.set_partitions({("t", 0): 4})
    f = fetcher.partitions[("t", 0)]
    f.truncated = f.out_of_range = True  # as after a Fetch answered OFFSET_OUT_OF_RANGE
    return rm, part, fetcher, f


async def test_a_follower_below_the_leaders_log_start_starts_there(tmp_path):
    rm, part, fetcher, f = follower_setup(tmp_path)
    fill(part.log, 5, epoch=2)
    leader = Log.open(tmp_path / "leader", "t", 0, LogConfig(segment_bytes=200))
    fill(leader, 30, epoch=4)
    leader.advance_log_start_offset(leader.segments[-2].base_offset)
    start = leader.log_start_offset
    assert start > part.log.log_end_offset
    fetcher.conn = LeaderOffsets(leader)
    await fetcher._reset_out_of_range(rm)
    assert fetcher.conn.asked == [(1, -1), (1, -2)]  # as replica 1: the log end, then the log start
    assert not f.out_of_range
    assert part.log.log_start_offset == part.log.log_end_offset == part.log.high_watermark == start
    assert [s.base_offset for s in part.log.segments] == [start]
    rm.close()


async def test_a_follower_past_the_leaders_end_truncates_to_it(tmp_path):
    rm, part, fetcher, f = follower_setup(tmp_path)
    fill(part.log, 8, epoch=2)
    leader = Log.open(tmp_path / "leader", "t", 0, LogConfig())
    fill(leader, 5, epoch=4)
    fetcher.conn = LeaderOffsets(leader)
    await fetcher._reset_out_of_range(rm)
    assert fetcher.conn.asked == [(1, -1)]
    assert not f.out_of_range and part.log.log_end_offset == 5
    rm.close()


async def test_a_follower_within_the_leaders_log_fetches_on_from_its_end(tmp_path):
    rm, part, fetcher, f = follower_setup(tmp_path)
    fill(part.log, 5, epoch=2)
    leader = Log.open(tmp_path / "leader", "t", 0, LogConfig())
    fill(leader, 8, epoch=4)
    fetcher.conn = LeaderOffsets(leader)
    await fetcher._reset_out_of_range(rm)
    assert fetcher.conn.asked == [(1, -1), (1, -2)]
    assert not f.out_of_range and part.log.log_end_offset == 5 and part.log.log_start_offset == 0
    rm.close()
