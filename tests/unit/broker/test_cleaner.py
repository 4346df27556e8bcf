"""The log cleaner on real segment files: what compaction keeps, the batches it writes, the
swap, and recovery from a crash in the middle of one."""

from __future__ import annotations

import os

import crc32c
from kio.records.readers import read_batch

from broker.log import cleaner as cleaner_mod
from broker.log.cleaner import DELETE_HORIZON_FLAG, LogCleaner
from broker.protocol.batch_records import decode_records
from broker.log.log import Log, LogConfig
from broker.protocol import compression, records
from tests.unit.broker.batches import make_batch

NOW = 1_800_000_000_000
COMPACT = dict(cleanup_policy="compact", segment_bytes=400, min_cleanable_dirty_ratio=0.0,
               delete_retention_ms=60_000)


def open_log(tmp_path, **kw):
    return Log.open(tmp_path / "t-0", "t", 0, LogConfig(**{**COMPACT, **kw}))


def append(lg, pairs, **kw):
    """One batch of (key, value) records; value None is a tombstone."""
    data = make_batch([v for _, v in pairs], keys=[k for k, _ in pairs], **kw)
    res = lg.append(data, records.validate_batches(data, 1 << 20))
    lg.high_watermark = lg.log_end_offset
    return res


def batches(lg):
    """(header, bytes) of every batch in the log, read from the files."""
    out = []
    for seg in lg.segments:
        data = os.pread(seg.fd, seg.size, 0)
        out += [(h, data[pos:pos + h.size]) for pos, h in records.iter_headers(data)]
    return out


def records_of(lg):
    """(offset, key, value) of every record, decoded by kio's reader (which checks CRCs)."""
    out = []
    for h, data in batches(lg):
        batch, _ = read_batch(data, 0)
        out += [(r.offset, r.key, r.value) for r in batch.records]
    return out


def cleaner_for(lg, tmp_path, **kw):
    return LogCleaner([tmp_path], lambda: {("t", 0): lg}, **kw)


def clean(lc, lg, now=NOW):
    job = lc.plan(("t", 0), lg, now)
    assert job is not None, "the log should be due for cleaning"
    return lc.clean(job[0])


def fill(lg, rounds=6, keys=3):
    """`rounds` updates of `keys` keys, one batch per update; returns the latest per key."""
    latest = {}
    for r in range(rounds):
        for k in range(keys):
            key, value = b"k%d" % k, b"v%d-%d" % (k, r)
            off = append(lg, [(key, value)]).base_offset
            latest[key] = (off, value)
    return latest


def test_keeps_the_latest_record_per_key_at_its_offset(tmp_path):
    lg = open_log(tmp_path)
    latest = fill(lg)
    append(lg, [(b"tail", b"in the active segment")])
    lg.roll()
    append(lg, [(b"k0", b"newest, in the active segment")])
    before_active = [r for r in records_of(lg) if r[0] >= lg.active.base_offset]
    n_segments = len(lg.segments)
    assert n_segments > 3
    lc = cleaner_for(lg, tmp_path)
    stats = clean(lc, lg)
    got = records_of(lg)
    closed = [r for r in got if r[0] < lg.active.base_offset]
    # k0's newer value in the active segment is beyond the cleanable range: as in Kafka, the
    # latest closed-segment value of k0 stays until that segment is cleaned too
    expected = sorted([(off, k, v) for k, (off, v) in latest.items()] + [(18, b"tail", b"in the active segment")])
    assert closed == expected
    assert [r for r in got if r[0] >= lg.active.base_offset] == before_active  # active untouched
    assert len(lg.segments) < n_segments  # small cleaned segments were merged
    assert stats.records_kept < stats.records_read
    assert lc.first_dirty[("t", 0)] == lg.active.base_offset
    # offsets keep working: reading from offset 0 finds the first kept batch
    region = lg.read(0, 1 << 20, upper_bound=lg.high_watermark)
    first = records.read_header(os.pread(region.fd, records.HEADER_SIZE, region.position))
    assert first.base_offset == expected[0][0]
    # and a reopened log (indexes as written by the cleaner) reads the same
    lg.close()
    lg2 = open_log(tmp_path, )
    assert records_of(lg2) == got
    assert lg2.log_end_offset == got[-1][0] + 1


def test_rewritten_batch_keeps_offsets_producer_fields_and_a_valid_crc(tmp_path):
    lg = open_log(tmp_path, segment_bytes=10_000)
    pairs = [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")]
    append(lg, pairs, producer_id=7, epoch=2, base_sequence=10, timestamp_ms=NOW - 5000)
    append(lg, [(b"c", b"5")], producer_id=7, epoch=2, base_sequence=14, timestamp_ms=NOW - 4000)
    lg.roll()
    append(lg, [(b"x", b"active")])
    orig = batches(lg)[0][0]
    clean(cleaner_for(lg, tmp_path), lg)
    h, data = batches(lg)[0]
    assert (h.base_offset, h.last_offset_delta) == (orig.base_offset, orig.last_offset_delta)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 10)
    assert h.partition_leader_epoch == orig.partition_leader_epoch
    assert h.records_count == 2
    batch, _ = read_batch(data, 0)  # checks the CRC32C
    assert [(r.offset, r.key, r.value) for r in batch.records] == [(1, b"b", b"2"), (2, b"a", b"3")]
    # Kafka's format: the base timestamp is the first kept record's, the max the largest kept
    assert h.base_timestamp == NOW - 5000 + 1 and h.max_timestamp == NOW - 5000 + 2
    # the producer's sequence state still answers a duplicate of its last batch
    assert lg.producer_state.producers[7].last_seq == 14


def test_compressed_batch_is_recompressed_with_its_codec(tmp_path):
    lg = open_log(tmp_path, segment_bytes=10_000)
    plain = make_batch([b"old", b"keep", b"new"], keys=[b"k", b"j", b"k"], timestamp_ms=NOW)
    h = records.read_header(plain)
    for codec in (compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD):
        body = compression.compress(codec, plain[records.HEADER_SIZE:])
        data = cleaner_mod._batch(h, h.attributes | codec, h.base_timestamp, h.max_timestamp, 3, body)
        lg.append(data, records.validate_batches(data, 1 << 20))
    lg.high_watermark = lg.log_end_offset
    lg.roll()
    append(lg, [(b"z", b"active")])
    clean(cleaner_for(lg, tmp_path), lg)
    kept = []
    for h2, data in batches(lg)[:-1]:
        assert h2.attributes & records.ATTR_COMPRESSION_MASK in (compression.GZIP, compression.SNAPPY,
                                                                 compression.LZ4, compression.ZSTD)
        assert crc32c.crc32c(data[records.ATTRIBUTES_OFFSET:]) == h2.crc
        kept += [(r.offset, r.key) for r in decode_records(data, h2)]
    # only the last batch (zstd) keeps anything: k and j of offsets 9..11 are the latest
    assert kept == [(10, b"j"), (11, b"k")]
    assert [h2.attributes & 7 for h2, _ in batches(lg)[:-1]] == [compression.ZSTD]


def test_tombstones_are_kept_for_delete_retention_then_removed(tmp_path):
    lg = open_log(tmp_path)
    append(lg, [(b"gone", b"v1")])
    append(lg, [(b"stay", b"s1")])
    append(lg, [(b"gone", None)])
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path)
    clean(lc, lg, now=NOW)
    assert [(k, v) for _, k, v in records_of(lg)] == [(b"stay", b"s1"), (b"gone", None), (b"x", b"active")]
    h = next(h for h, d in batches(lg) if any(r.is_tombstone for r in decode_records(d, h)))
    assert h.attributes & DELETE_HORIZON_FLAG and h.base_timestamp == NOW + 60_000  # KIP-534
    # before the horizon, nothing changes and the log is not due again
    assert lc.plan(("t", 0), lg, NOW + 59_999) is None
    # after it, the tombstone goes
    clean(lc, lg, now=NOW + 60_000)
    assert [(k, v) for _, k, v in records_of(lg)] == [(b"stay", b"s1"), (b"x", b"active")]


def test_last_batch_of_an_active_producer_stays_as_an_empty_header(tmp_path):
    lg = open_log(tmp_path)
    append(lg, [(b"k", b"1")], producer_id=5, epoch=0, base_sequence=0)
    append(lg, [(b"k", b"2")], producer_id=6, epoch=0, base_sequence=0)
    append(lg, [(b"k", b"3")], producer_id=6, epoch=0, base_sequence=1)
    append(lg, [(b"k", b"4")])  # supersedes every earlier k
    lg.roll()
    append(lg, [(b"x", b"active")])
    clean(cleaner_for(lg, tmp_path), lg)
    closed = [h for h, _ in batches(lg)][:-1]
    # producer 5's only batch and producer 6's last batch keep their headers, no records
    assert [(h.producer_id, h.base_offset, h.base_sequence, h.records_count) for h in closed] == [
        (5, 0, 0, 0), (6, 2, 1, 0), (-1, 3, -1, 1)]
    assert records_of(lg) == [(3, b"k", b"4"), (4, b"x", b"active")]


def markers(lg):
    """(offset, has a delete horizon, horizon) of every control batch in the log."""
    return [(h.base_offset, bool(h.attributes & DELETE_HORIZON_FLAG), h.base_timestamp)
            for h, _ in batches(lg) if h.is_control]


def dirty(lg, n):
    """A closed segment of fresh records, so the log is due again."""
    append(lg, [(b"d%d" % n, b"x")])
    lg.roll()


def commit_txn(lg, pid, seq, key, value, epoch=0):
    append(lg, [(key, value)], producer_id=pid, epoch=epoch, base_sequence=seq, transactional=True)
    return lg.append_marker(pid, epoch, commit=True, coordinator_epoch=0).base_offset


def test_a_commit_marker_stays_while_its_data_does_then_gets_a_horizon_then_goes(tmp_path):
    lg = open_log(tmp_path)
    first = commit_txn(lg, 5, 0, b"a", b"c1")     # data 0, marker 1
    second = commit_txn(lg, 5, 1, b"a", b"c2")    # data 2, marker 3: supersedes offset 0
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path)
    clean(lc, lg, now=NOW)
    # the data at 0 went in this pass, but the pass saw it before the marker: the marker stays as it is
    assert (0, b"a", b"c1") not in records_of(lg)
    assert [m[:2] for m in markers(lg)] == [(first, False), (second, False)]
    dirty(lg, 1)
    clean(lc, lg, now=NOW)
    # nothing of the first transaction is left: its marker gets a delete horizon; the second's data stays
    assert [m[:2] for m in markers(lg)] == [(first, True), (second, False)]
    assert markers(lg)[0][2] == NOW + 60_000
    assert lc.plan(("t", 0), lg, NOW + 59_999) is None
    # a restarted cleaner (no checkpoint, no memory) reads the horizon back from the batch
    (tmp_path / cleaner_mod.CHECKPOINT).unlink(missing_ok=True)
    again = cleaner_for(lg, tmp_path)
    clean(again, lg, now=NOW + 60_000)
    assert [m[:2] for m in markers(lg)] == [(second, False)]
    assert (2, b"a", b"c2") in records_of(lg)
    # and the log is not due again for the marker that stays
    assert again.plan(("t", 0), lg, NOW + 10**9) is None


def test_an_abort_marker_and_its_index_entry_go_once_the_aborted_records_are_gone(tmp_path):
    lg = open_log(tmp_path)
    append(lg, [(b"a", b"aborted")], producer_id=5, epoch=0, base_sequence=0, transactional=True)  # 0
    abort = lg.append_marker(5, 0, commit=False, coordinator_epoch=0).base_offset                  # 1
    commit = commit_txn(lg, 5, 1, b"b", b"kept")                                                    # 2, 3
    lg.high_watermark = lg.log_end_offset
    lg.roll()
    append(lg, [(b"x", b"active")])
    assert [t.producer_id for t in lg.aborted_transactions(0, lg.log_end_offset)] == [5]
    lc = cleaner_for(lg, tmp_path)
    clean(lc, lg, now=NOW)
    assert [k for _, k, _ in records_of(lg) if k in (b"a", b"b")] == [b"b"]
    # the pass read the aborted batch: the marker and its index entry stay
    assert [m[:2] for m in markers(lg)] == [(abort, False), (commit, False)]
    assert [t.last_offset for t in lg.aborted_transactions(0, lg.log_end_offset)] == [abort]
    dirty(lg, 1)
    clean(lc, lg, now=NOW)
    assert [m[:2] for m in markers(lg)] == [(abort, True), (commit, False)]
    assert lg.aborted_transactions(0, lg.log_end_offset) == []  # nothing left for a reader to skip
    assert not list((tmp_path / "t-0").glob("*.txnindex"))
    clean(lc, lg, now=NOW + 60_000)
    assert [m[:2] for m in markers(lg)] == [(commit, False)]


def test_a_marker_that_is_all_left_of_a_tracked_producer_stays_for_its_epoch(tmp_path):
    lg = open_log(tmp_path)
    append(lg, [(b"a", b"v")], producer_id=5, epoch=0, base_sequence=0, transactional=True)  # 0
    # the coordinator aborted it with a bumped epoch (a timeout): the producer has epoch 1, no batches
    marker = lg.append_marker(5, 1, commit=False, coordinator_epoch=0).base_offset           # 1
    lg.high_watermark = lg.log_end_offset
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path)
    clean(lc, lg, now=NOW)
    dirty(lg, 1)
    clean(lc, lg, now=NOW)
    dirty(lg, 2)
    clean(lc, lg, now=NOW + 10**9)
    assert [m[:2] for m in markers(lg)] == [(marker, False)]
    assert [k for _, k, _ in records_of(lg) if k == b"a"] == []


def test_active_segment_and_young_segments_are_not_cleaned(tmp_path):
    lg = open_log(tmp_path, min_compaction_lag_ms=10_000)
    append(lg, [(b"k", b"old")], timestamp_ms=NOW - 60_000)
    lg.roll()
    append(lg, [(b"k", b"young")], timestamp_ms=NOW - 1_000)
    lg.roll()
    append(lg, [(b"k", b"active")], timestamp_ms=NOW)
    lc = cleaner_for(lg, tmp_path)
    # only the old segment is cleanable, and nothing in it is superseded within the cleanable range
    stats = clean(lc, lg)
    assert [v for _, _, v in records_of(lg)] == [b"old", b"young", b"active"]
    assert stats.records_kept == stats.records_read == 1
    assert lc.first_dirty[("t", 0)] == 1
    # a log whose only segment is active is never due
    lg2 = Log.open(tmp_path / "u-0", "u", 0, LogConfig(**COMPACT))
    append(lg2, [(b"k", b"1")])
    append(lg2, [(b"k", b"2")])
    assert LogCleaner([tmp_path], lambda: {("u", 0): lg2}).plan(("u", 0), lg2, NOW) is None


def test_dirty_ratio_decides_when_to_clean(tmp_path):
    lg = open_log(tmp_path, min_cleanable_dirty_ratio=0.5)
    fill(lg, rounds=4)
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path)
    clean(lc, lg)
    assert lc.plan(("t", 0), lg, NOW) is None  # all clean now
    append(lg, [(b"k0", b"one more")])
    lg.roll()
    append(lg, [(b"x", b"active 2")])
    # one small dirty segment against the clean ones: below the ratio
    assert lc.plan(("t", 0), lg, NOW) is None
    for i in range(12):
        append(lg, [(b"k1", b"more %d" % i)])
    lg.roll()
    append(lg, [(b"x", b"active 3")])
    assert lc.plan(("t", 0), lg, NOW) is not None


def test_crash_after_the_swap_commit_completes_at_start_up(tmp_path):
    lg = open_log(tmp_path)
    latest = fill(lg)
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path)
    job = lc.plan(("t", 0), lg, NOW)[0]
    offset_map, end = lc.cleaner.build_offset_map(job, cleaner_mod.CleanStats())
    views = [v for v in job.segments if v.next_base <= end]
    cleaned = lc.cleaner.clean_group(job, views, offset_map, cleaner_mod.CleanStats())
    d = tmp_path / "t-0"
    base = cleaned.base_offset
    # the commit point, then a crash before the old segments moved away
    os.rename(d / ("%020d.log.cleaned" % base), d / ("%020d.log.swap" % base))
    lg.close()
    lg2 = open_log(tmp_path)
    assert not list(d.glob("*.swap")) and not list(d.glob("*.cleaned"))
    assert records_of(lg2) == sorted([(o, k, v) for k, (o, v) in latest.items()]) + [(18, b"x", b"active")]
    # the swapped-in segment's indexes were rebuilt: timestamp lookups work
    assert lg2.offset_for_timestamp(0) is not None


def test_crash_before_the_swap_commit_keeps_the_old_segments(tmp_path):
    lg = open_log(tmp_path)
    fill(lg)
    lg.roll()
    append(lg, [(b"x", b"active")])
    before = records_of(lg)
    lc = cleaner_for(lg, tmp_path)
    job = lc.plan(("t", 0), lg, NOW)[0]
    offset_map, end = lc.cleaner.build_offset_map(job, cleaner_mod.CleanStats())
    lc.cleaner.clean_group(job, [v for v in job.segments if v.next_base <= end], offset_map,
                           cleaner_mod.CleanStats())
    lg.close()
    lg2 = open_log(tmp_path)
    assert records_of(lg2) == before
    assert not list((tmp_path / "t-0").glob("*.cleaned"))


def test_segments_deleted_while_cleaning_abort_the_swap(tmp_path):
    lg = open_log(tmp_path, cleanup_policy="compact,delete", retention_ms=1)
    fill(lg)
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path)
    job = lc.plan(("t", 0), lg, NOW)[0]
    offset_map, end = lc.cleaner.build_offset_map(job, cleaner_mod.CleanStats())
    group = [v for v in job.segments if v.next_base <= end]
    cleaned = lc.cleaner.clean_group(job, group, offset_map, cleaner_mod.CleanStats())
    assert lg.enforce_retention(now_ms=NOW + 10**9) > 0  # compact,delete: retention applies too
    assert not cleaner_mod.swap_in(job, group, cleaned)
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    assert all(r[0] >= 18 for r in records_of(lg))  # what retention left is untouched


def test_reads_of_old_segments_survive_the_swap(tmp_path):
    lg = open_log(tmp_path)
    fill(lg)
    lg.roll()
    append(lg, [(b"x", b"active")])
    region = lg.read(0, 1 << 20, upper_bound=lg.high_watermark)
    before = os.pread(region.fd, region.length, region.position)
    clean(cleaner_for(lg, tmp_path), lg)
    assert os.pread(region.fd, region.length, region.position) == before  # the old file, still open


def test_cleaner_checkpoint_survives_restart(tmp_path):
    lg = open_log(tmp_path)
    fill(lg)
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path)
    clean(lc, lg)
    lc.close()
    assert cleaner_for(lg, tmp_path).first_dirty == {("t", 0): lg.active.base_offset}


async def test_background_task_cleans_off_the_event_loop(tmp_path):
    import asyncio
    lg = open_log(tmp_path)
    latest = fill(lg)
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path, backoff_ms=50)
    task = asyncio.create_task(lc.run())
    try:
        for _ in range(200):
            if lc.cleanings:
                break
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert lc.cleanings == 1
    assert [r[1:] for r in records_of(lg)] == sorted(
        [(k, v) for k, (o, v) in latest.items()], key=lambda kv: latest[kv[0]][0]) + [(b"x", b"active")]


def test_max_compaction_lag_makes_an_old_dirty_log_due_whatever_its_ratio(tmp_path):
    lg = open_log(tmp_path, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=60_000)
    append(lg, [(b"k", b"1")], timestamp_ms=NOW - 30_000)
    append(lg, [(b"k", b"2")], timestamp_ms=NOW - 30_000)
    lg.roll()
    append(lg, [(b"x", b"active")], timestamp_ms=NOW)
    lc = cleaner_for(lg, tmp_path)
    assert lc.plan(("t", 0), lg, NOW) is None  # ratio 1.0 is never exceeded, the lag not reached
    clean(lc, lg, now=NOW + 31_000)  # the oldest dirty record is now older than max.compaction.lag.ms
    assert [v for _, _, v in records_of(lg)] == [b"2", b"active"]


def test_log_append_time_batch_keeps_its_timestamp_when_rewritten(tmp_path):
    lg = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    append(lg, [(b"k", b"old"), (b"j", b"keep")])
    append(lg, [(b"k", b"new")])
    lg.roll()
    append(lg, [(b"x", b"active")])
    before = batches(lg)[0][0]
    clean(cleaner_for(lg, tmp_path), lg)
    h, data = batches(lg)[0]
    assert h.attributes & records.ATTR_TIMESTAMP_TYPE and h.max_timestamp == before.max_timestamp
    assert [(r.offset, r.key, r.timestamp) for r in decode_records(data, h)] == [(1, b"j", before.max_timestamp)]
    assert crc32c.crc32c(data[records.ATTRIBUTES_OFFSET:]) == h.crc



def test_tombstone_horizon_survives_a_restart_of_the_cleaner(tmp_path):
    """Issue 18 item 13: a restarted broker's cleaner reads the horizon back from the batch, so
    the tombstone neither goes early nor stays forever when nothing else makes the log dirty."""
    lg = open_log(tmp_path)
    append(lg, [(b"gone", b"v1")])
    append(lg, [(b"stay", b"s1")])
    append(lg, [(b"gone", None)])
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path)
    clean(lc, lg, now=NOW)
    lc.close()  # writes the checkpoint: after a restart nothing is dirty
    restarted = cleaner_for(lg, tmp_path)
    assert restarted.first_dirty == {("t", 0): lg.active.base_offset}
    assert restarted.plan(("t", 0), lg, NOW + 59_999) is None  # not before the horizon
    clean(restarted, lg, now=NOW + 60_000)
    assert [(k, v) for _, k, v in records_of(lg)] == [(b"stay", b"s1"), (b"x", b"active")]


def test_recleaning_without_a_checkpoint_keeps_the_stamped_horizon(tmp_path):
    """A restart that lost the cleaner checkpoint (kill -9 before it was written) cleans the log
    again from its start: the tombstone keeps its first horizon, not a later or earlier one."""
    lg = open_log(tmp_path)
    append(lg, [(b"gone", b"v1")])
    append(lg, [(b"gone", None)])
    lg.roll()
    append(lg, [(b"x", b"active")])
    clean(cleaner_for(lg, tmp_path), lg, now=NOW)
    again = cleaner_for(lg, tmp_path)
    assert again.first_dirty == {}
    clean(again, lg, now=NOW + 30_000)
    h = next(h for h, d in batches(lg) if any(r.is_tombstone for r in decode_records(d, h)))
    assert h.attributes & DELETE_HORIZON_FLAG and h.base_timestamp == NOW + 60_000
    assert again.plan(("t", 0), lg, NOW + 59_999) is None
    clean(again, lg, now=NOW + 60_000)
    assert [(k, v) for _, k, v in records_of(lg)] == [(b"x", b"active")]


def test_transactions_aborted_records_go_markers_stay_and_undecided_records_are_not_cleaned(tmp_path):
    lg = open_log(tmp_path)
    append(lg, [(b"k1", b"v1")])                                                    # 0
    lg.roll()
    append(lg, [(b"k1", b"aborted")], producer_id=5, epoch=0, base_sequence=0, transactional=True)  # 1
    lg.roll()
    lg.append_marker(5, 0, commit=False, coordinator_epoch=0)                       # 2: its index entry is here
    lg.high_watermark = lg.log_end_offset
    append(lg, [(b"k2", b"committed")], producer_id=6, epoch=0, base_sequence=0, transactional=True)  # 3
    lg.append_marker(6, 0, commit=True, coordinator_epoch=0)                        # 4
    lg.high_watermark = lg.log_end_offset
    lg.roll()
    append(lg, [(b"k2", b"open")], producer_id=7, epoch=0, base_sequence=0, transactional=True)  # 5, undecided
    append(lg, [(b"k2", b"later")])                                                 # 6
    lg.roll()
    append(lg, [(b"x", b"active")])
    assert lg.last_stable_offset == 5
    assert [t.producer_id for t in lg.aborted_transactions(0, lg.log_end_offset)] == [5]

    clean(cleaner_for(lg, tmp_path), lg)
    kept = [(o, k, v) for o, k, v in records_of(lg)]
    data = [(o, k, v) for o, k, v in kept if k in (b"k1", b"k2", b"x")]
    # k1=v1 stays (the aborted record neither stays nor hides it); records at or past the LSO are
    # not cleaned, so k2's committed record is not removed while k2=open is undecided.
    assert data == [(0, b"k1", b"v1"), (3, b"k2", b"committed"), (5, b"k2", b"open"), (6, b"k2", b"later"),
                    (7, b"x", b"active")]
    assert [h.base_offset for h, _ in batches(lg) if h.is_control] == [2, 4]
    # The aborted transaction's index entry moved with its marker into the merged segment.
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in lg.aborted_transactions(0, lg.log_end_offset)] == [(5, 1, 2)]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.txnindex")) == [
        "%020d.txnindex" % lg.segments[0].base_offset]


def test_a_marker_in_a_later_group_than_its_data_stays_while_the_data_does(tmp_path):
    lg = open_log(tmp_path)
    append(lg, [(b"a", b"v" * 300)], producer_id=5, epoch=0, base_sequence=0, transactional=True)  # 0
    lg.roll()  # the next segment cannot join this one's group (segment.bytes 400)
    marker = lg.append_marker(5, 0, commit=True, coordinator_epoch=0).base_offset                  # 1
    lg.high_watermark = lg.log_end_offset
    lg.roll()
    append(lg, [(b"x", b"active")])
    lc = cleaner_for(lg, tmp_path)
    job = lc.plan(("t", 0), lg, NOW)[0]
    assert len(cleaner_mod.group_by_size(job.segments, job.segment_bytes)) == 2
    lc.clean(job)
    dirty(lg, 1)
    clean(lc, lg, now=NOW + 10**9)
    # the committed record is still the key's latest: its marker keeps no horizon and stays
    assert [m[:2] for m in markers(lg)] == [(marker, False)]
    assert (0, b"a", b"v" * 300) in records_of(lg)
