"""A follower's truncation after OffsetForLeaderEpoch (KIP-279), on the epoch sequences of Kafka's
own tests (ReplicaFetcherThreadTest, AbstractFetcherThreadTest): the decision alone on real
leader epoch caches, then whole exchanges between two real logs until they agree byte for byte."""

from __future__ import annotations

import os

import pytest

from broker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from broker.log.log import Log, LogConfig
from broker.protocol import records
from broker.replica.truncation import TruncationState, truncation_state
from tests.unit.broker.batches import make_batch


def decided(*args) -> tuple[int, bool]:
    state = truncation_state(*args)
    return state.offset, state.completed


def cache(tmp_path, *entries):
    return LeaderEpochCache(tmp_path, list(entries))


def test_the_leaders_end_of_an_epoch_both_hold(tmp_path):
    # shouldTruncateToOffsetSpecifiedInEpochOffsetResponse: both at epoch 5, the leader's ended at 156
    c = cache(tmp_path, (5, 0))
    assert decided(5, 156, c, 200) == (156, True)


def test_an_epoch_the_follower_lacks_truncates_part_way_and_asks_again(tmp_path):
    # shouldFetchLeaderEpochSecondTimeIfLeaderRepliesWithEpochNotKnownToFollower: the follower
    # has epochs 3 and 5 (5 from 120, log end 200), the leader answers epoch 4 ending at 155.
    c = cache(tmp_path, (3, 50), (5, 120))
    first = truncation_state(4, 155, c, 200)
    assert (first.offset, first.completed) == (120, False)  # the end of epoch 3 here, not 155
    c.truncate_from_end(first.offset)
    assert c.latest_epoch == 3  # asked next
    second = truncation_state(3, 101, c, 120)
    assert (second.offset, second.completed) == (101, True)


def test_an_undefined_answer_keeps_the_fetch_offset(tmp_path):
    # shouldTruncateToInitialFetchOffsetIfLeaderReturnsUndefinedOffset: the initial fetch offset
    # of a follower with epochs is its log end (Kafka's ReplicaManager.initialFetchOffset).
    c = cache(tmp_path, (5, 0))
    assert decided(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, c, 100) == (100, True)


def test_an_offset_without_an_epoch_is_taken_as_it_is(tmp_path):
    # shouldUseLeaderEndOffsetIfInterBrokerVersionBelow20: no epoch in the answer
    c = cache(tmp_path, (5, 0))
    assert decided(UNDEFINED_EPOCH, 156, c, 200) == (156, True)
    assert decided(UNDEFINED_EPOCH, 202, c, 200) == (200, True)


def test_a_follower_without_the_epoch_takes_the_leaders_offset(tmp_path):
    # shouldTruncateToOffsetSpecifiedInEpochOffsetResponseIfFollowerHasNoMoreEpochs: nothing known
    # at or below the answered epoch, so the leader's offset, capped by the log end.
    c = cache(tmp_path)
    assert decided(4, 156, c, 200) == (156, True)
    assert decided(4, 202, c, 200) == (200, True)


# -- whole exchanges between two real logs ------------------------------------------------------

def make_log(path, name, batches):
    """A log holding one single-record batch per (value, epoch), as its leaders wrote them."""
    lg = Log.open(path / name, "t", 0, LogConfig())
    for value, epoch in batches:
        data = make_batch([value])
        lg.append(data, records.validate_batches(data, 1 << 20), leader_epoch=epoch)
    lg.high_watermark = lg.log_end_offset
    return lg


def log_bytes(lg):
    return b"".join(seg.log_path.read_bytes() for seg in lg.segments)


def converge(follower: Log, leader: Log) -> list[tuple[int, int, bool]]:
    """Ask, truncate, ask again until done, then copy the leader's batches from the follower's end;
    (epoch asked, offset truncated to, completed) per round."""
    rounds = []
    while True:
        asked = follower.leader_epochs.latest_epoch
        epoch, end = leader.leader_epochs.end_offset_for(asked, leader.log_end_offset)
        state = truncation_state(epoch, end, follower.leader_epochs, follower.log_end_offset)
        follower.truncate_to(state.offset)
        rounds.append((asked, state.offset, state.completed))
        if state.completed:
            break
        assert len(rounds) < 10
    start = follower.log_end_offset
    region = leader.read(start, 1 << 20, leader.log_end_offset)
    if region is not None:
        follower.append_as_follower(os.pread(region.fd, region.length, region.position))
    return rounds


@pytest.mark.parametrize("follower_epochs, leader_epochs, rounds", [
    # AbstractFetcherThreadTest.testTruncation: diverged in every epoch after the first record
    ([0, 2, 4], [1, 3, 5], [(4, 2, False), (2, 1, False), (0, 0, True)]),
    # testDivergingEpochs: only the last epoch differs
    ([0, 2, 4], [0, 2, 5], [(4, 2, True)]),
    # testFollowerFetchOutOfRangeHigh's logs: nothing to truncate
    ([0, 2, 4], [0, 2, 4], [(4, 3, True)]),
])
def test_logs_that_diverged_in_several_epochs_end_identical(tmp_path, follower_epochs, leader_epochs, rounds):
    follower = make_log(tmp_path, "follower", [(v, e) for v, e in zip([b"a", b"b", b"c"], follower_epochs)])
    leader = make_log(tmp_path, "leader", [(v, e) for v, e in zip([b"a", b"b", b"c"], leader_epochs)])
    assert converge(follower, leader) == rounds
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.leader_epochs.entries == leader.leader_epochs.entries


def test_two_unclean_elections_leave_nothing_of_either_divergence(tmp_path):
    """The e2e scenario in epochs: A wrote at epochs 0 and 2, B at 0, 1 and 3 (each led while the
    other was down); A returns as B's follower. One round would stop at the end of epoch 1 on B,
    keeping A's unreplicated epoch-0 records past the common prefix."""
    common = [(b"c%d" % i, 0) for i in range(4)]
    a = make_log(tmp_path, "a", common + [(b"a0-%d" % i, 0) for i in range(3)] + [(b"a2-%d" % i, 2) for i in range(2)])
    b = make_log(tmp_path, "b", common + [(b"b1-%d" % i, 1) for i in range(3)] + [(b"b3-%d" % i, 3) for i in range(2)])
    assert converge(a, b) == [(2, 7, False), (0, 4, True)]
    assert log_bytes(a) == log_bytes(b)


def test_truncation_state_names_why(tmp_path):
    state = truncation_state(4, 155, cache(tmp_path, (3, 50), (5, 120)), 200)
    assert isinstance(state, TruncationState) and "epoch 3" in state.why and "epoch 4" in state.why


# -- the replica fetcher asks again until the logs agree ----------------------------------------

class LeaderAnswers:
    """The leader's connection, answering OffsetForLeaderEpoch from a real leader log's epochs."""

    def __init__(self, leader: Log) -> None:
        self.leader = leader
        self.asked: list[int] = []

    async def request(self, req, timeout_s):
        import datetime

        from kio.schema.errors import ErrorCode
        from kio.schema.offset_for_leader_epoch.v4 import response as r
        from kio.static.primitive import i32, i64

        parts = []
        for t in req.topics:
            for p in t.partitions:
                self.asked.append(int(p.leader_epoch))
                epoch, end = self.leader.leader_epochs.end_offset_for(p.leader_epoch, self.leader.log_end_offset)
                parts.append(r.OffsetForLeaderTopicResult(topic=t.topic, partitions=(r.EpochEndOffset(
                    error_code=ErrorCode.none, partition=p.partition, leader_epoch=i32(epoch),
                    end_offset=i64(end)),)))
        return r.OffsetForLeaderEpochResponse(throttle_time=datetime.timedelta(0), topics=tuple(parts))


async def test_the_replica_fetcher_asks_again_until_the_logs_agree(tmp_path):
    """Before KIP-279's loop the fetcher stopped after one answer, at offset 7 here, keeping
    records of epoch 0 that the leader never had."""
    from broker.metadata.store import PartitionState
    from broker.replica.replica_fetcher import ReplicaFetcher, ReplicaFetcherManager
    from tests.unit.broker.test_replica_roles import ImageStore, manager, topic

    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    common = [(b"c%d" % i, 0) for i in range(4)]
    for value, epoch in common + [(b"a0-%d" % i, 0) for i in range(3)] + [(b"a2-%d" % i, 2) for i in range(2)]:
        data = make_batch([value])
        part.log.append(data, records.validate_batches(data, 1 << 20), leader_epoch=epoch)
    leader = make_log(tmp_path, "leader", common + [(b"b1-%d" % i, 1) for i in range(3)] +
                      [(b"b3-%d" % i, 3) for i in range(2)])
    store.set(topic(PartitionState(2, 4, (1, 2, 3), (2, 3)), version=1))
    rm.apply_image(store.image)
    fetcher = ReplicaFetcher(ReplicaFetcherManager(rm.config, rm), 2)
    fetcher.set_partitions({("t", 0): 4})
    fetcher.conn = LeaderAnswers(leader)
    await fetcher._truncate(rm)
    assert fetcher.conn.asked == [2, 0]
    assert part.log.log_end_offset == 4 and fetcher.partitions[("t", 0)].truncated
    assert part.log.leader_epochs.entries == [(0, 0)]
    assert log_bytes(part.log) == log_bytes(leader)[:len(log_bytes(part.log))]
    rm.close()


def test_a_truncated_log_is_dirty_again_from_its_new_end(tmp_path):
    from broker.log.cleaner import LogCleaner

    cleaner = LogCleaner([tmp_path], lambda: {})
    cleaner.first_dirty[("t", 0)] = 40
    cleaner.truncated(("t", 0), 55)
    assert cleaner.first_dirty[("t", 0)] == 40
    cleaner.truncated(("t", 0), 25)
    assert cleaner.first_dirty[("t", 0)] == 25
    cleaner.truncated(("t", 1), 5)
    assert ("t", 1) not in cleaner.first_dirty
