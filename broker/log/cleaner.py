"""The log cleaner: key-based compaction of `cleanup.policy=compact` logs, as Kafka's LogCleaner.

For each compacted log the cleaner remembers how far it has cleaned (`cleaner-offset-checkpoint`
in each log directory, Kafka's file). What lies between that offset and the first uncleanable
offset is the *dirty* section; the first uncleanable offset is the base of the active segment
(never cleaned), of the first segment younger than `min.compaction.lag.ms`, or the high
watermark, whichever is lowest. A log is cleaned when its dirty bytes are more than
`min.cleanable.dirty.ratio` of its cleanable bytes, when its oldest dirty record is older than
`max.compaction.lag.ms`, or when tombstones it kept have outlived `delete.retention.ms`.

Cleaning one log (Kafka's Cleaner.clean):
  1. map each key of the dirty section to the offset of its last record (`OffsetMap`, keys hashed
     with MD5 as Kafka's SkimpyOffsetMap does; bounded, the rest is cleaned next time);
  2. rewrite the closed segments below the first uncleanable offset, in groups of at most
     `segment.bytes`, keeping a record only if no later record has its key. A batch whose records
     all stay is copied byte for byte; otherwise the kept records are written into a batch with
     the same base offset, last offset delta, producer id/epoch/base sequence, leader epoch and
     codec (recompressed), each record keeping its offset; its base timestamp is its first
     record's and its CRC32C is recomputed. Records without a key are dropped, as in Kafka.
     A batch left empty is dropped, unless it is the last batch of a producer the log still
     tracks (then its header stays, with no records, so sequence numbers survive: RETAIN_EMPTY).
     A group left empty is dropped, except the log's first segment, which stays (empty) so that
     cleaning never moves the log start offset: committed offsets in it stay valid;
  3. tombstones (null values) follow KIP-534: the first clean that keeps one stamps its batch
     with a delete horizon (now + `delete.retention.ms`, in the base timestamp, attribute bit
     0x40); a clean after that horizon drops them. The horizon lives in the batch, so a restart
     neither moves it nor forgets it: the first look at a log after start-up reads the earliest
     horizon of its cleaned section back (`recorded_delete_horizon`), so a log with nothing dirty
     is still cleaned once its tombstones are due;
  4. transactions (KIP-98, `cleaner_txn.TxnCleaning`): the first uncleanable offset is at most
     the last stable offset, so no undecided record is cleaned; records of aborted transactions
     (the aborted transaction indexes say which) are dropped and never map their key, so they
     cannot remove a committed record either. A marker stays while any batch of its transaction
     is left before it; once none is, the clean stamps it with a delete horizon as a tombstone's
     (now + `delete.retention.ms`), and a clean after the horizon removes it (Kafka's LogCleaner;
     a marker that is the last batch of a producer the log still tracks stays, for its epoch).
     The cleaned segment's aborted transaction index keeps the entries of ABORT markers that
     stay with data before them.

Each group's result is written beside the log as `<base>.log.cleaned` (+ indexes) by a thread,
fsynced, then swapped in on the event loop the way Kafka does it: `.cleaned` -> `.swap` (the
commit point), the old segments' files -> `.deleted`, the new files to their final names. A crash
leaves the old segments (a `.cleaned` is deleted at start-up) or the new one (a `.log.swap` is
completed at start-up, replacing every segment in its offset range, its indexes rebuilt by
recovery): `segment_swap.recover_interrupted_clean`. Readers holding a region of an old segment keep its file
open until they are done (`SegmentFile`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import os
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import crc32c

from broker.log import checkpoints
from broker.log.cleaner_settings import CleanerSettings
from broker.log.cleaner_txn import TxnCleaning
from broker.log.segment import Segment, SegmentFile, segment_name
from broker.log.segment_swap import READ_CHUNK, finish_swap, iter_batches, paths, remove_files
from broker.log.throttler import Throttler
from broker.log.transaction_index import AbortedTxn
from broker.protocol import compression, records
from broker.protocol.batch_records import RawRecord, decode_records
from broker.protocol.records import BatchHeader
from broker.protocol.varint import varint_bytes

if TYPE_CHECKING:
    from broker.log.log import Log

log = logging.getLogger(__name__)

CHECKPOINT = "cleaner-offset-checkpoint"
DELETE_HORIZON_FLAG = 0x40  # batch attribute bit 6: the base timestamp is a delete horizon (KIP-534)
MAX_MAP_ENTRIES = 1_000_000  # keys held in one offset map (Python's dict, ~150 bytes each)

_POST_CRC = struct.Struct(">hiqqqhii")  # attributes .. records count
_PRE_CRC = struct.Struct(">qiibI")  # base offset, batch length, leader epoch, magic, crc


class CleanerAborted(Exception):
    """The broker is stopping; a half-built `.cleaned` file is removed, the log is untouched."""


# -- rewriting one batch ------------------------------------------------------------------

def _batch(h: BatchHeader, attributes: int, base_timestamp: int, max_timestamp: int, count: int,
           body: bytes) -> bytes:
    post = _POST_CRC.pack(attributes, h.last_offset_delta, base_timestamp, max_timestamp, h.producer_id,
                          h.producer_epoch, h.base_sequence, count) + body
    return _PRE_CRC.pack(h.base_offset, len(post) + 9, h.partition_leader_epoch, 2, crc32c.crc32c(post)) + post


def encode_batch(h: BatchHeader, kept: list[RawRecord], base_timestamp: int, delete_horizon: bool) -> bytes:
    """The kept records in a batch shaped like `h` (offsets, producer fields, codec), with
    `base_timestamp` as its first timestamp (or delete horizon) and the CRC recomputed."""
    parts = []
    for r in kept:
        rec = bytes([r.attributes]) + varint_bytes(r.timestamp - base_timestamp) + r.tail
        parts.append(varint_bytes(len(rec)) + rec)
    body = compression.compress(h.attributes & records.ATTR_COMPRESSION_MASK, b"".join(parts))
    if h.attributes & records.ATTR_TIMESTAMP_TYPE:
        max_ts = h.max_timestamp
    else:
        max_ts = max(r.timestamp for r in kept)
    attributes = (h.attributes | DELETE_HORIZON_FLAG) if delete_horizon else (h.attributes & ~DELETE_HORIZON_FLAG)
    return _batch(h, attributes, base_timestamp, max_ts, len(kept), body)


def empty_batch(h: BatchHeader) -> bytes:
    """A header with no records, kept for a producer's sequence numbers (Kafka's writeEmptyHeader)."""
    attributes = h.attributes & ~(records.ATTR_COMPRESSION_MASK | DELETE_HORIZON_FLAG)
    return _batch(h, attributes, h.max_timestamp, h.max_timestamp, 0, b"")


# -- reading closed segments off the event loop ---------------------------------------------

@dataclass(frozen=True, slots=True)
class SegmentView:
    """A closed segment as the cleaner thread sees it: its own reference to the file (so a
    retention delete or a topic deletion cannot close it under the thread), its size, and the
    end of its offset range (the next segment's base offset)."""

    segment: Segment
    file: SegmentFile
    base_offset: int
    size: int
    next_base: int


class OffsetMap:
    """Key -> offset of its last record in the dirty section. Keys are MD5 digests, as in
    Kafka's SkimpyOffsetMap; `capacity` bounds memory, and what does not fit waits."""

    def __init__(self, capacity: int = MAX_MAP_ENTRIES) -> None:
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[self.digest(key)] = offset

    def get(self, key: bytes) -> int | None:
        return self._offsets.get(self.digest(key))

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.capacity


# -- one cleaning ---------------------------------------------------------------------------

@dataclass
class CleanJob:
    """What the event loop hands the cleaner thread about one log: taken at one instant, never
    changed by appends (they go to the active segment, which is not part of it)."""

    topic_partition: tuple[str, int]
    log: "Log"
    directory: Path
    segments: list[SegmentView]  # closed segments below the first uncleanable offset
    first_dirty: int
    first_uncleanable: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_interval_bytes: int
    producer_last_offsets: dict[int, int]  # producer id -> offset of its last batch
    aborted: list[AbortedTxn] = field(default_factory=list)  # of every segment's index
    producer_epochs_without_data: dict[int, int] = field(default_factory=dict)  # id -> epoch
    txn: TxnCleaning = field(init=False)

    def __post_init__(self) -> None:
        self.txn = TxnCleaning(self.aborted)

    def is_aborted(self, h: BatchHeader) -> bool:
        """A data batch of a transaction that was aborted (its records are dropped)."""
        return self.txn.is_aborted(h)

    def marker_holds_epoch(self, h: BatchHeader) -> bool:
        """The marker is all the log has left of a producer it still tracks (Kafka keeps it for
        the producer's epoch)."""
        return self.producer_epochs_without_data.get(h.producer_id) == h.producer_epoch


@dataclass
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    batches_rewritten: int = 0
    groups: int = 0
    delete_horizon: int | None = None  # earliest horizon of tombstones still kept


@dataclass
class Cleaned:
    """A group's result before the swap: the `.cleaned` segment, or None if nothing is left."""

    base_offset: int
    segment: Segment | None
    txn_entries: list[AbortedTxn] = field(default_factory=list)  # its aborted transaction index


class Cleaner:
    """The work of one cleaning (Kafka's Cleaner); runs in a thread, touches only its job."""

    def __init__(self, stop: threading.Event | None = None, map_capacity: int = MAX_MAP_ENTRIES,
                 read_chunk: int = READ_CHUNK, write_buffer: int = READ_CHUNK,
                 throttler: Throttler | None = None) -> None:
        self.stop = stop or threading.Event()
        self.map_capacity = map_capacity
        self.read_chunk = read_chunk  # log.cleaner.io.buffer.size, per worker, as Kafka's read buffer
        self.write_buffer = write_buffer  # kept batches are written in pieces of about this size
        self.throttler = throttler  # log.cleaner.io.max.bytes.per.second, shared by the workers

    def _io(self, n: int) -> None:
        if self.throttler is not None:
            self.throttler.maybe_throttle(n)

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise CleanerAborted("the cleaner is stopping")

    def build_offset_map(self, job: CleanJob, stats: CleanStats) -> tuple[OffsetMap, int]:
        """Map the dirty section; returns the map and the offset it covers up to (exclusive)."""
        offset_map = OffsetMap(self.map_capacity)
        end = job.first_dirty
        for view in job.segments:
            if view.next_base <= job.first_dirty:
                continue
            if offset_map.full:
                break
            for h, data in iter_batches(view.file, view.size, self.read_chunk):
                self._check_stop()
                self._io(len(data))
                if h.is_control or h.last_offset < job.first_dirty or job.is_aborted(h):
                    continue
                try:
                    recs = decode_records(data, h)
                except records.InvalidRecordError as e:
                    log.warning("%s-%d: cleaner skips an unreadable batch at offset %d: %s",
                                *job.topic_partition, h.base_offset, e)
                    continue
                for r in recs:
                    if r.key is not None and r.offset >= job.first_dirty:
                        offset_map.put(r.key, r.offset)
            end = view.next_base
        return offset_map, end

    def clean_group(self, job: CleanJob, group: list[SegmentView], offset_map: OffsetMap,
                    stats: CleanStats) -> Cleaned:
        """Write the kept batches of `group` into `<base>.log.cleaned` (+ indexes), fsynced."""
        base = group[0].base_offset
        remove_files(job.directory, base, ".cleaned")
        seg = Segment(job.directory, base, job.index_interval_bytes, suffix=".cleaned")
        index_from = len(job.txn.kept_index)
        pending: list[bytes] = []
        pending_bytes = 0

        def write() -> None:
            nonlocal pending_bytes
            seg.append(b"".join(pending), [records.read_header(b) for b in pending])
            self._io(pending_bytes)
            pending.clear()
            pending_bytes = 0

        try:
            for view in group:
                stats.bytes_read += view.size
                for h, data in iter_batches(view.file, view.size, self.read_chunk):
                    self._check_stop()
                    self._io(len(data))
                    out = self.filter_batch(job, h, data, offset_map, stats)
                    if out is None:
                        continue
                    pending.append(out)
                    pending_bytes += len(out)
                    if pending_bytes >= self.write_buffer:
                        write()
            if pending:
                write()
            if seg.size == 0 and group[0] is not job.segments[0]:
                seg.delete()
                return Cleaned(base, None)  # dropped: a read of these offsets finds the next batch
            seg.seal()
            seg.flush()
            seg.close()
            stats.bytes_written += seg.size
            stats.groups += 1
            return Cleaned(base, seg, job.txn.kept_index[index_from:])
        except BaseException:
            seg.delete()
            raise

    def filter_batch(self, job: CleanJob, h: BatchHeader, data: bytes, offset_map: OffsetMap,
                     stats: CleanStats) -> bytes | None:
        """The batch as it stays in the log: unchanged, rewritten with fewer records, an empty
        header (a producer's last batch), or None (dropped)."""
        if h.is_control:
            return self.filter_marker(job, h, data, stats)
        if job.txn.on_data(h):
            stats.records_read += h.records_count
            stats.batches_rewritten += 1
            if job.producer_last_offsets.get(h.producer_id) == h.last_offset:
                return empty_batch(h)
            return None
        try:
            recs = decode_records(data, h)
        except records.InvalidRecordError as e:
            log.warning("%s-%d: cleaner keeps an unreadable batch at offset %d as it is: %s",
                        *job.topic_partition, h.base_offset, e)
            return data
        has_horizon = bool(h.attributes & DELETE_HORIZON_FLAG)
        horizon_passed = has_horizon and job.now_ms >= h.base_timestamp
        kept = []
        for r in recs:
            if r.key is None:
                continue  # a compacted log cannot hold keyless records (Kafka drops them too)
            latest = offset_map.get(r.key)
            if latest is not None and r.offset < latest:
                continue  # a later record has this key
            if r.is_tombstone and horizon_passed:
                continue  # the tombstone outlived delete.retention.ms
            kept.append(r)
        stats.records_read += len(recs)
        stats.records_kept += len(kept)
        needs_horizon = not has_horizon and any(r.is_tombstone for r in kept)
        if any(r.is_tombstone for r in kept):
            horizon = job.now_ms + job.delete_retention_ms if needs_horizon else h.base_timestamp
            stats.delete_horizon = horizon if stats.delete_horizon is None else min(stats.delete_horizon, horizon)
        if len(kept) == len(recs) and not needs_horizon:
            return data
        stats.batches_rewritten += 1
        if not kept:
            if h.has_producer_id and job.producer_last_offsets.get(h.producer_id) == h.last_offset:
                return empty_batch(h)
            return None
        if needs_horizon:
            base_ts = job.now_ms + job.delete_retention_ms
        elif has_horizon:
            base_ts = h.base_timestamp
        else:
            base_ts = kept[0].timestamp
        return encode_batch(h, kept, base_ts, has_horizon or needs_horizon)


    @staticmethod
    def filter_marker(job: CleanJob, h: BatchHeader, data: bytes, stats: CleanStats) -> bytes | None:
        """A control batch as it stays: unchanged while its transaction has batches left, then
        stamped with a delete horizon, then (after the horizon) removed."""
        if not job.txn.on_marker(h, data):
            return data
        has_horizon = bool(h.attributes & DELETE_HORIZON_FLAG)
        if job.marker_holds_epoch(h):
            return data
        if h.records_count == 0 or (has_horizon and job.now_ms >= h.base_timestamp):
            stats.batches_rewritten += 1
            return None
        horizon = h.base_timestamp if has_horizon else job.now_ms + job.delete_retention_ms
        stats.delete_horizon = horizon if stats.delete_horizon is None else min(stats.delete_horizon, horizon)
        if has_horizon:
            return data
        stats.batches_rewritten += 1
        return encode_batch(h, decode_records(data, h), horizon, True)


def group_by_size(views: list[SegmentView], max_bytes: int) -> list[list[SegmentView]]:
    """Consecutive segments merged while their sizes fit in one segment and their offsets in
    the index's 32-bit relative offsets (Kafka's groupSegmentsBySize)."""
    groups: list[list[SegmentView]] = []
    i = 0
    while i < len(views):
        group = [views[i]]
        size = views[i].size
        i += 1
        while (i < len(views) and size + views[i].size <= max_bytes
               and views[i].next_base - 1 - group[0].base_offset <= 2**31 - 1):
            size += views[i].size
            group.append(views[i])
            i += 1
        groups.append(group)
    return groups


# -- the swap ---------------------------------------------------------------------------------

def swap_in(job: CleanJob, group: list[SegmentView], cleaned: Cleaned) -> bool:
    """Replace `group` in the log by the cleaned segment (event loop: renames and list surgery
    only). False, with the cleaned files removed, if the log changed under the cleaner (the
    segments were deleted by retention or the partition closed)."""
    lg = job.log
    old = [v.segment for v in group]
    try:
        i = next(i for i, s in enumerate(lg.segments) if s is old[0])
    except StopIteration:
        i = -1
    intact = (i >= 0 and i + len(old) < len(lg.segments)
              and all(a is b for a, b in zip(lg.segments[i:i + len(old)], old))
              and all(s.file is not None for s in old))
    if not intact:
        if cleaned.segment is not None:
            remove_files(job.directory, cleaned.base_offset, ".cleaned")
        return False
    d = job.directory
    base = cleaned.base_offset
    new = None
    if cleaned.segment is not None:
        os.rename(d / (segment_name(base, ".log") + ".cleaned"), d / (segment_name(base, ".log") + ".swap"))
    for seg in old:
        seg.close()
        seg.txn_index.delete()
        for p in paths(d, seg.base_offset):
            try:
                os.rename(p, p.with_name(p.name + ".deleted"))
            except FileNotFoundError:
                pass
    if cleaned.segment is not None:
        for suffix in (".index", ".timeindex"):
            src = d / (segment_name(base, suffix) + ".cleaned")
            if src.exists():
                os.rename(src, d / segment_name(base, suffix))
        os.rename(d / (segment_name(base, ".log") + ".swap"), d / segment_name(base, ".log"))
        new = Segment(d, base, job.index_interval_bytes)
        new.load_indexes()
        for t in cleaned.txn_entries:
            new.txn_index.append(t)
    lg.replace_segments(old, new)
    return True


# -- the manager: which log, when, and the checkpoint ---------------------------------------

def recorded_delete_horizon(views: list["SegmentView"]) -> int | None:
    """The earliest delete horizon stamped in these segments' batches (KIP-534), or None: what
    a cleaner that has just started knows of the tombstones earlier cleans kept."""
    earliest = None
    for v in views:
        for h, _ in iter_batches(v.file, v.size):
            if h.attributes & DELETE_HORIZON_FLAG and (earliest is None or h.base_timestamp < earliest):
                earliest = h.base_timestamp
    return earliest


class LogCleaner:
    """Chooses the filthiest compacted log and cleans it (Kafka's LogCleaner and
    LogCleanerManager), in `settings.threads` background workers (asyncio tasks) whose reading and
    writing run in threads; two workers never clean the same log. `reconfigure` applies the
    dynamic cleaner keys (cleaner_settings.py) while running."""

    def __init__(self, log_dirs: list[Path], logs: Callable[[], dict[tuple[str, int], "Log"]],
                 backoff_ms: int | None = None, map_capacity: int | None = None,
                 paused: Callable[[tuple[str, int]], bool] = lambda tp: False,
                 settings: CleanerSettings | None = None) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.logs = logs
        # Logs not to start cleaning now (Kafka's paused cleaning: a replica moving between log dirs).
        self.paused = paused
        settings = settings or CleanerSettings()
        if backoff_ms is not None:
            settings = dataclasses.replace(settings, backoff_ms=backoff_ms)
        self.settings = settings
        self._map_capacity = map_capacity  # a fixed capacity (tests), else the settings'
        self.stop_event = threading.Event()
        self.throttler = Throttler(settings.io_max_bytes_per_second, self.stop_event)
        self.cleaner = self._new_cleaner()
        self.first_dirty: dict[tuple[str, int], int] = {}
        self.delete_horizons: dict[tuple[str, int], int] = {}
        self._horizons_read: set[tuple[str, int]] = set()  # logs whose stamped horizons were read back
        self.in_progress: set[tuple[str, int]] = set()  # logs a worker is cleaning now
        self._workers: dict[int, asyncio.Task] = {}
        self._changed: asyncio.Event | None = None  # set by reconfigure: workers wake, run() resizes
        self._checkpoint_lock = threading.Lock()
        self.cleanings = 0
        # Totals for /metrics (Kafka's LogCleaner metrics in spirit): bytes read and written,
        # and how long the last cleaning took.
        self.bytes_read = 0
        self.bytes_written = 0
        self.last_clean_seconds = 0.0
        for d in self.log_dirs:
            try:
                self.first_dirty.update(checkpoints.read_checkpoint(d / CHECKPOINT))
            except ValueError as e:
                log.warning("ignoring unreadable cleaner checkpoint: %s", e)

    @property
    def backoff_s(self) -> float:
        return self.settings.backoff_ms / 1000

    def _new_cleaner(self) -> Cleaner:
        """A Cleaner for one cleaning, sized by the settings in force when it starts."""
        s = self.settings
        return Cleaner(self.stop_event, self._map_capacity or s.map_capacity, s.read_chunk, s.write_buffer,
                       self.throttler)

    @property
    def workers(self) -> list[asyncio.Task]:
        return [t for t in self._workers.values() if not t.done()]

    @property
    def running(self) -> bool:
        return self._changed is not None

    def reconfigure(self, settings: CleanerSettings) -> None:
        """Apply new settings (checked by the caller: admin/cleaner_reconfiguration.py): the I/O rate at once, the
        backoff to sleeping workers at once, map and buffer sizes from each worker's next cleaning,
        and the worker count (extra workers finish their cleaning and stop; new ones start)."""
        if settings == self.settings:
            return
        log.info("log cleaner reconfigured: %s", settings)
        self.settings = settings
        self.throttler.set_rate(settings.io_max_bytes_per_second)
        if self._changed is not None:
            self._changed.set()

    # -- choosing ----------------------------------------------------------------------------
    def plan(self, tp: tuple[str, int], lg: "Log", now_ms: int) -> tuple[CleanJob, float] | None:
        """The job for `lg` and its dirty ratio if it is due for cleaning, else None."""
        cfg = lg.config
        if "compact" not in cfg.cleanup_policy.split(","):
            return None
        segs = lg.segments
        if len(segs) < 2:
            return None
        first_uncleanable = min(segs[-1].base_offset, lg.last_stable_offset)
        if cfg.min_compaction_lag_ms > 0:
            for s in segs[:-1]:
                if s.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
                    first_uncleanable = min(first_uncleanable, s.base_offset)
                    break
        views = []
        for i, s in enumerate(segs[:-1]):
            nxt = segs[i + 1].base_offset
            if nxt > first_uncleanable or s.file is None:
                break
            views.append(SegmentView(s, s.file, s.base_offset, s.size, nxt))
        if not views:
            return None
        first_dirty = self.first_dirty.get(tp, lg.log_start_offset)
        if first_dirty < lg.log_start_offset or first_dirty > first_uncleanable:
            first_dirty = lg.log_start_offset
        clean_bytes = sum(v.size for v in views if v.next_base <= first_dirty)
        dirty_views = [v for v in views if v.next_base > first_dirty]
        dirty_bytes = sum(v.size for v in dirty_views)
        total = clean_bytes + dirty_bytes
        ratio = dirty_bytes / total if total else 0.0
        due = ratio > cfg.min_cleanable_dirty_ratio and dirty_bytes > 0
        if not due and dirty_bytes > 0 and cfg.max_compaction_lag_ms < 2**63 - 1:
            first = next(iter_batches(dirty_views[0].file, dirty_views[0].size), None)
            due = first is not None and first[0].max_timestamp >= 0 and \
                now_ms - first[0].base_timestamp > cfg.max_compaction_lag_ms
        if tp not in self._horizons_read:
            self._horizons_read.add(tp)
            recorded = recorded_delete_horizon([v for v in views if v.next_base <= first_dirty])
            if recorded is not None and tp not in self.delete_horizons:
                self.delete_horizons[tp] = recorded
        horizon = self.delete_horizons.get(tp)
        if not due and horizon is not None and horizon <= now_ms and total > 0:
            due = True
        if not due:
            return None
        producers = {pid: e.batches[-1].last_offset for pid, e in lg.producer_state.producers.items() if e.batches}
        without_data = {pid: e.epoch for pid, e in lg.producer_state.producers.items() if not e.batches}
        # a marker may lie past the cleaned range (below the LSO all are written)
        aborted = [t for seg in segs for t in seg.txn_index.entries]
        job = CleanJob(tp, lg, lg.directory, views, first_dirty, first_uncleanable, now_ms,
                       cfg.delete_retention_ms, cfg.segment_bytes, cfg.index_interval_bytes, producers, aborted,
                       without_data)
        return job, ratio

    def filthiest(self, now_ms: int) -> CleanJob | None:
        best = None
        for tp, lg in list(self.logs().items()):
            if self.paused(tp) or tp in self.in_progress:
                continue
            planned = self.plan(tp, lg, now_ms)
            if planned is not None and (best is None or planned[1] > best[1]):
                best = planned
        return best[0] if best else None

    # -- cleaning ----------------------------------------------------------------------------
    def clean(self, job: CleanJob) -> CleanStats:
        """Clean one log in the calling thread (tests; the loop uses `clean_async`)."""
        stats = CleanStats()
        started = time.monotonic()
        self.cleaner = self._new_cleaner()
        offset_map, end = self.cleaner.build_offset_map(job, stats)
        for group in group_by_size([v for v in job.segments if v.next_base <= end], job.segment_bytes):
            cleaned = self.cleaner.clean_group(job, group, offset_map, stats)
            if not swap_in(job, group, cleaned):
                return stats
            finish_swap(job.directory)
        self._done(job, end, stats, started)
        return stats

    async def clean_async(self, job: CleanJob) -> CleanStats:
        """Clean one log: mapping and writing in a thread, each swap on the event loop."""
        stats = CleanStats()
        started = time.monotonic()
        cleaner = self._new_cleaner()
        offset_map, end = await asyncio.to_thread(cleaner.build_offset_map, job, stats)
        for group in group_by_size([v for v in job.segments if v.next_base <= end], job.segment_bytes):
            cleaned = await asyncio.to_thread(cleaner.clean_group, job, group, offset_map, stats)
            if not swap_in(job, group, cleaned):
                log.info("%s-%d: log changed while being cleaned; cleaning again later", *job.topic_partition)
                return stats
            await asyncio.to_thread(finish_swap, job.directory)
        self._done(job, end, stats, started)
        await asyncio.to_thread(self._write_checkpoints, self._checkpoint_contents())
        return stats

    def _done(self, job: CleanJob, end: int, stats: CleanStats, started: float) -> None:
        tp = job.topic_partition
        self.first_dirty[tp] = end
        if stats.delete_horizon is not None:
            self.delete_horizons[tp] = stats.delete_horizon
        else:
            self.delete_horizons.pop(tp, None)
        self.cleanings += 1
        self.bytes_read += stats.bytes_read
        self.bytes_written += stats.bytes_written
        self.last_clean_seconds = time.monotonic() - started
        log.info("%s-%d: cleaned [%d, %d): %d of %d records kept, %d -> %d bytes in %d segments",
                 tp[0], tp[1], job.first_dirty, end, stats.records_kept, stats.records_read,
                 stats.bytes_read, stats.bytes_written, stats.groups)

    def clean_filthiest(self, now_ms: int | None = None) -> CleanStats | None:
        job = self.filthiest(int(time.time() * 1000) if now_ms is None else now_ms)
        return self.clean(job) if job is not None else None

    async def run(self) -> None:
        """Keep `settings.threads` workers running until cancelled (then the workers stop too)."""
        self._changed = asyncio.Event()
        try:
            while not self.stop_event.is_set():
                for i in range(self.settings.threads):
                    if i not in self._workers:
                        self._workers[i] = asyncio.create_task(self._worker(i), name=f"log-cleaner-{i}")
                await self._changed.wait()
                self._changed.clear()
        except asyncio.CancelledError:
            self.stop_event.set()
            workers = list(self._workers.values())
            for t in workers:
                t.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise

    async def _worker(self, worker_id: int) -> None:
        """Clean while some log is due; otherwise wait log.cleaner.backoff.ms (or until the settings
        change). Failures are logged and the loop goes on (a bad log must not stop cleaning of the
        others). A worker whose id the thread count no longer covers stops between cleanings."""
        try:
            while worker_id < self.settings.threads and not self.stop_event.is_set():
                job = None
                try:
                    job = self.filthiest(int(time.time() * 1000))
                    if job is not None:
                        self.in_progress.add(job.topic_partition)
                        try:
                            await self.clean_async(job)
                        finally:
                            self.in_progress.discard(job.topic_partition)
                except CleanerAborted:
                    return
                except Exception:
                    if job is not None and job.segments[0].segment.file is None:
                        # The partition was closed or deleted while being cleaned: nothing to do.
                        log.info("%s-%d: closed while being cleaned; cleaning abandoned", *job.topic_partition)
                    else:
                        log.exception("log cleaner failed%s", f" on {job.topic_partition}" if job else "")
                    job = None
                if job is None:
                    changed = self._changed
                    if changed is None:
                        await asyncio.sleep(self.backoff_s)
                    else:
                        try:
                            await asyncio.wait_for(changed.wait(), self.backoff_s)
                        except asyncio.TimeoutError:
                            pass
        finally:
            if self._workers.get(worker_id) is asyncio.current_task():
                del self._workers[worker_id]
            if self._changed is not None:
                self._changed.set()  # run() starts a worker again if the count still covers this id

    def truncated(self, tp: tuple[str, int], log_end_offset: int) -> None:
        """A follower's log was cut back to `log_end_offset`: what it appends from there is dirty,
        even below the old cleaned point (Kafka's maybeTruncateCheckpoint)."""
        if self.first_dirty.get(tp, -1) > log_end_offset:
            self.first_dirty[tp] = log_end_offset

    def forget(self, tp: tuple[str, int]) -> None:
        """A partition deleted here: its next log starts dirty."""
        self.first_dirty.pop(tp, None)
        self.delete_horizons.pop(tp, None)
        self._horizons_read.discard(tp)

    def _checkpoint_contents(self) -> dict[Path, dict[tuple[str, int], int]]:
        """Per log directory, how far each open log is cleaned (taken on the event loop)."""
        by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.log_dirs}
        for tp, lg in self.logs().items():
            if tp in self.first_dirty:
                by_dir.setdefault(lg.directory.parent, {})[tp] = self.first_dirty[tp]
        return by_dir

    def _write_checkpoints(self, by_dir: dict[Path, dict[tuple[str, int], int]]) -> None:
        with self._checkpoint_lock:  # two workers may finish at once
            for d, offsets in by_dir.items():
                if d.exists():
                    checkpoints.write_checkpoint(d / CHECKPOINT, offsets)

    def write_checkpoints(self) -> None:
        self._write_checkpoints(self._checkpoint_contents())

    def close(self) -> None:
        self.stop_event.set()
        try:
            self.write_checkpoints()
        except OSError as e:
            log.error("cannot write the cleaner checkpoint: %s", e)
