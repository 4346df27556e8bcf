"""Sparse time index (issue 8, item 6) and record-level timestamp lookups (item 7) on real files.

Batches are built by kafka-python's own record encoder (every codec it supports, with the
snappy framing the Java client uses), the way a client puts them on the wire."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.log.log import Log, LogConfig
from broker.protocol import batch_records, records

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def ts_batch(timestamps: list[int], codec: str = "none", value: bytes = b"v" * 20) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[codec], is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=None, value=value, headers=[])
    return bytes(b.build())


def append(log: Log, data: bytes):
    res = log.append(data, records.validate_batches(data, 1 << 20))
    log.high_watermark = log.log_end_offset
    return res


@pytest.mark.parametrize("codec", list(CODECS))
def test_record_timestamps_are_read_inside_a_batch(codec):
    data = bytearray(ts_batch([5000, 7000, 6000], codec))
    records.rebase(data, 0, 40)
    assert list(batch_records.record_timestamps(bytes(data))) == [(40, 5000), (41, 7000), (42, 6000)]


@pytest.mark.parametrize("codec", list(CODECS))
def test_lookup_by_timestamp_answers_per_record(tmp_path, codec):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    append(log, ts_batch([1_000_000], codec))
    append(log, ts_batch([1_000_000_000, 1_001_000_000, 1_002_000_000], codec))  # offsets 1, 2, 3
    assert log.offset_for_timestamp(1_001_500_000) == (3, 1_002_000_000)
    assert log.offset_for_timestamp(1_001_000_000) == (2, 1_001_000_000)
    assert log.offset_for_timestamp(999_000_000) == (1, 1_000_000_000)
    assert log.offset_for_timestamp(1_002_000_001) is None


@pytest.mark.parametrize("codec", list(CODECS))
def test_max_timestamp_is_the_record_that_holds_it(tmp_path, codec):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    append(log, ts_batch([100, 200], codec))
    append(log, ts_batch([1000, 3000, 2000, 3000], codec))  # offsets 2..5: first 3000 at offset 3
    append(log, ts_batch([2500], codec))
    assert log.max_timestamp() == (3, 3000)


def test_time_index_is_sparse_and_lookups_stay_exact(tmp_path):
    cfg = LogConfig(index_interval_bytes=4096)
    log = Log.open(tmp_path / "t-0", "t", 0, cfg)
    expected = {}
    for i in range(300):  # ~3 records of ~120 bytes per batch: ~100 KB of log
        tss = [10_000 + 10 * (3 * i + j) for j in range(3)]
        base = append(log, ts_batch(tss)).base_offset
        expected.update({ts: base + j for j, ts in enumerate(tss)})
    seg = log.active
    batches = 300
    entries_allowed = seg.size // 4096 + 2
    assert len(seg.time_index.keys) <= entries_allowed < batches
    assert len(seg.offset_index.keys) <= entries_allowed
    assert seg.time_index.path.stat().st_size == 12 * len(seg.time_index.keys)
    for ts, off in expected.items():
        assert log.offset_for_timestamp(ts) == (off, ts)
        assert log.offset_for_timestamp(ts - 5) == (off, ts)
    assert log.max_timestamp() == (899, 10_000 + 10 * 899)


def test_sparse_index_survives_roll_close_and_reopen(tmp_path):
    cfg = LogConfig(index_interval_bytes=4096, segment_bytes=8_000)
    log = Log.open(tmp_path / "t-0", "t", 0, cfg)
    expected = {}
    for i in range(400):
        tss = [50_000 + 3 * i]
        expected[tss[0]] = append(log, ts_batch(tss)).base_offset
    assert len(log.segments) > 3
    # every closed segment's index ends with its largest timestamp (retention needs it)
    for seg in log.segments[:-1]:
        assert seg.time_index.keys[-1] == seg.max_timestamp
    leo = log.log_end_offset
    maxes = [s.max_timestamp for s in log.segments]
    log.close()
    log2 = Log.open(tmp_path / "t-0", "t", 0, cfg, recovery_point=leo, high_watermark=leo)
    assert [s.max_timestamp for s in log2.segments] == maxes
    for ts, off in expected.items():
        assert log2.offset_for_timestamp(ts) == (off, ts)
    assert log2.max_timestamp() == (399, 50_000 + 3 * 399)
    log2.close()
    # after a clean shutdown the active segment's indexes are trusted, not rebuilt
    log3 = Log.open(tmp_path / "t-0", "t", 0, cfg, recovery_point=leo, high_watermark=leo, clean_shutdown=True)
    assert [s.max_timestamp for s in log3.segments] == maxes
    assert log3.offset_for_timestamp(50_000 + 3 * 399) == (399, 50_000 + 3 * 399)


def test_truncation_recomputes_the_largest_timestamp(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(index_interval_bytes=1 << 20))
    for i in range(10):
        append(log, ts_batch([1000 + i]))
    append(log, ts_batch([99_999]))
    log.truncate_to(10)
    assert log.max_timestamp() == (9, 1009)
    assert log.offset_for_timestamp(5000) is None
