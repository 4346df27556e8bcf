"""Leader epoch cache: Kafka's leader-epoch-checkpoint file kept by the log on real files."""

import os

import pytest

from broker.log.leader_epoch import (LEADER_EPOCH_CHECKPOINT, UNDEFINED_EPOCH, LeaderEpochCache,
                                     read_epoch_checkpoint)
from broker.log.log import Log, LogConfig
from broker.protocol import records
from tests.unit.broker.batches import make_batch


def append(log, values, epoch):
    data = make_batch(values)
    res = log.append(data, records.validate_batches(data, 1 << 20), leader_epoch=epoch)
    log.high_watermark = log.log_end_offset
    return res


def file_text(directory):
    return (directory / LEADER_EPOCH_CHECKPOINT).read_text()


def stored_epochs(log):
    """partition_leader_epoch of every batch as it is on disk."""
    out = []
    for seg in log.segments:
        data = os.pread(seg.fd, seg.size, 0)
        out += [(h.base_offset, h.partition_leader_epoch) for _, h in records.iter_headers(data)]
    return out


def test_appends_stamp_the_epoch_and_write_kafkas_file(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, "t", 0, LogConfig())
    append(log, [b"a", b"b"], epoch=0)
    append(log, [b"c"], epoch=0)
    append(log, [b"d"], epoch=3)
    append(log, [b"e", b"f"], epoch=5)
    assert stored_epochs(log) == [(0, 0), (2, 0), (3, 3), (4, 5)]
    assert file_text(d) == "0\n3\n0 0\n3 3\n5 4\n"
    assert log.leader_epochs.end_offset_for(0, log.log_end_offset) == (0, 3)
    assert log.leader_epochs.end_offset_for(5, log.log_end_offset) == (5, 6)
    log.close()


def test_cache_rules_follow_kafka(tmp_path):
    c = LeaderEpochCache(tmp_path)
    assert c.assign(2, 10)
    assert not c.assign(2, 15)  # same epoch later: nothing new
    assert c.assign(4, 20)
    assert c.assign(6, 30)
    assert c.entries == [(2, 10), (4, 20), (6, 30)]
    # a start earlier than recorded for the latest epoch replaces it
    assert c.assign(6, 25)
    assert c.entries == [(2, 10), (4, 20), (6, 25)]
    # a smaller epoch (or a start before later entries) drops the entries it contradicts
    assert c.assign(5, 22)
    assert c.entries == [(2, 10), (4, 20), (5, 22)]
    assert read_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT) == [(2, 10), (4, 20), (5, 22)]
    with pytest.raises(ValueError):
        c.assign(-1, 5)
    # end offsets, as OffsetForLeaderEpoch answers them
    assert c.end_offset_for(5, 40) == (5, 40)      # latest epoch: the log end
    assert c.end_offset_for(4, 40) == (4, 22)      # start of the next epoch
    assert c.end_offset_for(3, 40) == (2, 20)      # unknown epoch between: the one below it
    assert c.end_offset_for(1, 40) == (1, 10)      # before every epoch: the first start
    assert c.end_offset_for(7, 40) == (UNDEFINED_EPOCH, -1)
    assert c.end_offset_for(UNDEFINED_EPOCH, 40) == (UNDEFINED_EPOCH, -1)
    # truncation from the end and from the start
    c.truncate_from_end(21)
    assert c.entries == [(2, 10), (4, 20)]
    c.truncate_from_start(15)
    assert c.entries == [(2, 15), (4, 20)]
    c.truncate_from_start(25)
    assert c.entries == [(4, 25)]
    assert read_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT) == [(4, 25)]


def test_recovered_at_start_and_rebuilt_when_missing_or_corrupt(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=200)
    log = Log.open(d, "t", 0, cfg)
    for epoch in (1, 1, 2, 2, 7):
        append(log, [b"x" * 50], epoch=epoch)
    leo = log.log_end_offset
    log.close()
    assert len(log.segments) > 1
    expected = [(1, 0), (2, 2), (7, 4)]

    log = Log.open(d, "t", 0, cfg, recovery_point=leo, high_watermark=leo, clean_shutdown=True)
    assert log.leader_epochs.entries == expected
    log.close()

    (d / LEADER_EPOCH_CHECKPOINT).unlink()
    log = Log.open(d, "t", 0, cfg, recovery_point=leo, high_watermark=leo, clean_shutdown=True)
    assert log.leader_epochs.entries == expected
    assert file_text(d) == "0\n3\n1 0\n2 2\n7 4\n"
    log.close()

    (d / LEADER_EPOCH_CHECKPOINT).write_text("0\n5\n1 0\n")  # count does not match: rebuilt
    log = Log.open(d, "t", 0, cfg, recovery_point=leo, high_watermark=leo, clean_shutdown=True)
    assert log.leader_epochs.entries == expected
    log.close()


def test_epochs_past_the_recovered_end_are_dropped_and_unlisted_ones_added(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, "t", 0, LogConfig())
    append(log, [b"a"], epoch=1)
    append(log, [b"b"], epoch=2)
    log.close()
    # the file says more than the log holds (an entry written before data that never reached disk)
    (d / LEADER_EPOCH_CHECKPOINT).write_text("0\n2\n1 0\n9 5\n")
    log = Log.open(d, "t", 0, LogConfig())  # unclean: the active segment is recovered
    assert log.leader_epochs.entries == [(1, 0), (2, 1)]
    assert read_epoch_checkpoint(d / LEADER_EPOCH_CHECKPOINT) == [(1, 0), (2, 1)]
    log.close()


def test_leader_takes_over_at_the_log_end_before_writing(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    append(log, [b"a", b"b"], epoch=0)
    log.assign_epoch_start(4)
    assert log.leader_epochs.entries == [(0, 0), (4, 2)]
    assert log.leader_epochs.end_offset_for(0, log.log_end_offset) == (0, 2)
    append(log, [b"c"], epoch=4)
    assert log.leader_epochs.entries == [(0, 0), (4, 2)]
    log.close()


def test_log_start_offset_moves_the_first_epoch(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=200))
    for epoch in (1, 1, 2, 2, 3):
        append(log, [b"x" * 50], epoch=epoch)
    log.advance_log_start_offset(3)
    assert log.leader_epochs.entries == [(2, 3), (3, 4)]
    log.close()
