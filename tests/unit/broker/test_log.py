import os
import re
import time

import pytest

from broker.log.log import (DuplicateSequence, Log, LogConfig, OffsetOutOfRange, OutOfOrderSequence,
                            ProducerFenced, StorageError)
from broker.protocol import records
from tests.unit.broker.batches import make_batch


def append(log, values, **kw):
    data = make_batch(values, **kw)
    res = log.append(data, records.validate_batches(data, 1 << 20))
    log.high_watermark = log.log_end_offset
    return res


def read_all(log, offset=0):
    region = log.read(offset, 1 << 30, upper_bound=log.high_watermark)
    if region is None:
        return []
    data = os.pread(region.fd, region.length, region.position)
    return [h for _, h in records.iter_headers(data)]


def test_offsets_are_assigned_and_read_back(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    assert append(log, [b"a", b"b"]).base_offset == 0
    assert append(log, [b"c"]).base_offset == 2
    assert log.log_end_offset == 3
    hs = read_all(log)
    assert [(h.base_offset, h.records_count) for h in hs] == [(0, 2), (2, 1)]
    # reading from the middle of a batch returns the whole batch holding that offset
    assert read_all(log, 1)[0].base_offset == 0
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 100, upper_bound=3)


def test_read_respects_max_bytes_but_returns_at_least_one_batch(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    for i in range(5):
        append(log, [b"x" * 100])
    one = log.read(0, 10, upper_bound=log.high_watermark, min_one=True)
    assert one is not None and one.length == records.peek_size(os.pread(one.fd, 12, 0))
    # without min_one, Kafka sends the first max_bytes (a partial batch the client drops)
    part = log.read(0, 10, upper_bound=log.high_watermark, min_one=False)
    assert (part.position, part.length) == (0, 10)
    assert log.read(0, 0, upper_bound=log.high_watermark, min_one=False) is None
    # the high watermark bounds what is visible
    region = log.read(0, 1 << 20, upper_bound=2)
    assert [h.base_offset for _, h in records.iter_headers(os.pread(region.fd, region.length, region.position))] == [0, 1]


def test_roll_by_size_and_reopen(tmp_path):
    cfg = LogConfig(segment_bytes=300)
    log = Log.open(tmp_path / "t-0", "t", 0, cfg)
    for i in range(10):
        append(log, [b"y" * 100])
    assert len(log.segments) > 3
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    rp = log.log_end_offset
    log.close()
    log2 = Log.open(tmp_path / "t-0", "t", 0, cfg, recovery_point=rp, high_watermark=rp)
    assert log2.log_end_offset == 10
    assert [h.base_offset for h in read_all(log2, 0)][:1] == [0]
    assert read_all(log2, 7)[0].base_offset == 7


def test_torn_tail_is_truncated_on_recovery(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    for i in range(3):
        append(log, [b"z" * 50])
    seg_path = log.active.log_path
    good_size = log.active.size
    log.close()
    half = make_batch([b"torn" * 20])
    with open(seg_path, "ab") as f:
        f.write(half[: len(half) // 2])
    log2 = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), recovery_point=0)
    assert log2.log_end_offset == 3
    assert seg_path.stat().st_size == good_size
    assert append(log2, [b"after"]).base_offset == 3


def test_corrupt_batch_in_tail_is_cut(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    append(log, [b"ok"])
    pos = log.active.size
    append(log, [b"bad"])
    seg = log.active.log_path
    log.close()
    with open(seg, "r+b") as f:
        f.seek(pos + 70)
        f.write(b"\xff")
    log2 = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    assert log2.log_end_offset == 1


def test_timestamps(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(index_interval_bytes=1))
    append(log, [b"a"], timestamp_ms=1000)
    append(log, [b"b"], timestamp_ms=5000)
    append(log, [b"c"], timestamp_ms=3000)
    assert log.offset_for_timestamp(900)[0] == 0
    assert log.offset_for_timestamp(2000)[0] == 1
    assert log.offset_for_timestamp(9000) is None
    assert log.max_timestamp() == (1, 5000)


def test_retention_by_size_and_time(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=200, retention_bytes=400))
    for i in range(10):
        append(log, [b"r" * 100], timestamp_ms=1000 + i)
    before = len(log.segments)
    assert log.enforce_retention(now_ms=2000) > 0
    assert len(log.segments) < before
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100, upper_bound=log.high_watermark)
    log.config = LogConfig(segment_bytes=200, retention_ms=1000)
    log.enforce_retention(now_ms=10_000_000)
    assert log.log_start_offset == log.log_end_offset == 10


def test_idempotent_producer_dedup_and_gaps(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    first = append(log, [b"a", b"b"], producer_id=5, epoch=0, base_sequence=0)
    with pytest.raises(DuplicateSequence) as dup:
        append(log, [b"a", b"b"], producer_id=5, epoch=0, base_sequence=0)
    assert dup.value.base_offset == first.base_offset
    assert log.log_end_offset == 2
    with pytest.raises(OutOfOrderSequence):
        append(log, [b"c"], producer_id=5, epoch=0, base_sequence=5)
    append(log, [b"c"], producer_id=5, epoch=0, base_sequence=2)
    append(log, [b"d"], producer_id=5, epoch=1, base_sequence=0)
    with pytest.raises(ProducerFenced):
        append(log, [b"e"], producer_id=5, epoch=0, base_sequence=3)


def test_producer_state_survives_restart(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    now = int(time.time() * 1000)  # producers age by their batches' timestamps
    append(log, [b"a"], producer_id=9, epoch=0, base_sequence=0, timestamp_ms=now)
    log.close()
    # unclean: no snapshot at the end, state must be rebuilt from batch headers
    for s in (tmp_path / "t-0").glob("*.snapshot"):
        s.unlink()
    log2 = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    with pytest.raises(DuplicateSequence):
        append(log2, [b"a"], producer_id=9, epoch=0, base_sequence=0, timestamp_ms=now)


def test_failed_write_leaves_log_unchanged(tmp_path, monkeypatch):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    append(log, [b"kept"])
    size = log.active.size

    def full_disk(fd, data, pos):
        os.write(fd, b"\x00" * 5)  # a partial write before the error
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(StorageError, match="No space"):
        append(log, [b"lost"])
    monkeypatch.undo()
    assert log.active.size == size == log.active.log_path.stat().st_size
    assert log.log_end_offset == 1
    assert append(log, [b"next"]).base_offset == 1


def test_idle_producers_expire_from_state_and_snapshots(tmp_path):
    cfg = LogConfig(producer_id_expiration_ms=60_000)
    log = Log.open(tmp_path / "t-0", "t", 0, cfg)
    now = int(time.time() * 1000)
    for pid in range(100):  # idle: newest batch two minutes old
        append(log, [b"old"], producer_id=pid, epoch=0, base_sequence=0, timestamp_ms=now - 120_000)
    append(log, [b"live"], producer_id=500, epoch=0, base_sequence=0, timestamp_ms=now)
    log.roll()
    big = sorted((tmp_path / "t-0").glob("*.snapshot"))[-1].stat().st_size
    assert log.remove_expired_producers(now) == 100
    assert list(log.producer_state.producers) == [500]
    log.roll()
    small = sorted((tmp_path / "t-0").glob("*.snapshot"))[-1].stat().st_size
    assert small < big / 20
    with pytest.raises(DuplicateSequence):  # the live producer still deduplicates
        append(log, [b"live"], producer_id=500, epoch=0, base_sequence=0, timestamp_ms=now)
    # an expired producer is unknown: it may go on from any sequence, as in Kafka
    assert append(log, [b"back"], producer_id=7, epoch=0, base_sequence=5, timestamp_ms=now).base_offset == 101
    log.close()
    # reopened from the snapshot written at close: the producers still writing
    log2 = Log.open(tmp_path / "t-0", "t", 0, cfg)
    assert sorted(log2.producer_state.producers) == [7, 500]


def test_corruption_in_an_older_segment_drops_everything_after_it(tmp_path, caplog):
    """Kafka's log loader: the log ends at the first invalid batch; later segments go too."""
    cfg = LogConfig(segment_bytes=400)  # two one-record batches per segment
    log = Log.open(tmp_path / "t-0", "t", 0, cfg)
    for i in range(10):
        append(log, [b"y" * 100])
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 2, 4, 6, 8]
    second = log.segments[1]
    corrupt_at = second.base_offset + 1  # second batch of the second segment
    position = second.find_position(corrupt_at)[0]
    log.close()
    with open(second.log_path, "r+b") as f:
        f.seek(position + 70)
        f.write(b"\xff")
    with caplog.at_level("WARNING"):
        log2 = Log.open(tmp_path / "t-0", "t", 0, cfg, recovery_point=0, high_watermark=10)
    assert log2.log_end_offset == corrupt_at
    assert [s.base_offset for s in log2.segments] == bases[:2]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [f"{b:020d}.log" for b in bases[:2]]
    assert [h.base_offset for h in read_all(log2, 0) + read_all(log2, 2)] == list(range(corrupt_at))
    assert "deleted" in caplog.text and re.search(rf"ends at offset {corrupt_at}\b", caplog.text)
    assert append(log2, [b"next"]).base_offset == corrupt_at


def test_clean_shutdown_trusts_the_active_segment_but_checks_its_tail(tmp_path, monkeypatch):
    from broker.log.segment import Segment

    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    for i in range(50):
        append(log, [b"q" * 200])
    seg_path = log.active.log_path
    log.close()
    scans = []
    real_recover = Segment.recover
    monkeypatch.setattr(Segment, "recover", lambda self: scans.append(self.base_offset) or real_recover(self))
    log2 = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), recovery_point=50, clean_shutdown=True)
    assert scans == [] and log2.log_end_offset == 50
    log2.close()
    with open(seg_path, "ab") as f:  # changed after the clean shutdown: the tail check notices
        f.write(os.urandom(500))
    log3 = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), recovery_point=50, clean_shutdown=True)
    assert scans == [0] and log3.log_end_offset == 50
    assert append(log3, [b"after"]).base_offset == 50


def test_fetch_sends_a_byte_range_without_reading_every_batch(tmp_path, monkeypatch):
    """Issue 8, item 11: Kafka's LogSegment.read finds the start with the offset index and sends
    the byte range up to the limit; it does not read the header of every batch it returns."""
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(index_interval_bytes=4096))
    sizes = []
    for i in range(3000):
        sizes.append(len(make_batch([b"%05d" % i])))
        append(log, [b"%05d" % i])
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    calls = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, pos: calls.append(n) or real_pread(fd, n, pos))
    region = log.read(1000, 64 * 1024, upper_bound=log.high_watermark, min_one=True)
    assert region.position == starts[1000]
    assert region.length == 64 * 1024  # the last batch is cut at the limit, as Kafka sends it
    assert len(calls) <= 2 and sum(calls) <= 2 * 16384, calls
    data = real_pread(region.fd, region.length, region.position)
    whole = [h.base_offset for _, h in records.iter_headers(data)]
    assert whole[0] == 1000 and whole == list(range(1000, 1000 + len(whole)))
    assert starts[1000 + len(whole)] - starts[1000] <= 64 * 1024 < starts[1001 + len(whole)] - starts[1000]
    # the high watermark bounds the range at its batch's start
    region = log.read(1000, 1 << 20, upper_bound=1010, min_one=True)
    assert (region.position, region.length) == (starts[1000], starts[1010] - starts[1000])
    # a read past the last index entry's interval still starts at the right batch
    region = log.read(2999, 1 << 20, upper_bound=log.high_watermark)
    assert (region.position, region.length) == (starts[2999], sizes[2999])
