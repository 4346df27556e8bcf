"""The follower's append: a leader's batches written as they are, on real files."""

import struct
import time

import pytest

from broker.log.log import Log, LogConfig, OffsetsOutOfOrder, UnexpectedAppendOffset
from broker.protocol import records
from tests.unit.broker.batches import make_batch


def lead(log, values, leader_epoch, **kw):
    data = make_batch(values, **kw)
    return log.append(data, records.validate_batches(data, 1 << 20), leader_epoch=leader_epoch)


def log_bytes(log):
    return b"".join(seg.log_path.read_bytes() for seg in log.segments)


def fetched(log, offset):
    """What a follower's fetch from `offset` would carry: the leader's bytes, whole batches."""
    data = log_bytes(log)
    for pos, h in records.iter_headers(data):
        if h.last_offset >= offset:
            return data[pos:]
    return b""


def open_log(tmp_path, name, **cfg):
    return Log.open(tmp_path / name, "t", 0, LogConfig(**cfg))


def test_follower_keeps_the_leaders_bytes_offsets_and_epochs(tmp_path):
    leader = open_log(tmp_path, "leader")
    now = int(time.time() * 1000)
    lead(leader, [b"a", b"b"], 1, producer_id=9, epoch=0, base_sequence=0, timestamp_ms=now)
    lead(leader, [b"c"], 1)
    lead(leader, [b"d", b"e", b"f"], 3, producer_id=9, epoch=0, base_sequence=2, timestamp_ms=now)
    follower = open_log(tmp_path, "follower", segment_bytes=150)
    res = follower.append_as_follower(fetched(leader, 0))
    assert (res.base_offset, res.last_offset) == (0, 5)
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.log_end_offset == leader.log_end_offset == 6
    assert follower.leader_epochs.entries == leader.leader_epochs.entries == [(1, 0), (3, 3)]
    assert follower.producer_state.producers[9].last_seq == 4
    assert follower.high_watermark == 0  # learnt from the leader, not from appending
    # the next fetch continues at the follower's log end
    lead(leader, [b"g"], 4)
    follower.append_as_follower(fetched(leader, follower.log_end_offset))
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.leader_epochs.entries == [(1, 0), (3, 3), (4, 6)]
    # reopening finds the same epochs from the file
    follower.close()
    again = open_log(tmp_path, "follower", segment_bytes=150)
    assert again.leader_epochs.entries == [(1, 0), (3, 3), (4, 6)]
    assert again.log_end_offset == 7


def test_follower_refuses_bad_batches_and_writes_nothing(tmp_path):
    leader = open_log(tmp_path, "leader")
    lead(leader, [b"a"], 0)
    lead(leader, [b"b"], 0)
    follower = open_log(tmp_path, "follower")
    follower.append_as_follower(fetched(leader, 0))
    before = log_bytes(follower)
    lead(leader, [b"c"], 0)
    good = fetched(leader, 2)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    with pytest.raises(records.CorruptRecordError):
        follower.append_as_follower(bytes(corrupt))
    with pytest.raises(records.CorruptRecordError):
        follower.append_as_follower(good[:-3])  # torn
    with pytest.raises(UnexpectedAppendOffset):
        follower.append_as_follower(fetched(leader, 1))  # starts below the log end
    third = bytearray(good)
    struct.pack_into(">q", third, 0, 3)  # a batch at offset 3 followed by one going back to 2
    with pytest.raises(OffsetsOutOfOrder):
        follower.append_as_follower(bytes(third + good))
    assert log_bytes(follower) == before and follower.log_end_offset == 2
    follower.append_as_follower(good)
    assert log_bytes(follower) == log_bytes(leader)


def test_a_compacted_leaders_gap_is_kept(tmp_path):
    leader = open_log(tmp_path, "leader")
    for v in (b"a", b"b", b"c"):
        lead(leader, [v], 2)
    follower = open_log(tmp_path, "follower")
    follower.append_as_follower(fetched(leader, 0)[: records.read_header(fetched(leader, 0)).size])
    gap = fetched(leader, 2)  # offset 1 was cleaned away on the leader
    follower.append_as_follower(gap)
    assert [h.base_offset for _, h in records.iter_headers(log_bytes(follower))] == [0, 2]
    assert follower.log_end_offset == 3


def test_diverged_follower_truncates_to_the_leaders_epoch_end_and_converges(tmp_path):
    """The old leader wrote batches in epoch 1 the new leader never got; the new leader (epoch 2)
    wrote others at the same offsets. The follower asks where epoch 1 ended, truncates there and
    fetches: its segment bytes then equal the leader's."""
    old = open_log(tmp_path, "old", segment_bytes=200)
    new = open_log(tmp_path, "new", segment_bytes=200)
    for v in (b"one", b"two"):
        lead(old, [v * 10], 1)
    new.append_as_follower(fetched(old, 0))  # replicated while epoch 1 led
    for v in (b"lost-3", b"lost-4", b"lost-5"):
        lead(old, [v * 10], 1)  # never replicated
    new.assign_epoch_start(2)
    for v in (b"new-2", b"new-3"):
        lead(new, [v * 10], 2)
    epoch, end = new.leader_epochs.end_offset_for(old.leader_epochs.latest_epoch, new.log_end_offset)
    assert (epoch, end) == (1, 2)
    assert old.truncate_to(end)
    old.append_as_follower(fetched(new, old.log_end_offset))
    assert log_bytes(old) == log_bytes(new)
    assert old.leader_epochs.entries == new.leader_epochs.entries == [(1, 0), (2, 2)]
