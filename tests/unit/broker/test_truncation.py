"""Log.truncate_to as Kafka's Log.truncateTo: checked on the segment bytes left on disk."""

import time

import pytest

from broker.log.leader_epoch import LEADER_EPOCH_CHECKPOINT, read_epoch_checkpoint
from broker.log.log import Log, LogConfig
from broker.protocol import records
from tests.unit.broker.batches import make_batch


def fill(log, batches, epoch=0):
    """Append [(values, producer kwargs)] and return each batch's bytes as the log stored them."""
    for values, kw in batches:
        data = make_batch(values, **kw)
        log.append(data, records.validate_batches(data, 1 << 20), leader_epoch=epoch)
    log.high_watermark = log.log_end_offset


def log_bytes(log):
    return b"".join(seg.log_path.read_bytes() for seg in log.segments)


def batch_bytes_below(data, offset):
    """The prefix of `data` (a log's bytes) made of batches whose last offset is < offset."""
    end = 0
    for pos, h in records.iter_headers(data):
        if h.last_offset >= offset:
            break
        end = pos + h.size
    return data[:end]


def make_log(tmp_path, **cfg):
    return Log.open(tmp_path / "t-0", "t", 0, LogConfig(**cfg))


def test_truncation_in_the_middle_of_the_active_segment(tmp_path):
    log = make_log(tmp_path, index_interval_bytes=1)
    fill(log, [([b"a", b"b"], {}), ([b"c", b"d", b"e"], {}), ([b"f"], {}), ([b"g", b"h"], {})])
    before = log_bytes(log)
    assert log.truncate_to(5)  # a batch boundary
    assert log.log_end_offset == 5
    assert log_bytes(log) == batch_bytes_below(before, 5)
    assert log.active.log_path.stat().st_size == len(batch_bytes_below(before, 5))
    # the index holds no entry at or past the cut; the next append lands right after
    assert all(pos < log.active.size for pos in log.active.offset_index.values)
    fill(log, [([b"z"], {})])
    data = log_bytes(log)
    assert data[:len(batch_bytes_below(before, 5))] == batch_bytes_below(before, 5)
    assert [h.base_offset for _, h in records.iter_headers(data)] == [0, 2, 5]


def test_an_offset_inside_a_batch_removes_the_whole_batch(tmp_path):
    log = make_log(tmp_path)
    fill(log, [([b"a", b"b"], {}), ([b"c", b"d", b"e"], {}), ([b"f"], {})])
    before = log_bytes(log)
    assert log.truncate_to(3)  # inside the batch 2..4: nothing at or past 3 may stay
    assert log.log_end_offset == 2
    assert log_bytes(log) == batch_bytes_below(before, 2)
    assert log.high_watermark == 2


def test_truncation_inside_an_older_segment_deletes_the_later_ones(tmp_path):
    log = make_log(tmp_path, segment_bytes=250)
    fill(log, [([b"x" * 40], {}) for _ in range(9)], epoch=1)
    fill(log, [([b"y" * 40], {}) for _ in range(3)], epoch=4)
    assert len(log.segments) >= 4
    before = log_bytes(log)
    files_before = sorted(p.name for p in log.directory.glob("*.log"))
    second = log.segments[1]
    target = second.base_offset + 1
    log.flush()
    assert log.truncate_to(target)
    assert [s.base_offset for s in log.segments] == [0, second.base_offset]
    assert sorted(p.name for p in log.directory.glob("*.log")) == files_before[:2]
    assert not list(log.directory.glob(f"{log.segments[-1].base_offset + 2:020d}.*"))
    assert log_bytes(log) == batch_bytes_below(before, target)
    assert log.log_end_offset == target
    assert log.recovery_point == target and log.high_watermark == target
    # epoch 4 started after the cut: gone from the cache and its file
    assert log.leader_epochs.entries == [(1, 0)]
    assert read_epoch_checkpoint(log.directory / LEADER_EPOCH_CHECKPOINT) == [(1, 0)]
    # reopening finds the same bytes and offsets
    log.close()
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=250))
    assert log.log_end_offset == target
    assert log_bytes(log) == batch_bytes_below(before, target)


def test_truncation_takes_producer_state_back(tmp_path):
    log = make_log(tmp_path)
    now = int(time.time() * 1000)  # producers idle past producer.id.expiration.ms are forgotten
    fill(log, [([b"a"], dict(producer_id=7, epoch=0, base_sequence=0, timestamp_ms=now)),
               ([b"b"], dict(producer_id=7, epoch=0, base_sequence=1, timestamp_ms=now)),
               ([b"c"], dict(producer_id=7, epoch=1, base_sequence=0, timestamp_ms=now))])
    log.close()  # a producer snapshot at offset 3 exists now
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    assert log.truncate_to(2)
    entry = log.producer_state.producers[7]
    assert entry.epoch == 0 and entry.last_seq == 1  # the epoch bump at offset 2 is gone
    assert not [p for p in log.directory.glob("*.snapshot") if int(p.stem) > 2]
    # the producer's next batch in epoch 0 is in sequence again
    fill(log, [([b"b2"], dict(producer_id=7, epoch=0, base_sequence=2, timestamp_ms=now))])
    assert log.log_end_offset == 3


def test_truncation_to_before_the_first_segment_starts_the_log_there(tmp_path):
    log = make_log(tmp_path, segment_bytes=250)
    fill(log, [([b"x" * 40], {}) for _ in range(6)], epoch=2)
    log.advance_log_start_offset(log.segments[1].base_offset)
    assert log.delete_segments_below_start() == 1  # as the retention loop does
    start = log.segments[0].base_offset
    assert log.truncate_to(start - 1)
    assert [s.base_offset for s in log.segments] == [start - 1]
    assert log.log_start_offset == log.log_end_offset == start - 1
    assert log_bytes(log) == b""
    assert log.leader_epochs.entries == []


def test_truncation_at_or_past_the_end_changes_nothing(tmp_path):
    log = make_log(tmp_path)
    fill(log, [([b"a", b"b"], {})])
    before = log_bytes(log)
    assert not log.truncate_to(2)
    assert not log.truncate_to(10)
    assert log_bytes(log) == before and log.log_end_offset == 2
    with pytest.raises(ValueError):
        log.truncate_to(-1)
