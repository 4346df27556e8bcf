"""The log of one partition: an ordered list of segments, offsets, flush, roll and retention.

Offsets the log tracks, as in Kafka:
  log_start_offset  first offset a consumer may read (advanced by retention and DeleteRecords, KIP-107)
  log_end_offset    offset the next appended record gets
  high_watermark    last offset + 1 that all in-sync replicas have (== LEO on a single broker)
  recovery_point    everything below it is known to be fsynced; recovery scans from here
"""

from __future__ import annotations

import asyncio
import bisect
import errno
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import crc32c

from broker.log.segment_swap import recover_interrupted_clean
from broker.log.durable import STORAGE_IO
from broker.log.leader_epoch import LeaderEpochCache
from broker.log.producer_state import CompletedTxn, ProducerStateManager, SequenceCheck
from broker.log.segment import FileRegion, Segment
from broker.log.stable_offset import StableOffsetTracker
from broker.log.transaction_index import AbortedTxn
from broker.protocol import batch_records, control_records, records
from broker.protocol.records import BatchHeader

log = logging.getLogger(__name__)


def _base_offset(seg: Segment) -> int:
    return seg.base_offset


@dataclass(frozen=True)
class LogConfig:
    """Topic-level settings (Kafka's topic config names in comments)."""

    segment_bytes: int = 1024**3  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms
    retention_bytes: int = -1  # retention.bytes
    flush_messages: int = 2**63 - 1  # flush.messages
    flush_ms: int | None = None  # flush.ms
    index_interval_bytes: int = 4096  # index.interval.bytes
    max_message_bytes: int = 1048588  # max.message.bytes
    cleanup_policy: str = "delete"  # cleanup.policy
    delete_retention_ms: int = 86_400_000  # delete.retention.ms (tombstones of compacted logs)
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = 2**63 - 1  # max.compaction.lag.ms
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    message_timestamp_before_max_ms: int = 2**63 - 1  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 2**63 - 1  # message.timestamp.after.max.ms
    min_insync_replicas: int = 1  # min.insync.replicas (checked by Produce with acks=all)
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms (a broker key)


def _follower_batches(payload: bytes) -> list[BatchHeader]:
    """Headers of the whole, valid v2 batches `payload` is made of (framing, magic, CRC), or
    CorruptRecordError. Unlike a producer's batches, a leader's may be sparse (compacted)."""
    view = memoryview(payload)
    headers = []
    pos = 0
    if not payload:
        raise records.InvalidRecordError("empty record set")
    while pos < len(payload):
        size = records.peek_size(view, pos)
        if size is None or size < records.HEADER_SIZE or pos + size > len(payload):
            raise records.CorruptRecordError(f"record batch at byte {pos} is torn or its size is invalid")
        h = records.read_header(view, pos)
        if h.magic != 2:
            raise records.InvalidRecordError(f"unsupported record batch magic {h.magic} at byte {pos}")
        if crc32c.crc32c(view[pos + records.ATTRIBUTES_OFFSET:pos + size]) != h.crc:
            raise records.CorruptRecordError(f"record batch at offset {h.base_offset}: CRC32C mismatch")
        headers.append(h)
        pos += size
    return headers


def _run_all(jobs) -> None:
    for job in jobs:
        job()


class LogError(Exception):
    """Base of errors a Produce or Fetch turns into a Kafka error code."""


class StorageError(LogError):
    """The disk refused a write (full, read-only, I/O error): KAFKA_STORAGE_ERROR."""


class LogDirOffline(StorageError):
    """A write to a partition whose log directory already failed (reported once, when it failed)."""


class OffsetOutOfRange(LogError):
    pass


class DuplicateSequence(LogError):
    def __init__(self, base_offset: int) -> None:
        super().__init__(f"duplicate batch, originally at offset {base_offset}")
        self.base_offset = base_offset


class OutOfOrderSequence(LogError):
    pass


class InvalidTimestamp(LogError):
    """A CreateTime record outside message.timestamp.before/after.max.ms of now: INVALID_TIMESTAMP."""


class KeylessRecord(LogError):
    """A record without a key for a compacted topic: INVALID_RECORD."""


class ProducerFenced(LogError):
    pass


class CoordinatorFenced(LogError):
    """A marker from an older coordinator epoch than the last one written: TRANSACTION_COORDINATOR_FENCED."""


class UnexpectedAppendOffset(LogError):
    """A follower was given batches starting below its log end (Kafka's UnexpectedAppendOffsetException)."""


class OffsetsOutOfOrder(LogError):
    """A follower was given batches whose offsets do not grow (Kafka's OffsetsOutOfOrderException)."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_start_offset: int
    duplicate: bool = False
    log_append_time: int = -1  # the broker's timestamp, with message.timestamp.type=LogAppendTime


class Log:
    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[Segment] = []
        self.log_start_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        self.producer_state = ProducerStateManager(directory)
        self.leader_epochs = LeaderEpochCache(directory)
        self.stable = StableOffsetTracker()
        self._unflushed_messages = 0
        self._first_unflushed_at: float | None = None
        self._flush_lock = asyncio.Lock()  # one flush at a time; recovery point moves in order
        self._background: set[asyncio.Task] = set()
        # Called with the exception when a background flush or snapshot fails (the replica
        # manager takes the log dir offline); logged only when unset.
        self.on_background_failure = None
        # Called with (offset, fully) after a truncation: a future log copying this one follows it
        # (log/future_log.py).
        self.truncation_listeners: list = []

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
    ) -> "Log":
        """Open a partition's log, recovering every segment not known to be on disk: those at
        or past the recovery point, and the active one unless the directory was shut down
        cleanly (then only its tail is checked)."""
        directory.mkdir(parents=True, exist_ok=True)
        self = cls(directory, topic, partition, config)
        for tmp in directory.glob("*.tmp"):
            tmp.unlink()
        swapped = recover_interrupted_clean(directory)
        bases = sorted(int(p.stem) for p in directory.glob("*.log") if p.stem.isdigit())
        recovered: list[Segment] = []
        for i, base in enumerate(bases):
            seg = Segment(directory, base, config.index_interval_bytes)
            self.segments.append(seg)
            is_last = i + 1 == len(bases)
            if is_last and clean_shutdown and base not in swapped:
                seg.load_indexes()
                if seg.tail_is_intact():
                    continue
                log.warning("%s-%d: %s changed after a clean shutdown; recovering it", topic, partition, seg.log_path.name)
            elif not is_last and bases[i + 1] <= recovery_point and base not in swapped:
                seg.load_indexes()  # wholly below the recovery point: known to be on disk
                continue
            cut = seg.recover()
            recovered.append(seg)
            if not cut:
                continue
            log.warning("%s-%d: truncated %d bytes of torn or corrupt data from %s at offset %d",
                        topic, partition, cut, seg.log_path.name, seg.next_offset)
            if not is_last:
                # As Kafka's log loader: everything after the first invalid batch is gone, so
                # later segments go too (keeping them would leave a hole in the offsets).
                for later in bases[i + 1:]:
                    Segment(directory, later, config.index_interval_bytes).delete()
                log.error("%s-%d: deleted %d later segments (offsets %d to %d) after corruption in %s; "
                          "the log now ends at offset %d", topic, partition, len(bases) - i - 1,
                          seg.next_offset, bases[-1], seg.log_path.name, seg.next_offset)
                break
        if not self.segments:
            self.segments.append(Segment(directory, log_start_offset, config.index_interval_bytes))
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        leo = self.log_end_offset
        self.recovery_point = min(recovery_point, leo)
        self.high_watermark = min(max(high_watermark, self.log_start_offset), leo)
        self._load_leader_epochs(recovered)
        self._rebuild_producer_state()
        return self

    def _load_leader_epochs(self, recovered: list[Segment]) -> None:
        """The leader-epoch-checkpoint, with the epochs of batches recovery scanned (written
        after the file was) added and entries past the log end dropped; rebuilt from every
        batch header if the file is missing or unreadable."""
        cache = LeaderEpochCache.load(self.directory)
        if cache is None:
            cache, recovered = LeaderEpochCache(self.directory), self.segments
        self.leader_epochs = cache
        if recovered:
            cache.truncate_from_end(recovered[0].base_offset)  # the scan below says what is there
        changed = False
        for seg in recovered:
            for _, h in seg.iter_headers():
                if h.partition_leader_epoch > cache.latest_epoch:
                    changed |= cache.assign(h.partition_leader_epoch, h.base_offset, flush=False)
        if changed:
            cache.flush()
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)

    def _rebuild_producer_state(self) -> None:
        """Producer state: the newest snapshot not past the log end, then the batches after it
        (headers; a marker's record too). The aborted transaction indexes are rebuilt for the
        same offsets: entries of markers at or past the snapshot are dropped and re-added."""
        now_ms = int(time.time() * 1000)
        snap = self.producer_state.load_snapshot(self.log_end_offset, now_ms, self.config.producer_id_expiration_ms)
        self.stable.clear()
        for seg in self.segments:
            if seg.next_offset <= snap:
                continue
            seg.txn_index.truncate_to(snap)
            for pos, h in seg.iter_headers(seg.offset_index.lookup(max(0, snap - seg.base_offset))):
                if h.last_offset < snap:
                    continue
                if h.is_control and h.has_producer_id:
                    try:
                        self._apply_marker(seg, h, os.pread(seg.fd, h.size, pos))
                    except records.InvalidRecordError as e:
                        log.warning("%s-%d: unreadable control batch at offset %d: %s", self.topic, self.partition,
                                    h.base_offset, e)
                else:
                    self.producer_state.record(h)
        self.remove_expired_producers(now_ms)

    def _apply_marker(self, seg: Segment, h: BatchHeader, batch: bytes | memoryview) -> CompletedTxn | None:
        """A COMMIT/ABORT marker in `seg` ends its producer's transaction: an aborted one gets an
        entry in the segment's aborted transaction index, with the LSO it leaves behind."""
        marker = control_records.read_marker(bytes(batch), h)
        if marker is None:
            return None
        completed = self.producer_state.complete_txn(h, not marker.commit, marker.coordinator_epoch)
        if completed.aborted:
            lso = self.stable.stable_after(completed, self.producer_state.ongoing)
            seg.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso))
        if completed.last_offset >= self.high_watermark:
            self.stable.completed(completed)
        return completed

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided and replicated (read_committed's limit)."""
        return self.stable.last_stable_offset(self.producer_state.ongoing, self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [fetch_offset, upper_bound): from the aborted
        indexes of the segment holding `fetch_offset` on (Kafka's collectAbortedTransactions)."""
        first = max(bisect.bisect_right(self.segments, fetch_offset, key=_base_offset) - 1, 0)
        out: list[AbortedTxn] = []
        for seg in self.segments[first:]:
            if seg.base_offset >= upper_bound:
                break
            out.extend(seg.txn_index.collect(fetch_offset, upper_bound))
        return out

    # -- offsets -----------------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # -- appending ---------------------------------------------------------------------------
    def append(self, payload: bytes, headers: list[BatchHeader], leader_epoch: int = 0,
               flush_if_due: bool = True, from_coordinator: bool = False) -> AppendResult:
        """Assign offsets to validated batches and write them; timestamps are checked (or set, with
        LogAppendTime) first, then idempotence, as Kafka's LogValidator and producer state do.
        With flush_if_due=False the caller flushes (flush_async) when flush_is_due() says so.
        A coordinator's own batches (TxnOffsetCommit's, Kafka's AppendOrigin.COORDINATOR) are
        checked for fencing only, not for sequence numbers."""
        now_ms = int(time.time() * 1000)
        log_append_time = self.config.message_timestamp_type == "LogAppendTime"
        if not log_append_time:
            self._validate_timestamps(payload, headers, now_ms)
        if "compact" in self.config.cleanup_policy:
            self._validate_keys(payload, headers)
        for h in headers:
            check = self.producer_state.check(h)
            if from_coordinator and check.outcome != SequenceCheck.FENCED:
                continue
            if check.outcome == SequenceCheck.DUPLICATE:
                assert check.duplicate is not None
                raise DuplicateSequence(check.duplicate.base_offset)
            if check.outcome == SequenceCheck.OUT_OF_ORDER:
                raise OutOfOrderSequence(check.message)
            if check.outcome == SequenceCheck.FENCED:
                raise ProducerFenced(check.message)
        buf = bytearray(payload)
        next_offset = self.log_end_offset
        assigned: list[BatchHeader] = []
        pos = 0
        for h in headers:
            records.rebase(buf, pos, next_offset)
            records.set_leader_epoch(buf, pos, leader_epoch)
            if log_append_time:
                records.set_log_append_time(buf, pos, h.size, now_ms)
                h = records.read_header(buf, pos)
            assigned.append(h.rebased(next_offset, leader_epoch))
            next_offset += h.last_offset_delta + 1
            pos += h.size
        self._maybe_roll(len(buf), next_offset)
        self._assign_epoch(leader_epoch, assigned[0].base_offset)
        self._write(buf, assigned, flush_if_due)
        return AppendResult(assigned[0].base_offset, assigned[-1].last_offset, self.log_start_offset,
                            log_append_time=now_ms if log_append_time else -1)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      leader_epoch: int = 0, flush_if_due: bool = True) -> AppendResult:
        """Write a COMMIT/ABORT control batch for `producer_id` (WriteTxnMarkers), after the checks
        Kafka makes of a coordinator's marker: an older producer epoch raises ProducerFenced, an
        older coordinator epoch CoordinatorFenced."""
        check = self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if check.outcome == SequenceCheck.FENCED:
            raise ProducerFenced(check.message)
        if check.outcome == SequenceCheck.COORDINATOR_FENCED:
            raise CoordinatorFenced(check.message)
        now_ms = int(time.time() * 1000)
        buf = bytearray(control_records.marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms))
        offset = self.log_end_offset
        records.rebase(buf, 0, offset)
        records.set_leader_epoch(buf, 0, leader_epoch)
        h = records.read_header(buf, 0)
        self._maybe_roll(len(buf), offset + 1)
        self._assign_epoch(leader_epoch, offset)
        self._write(buf, [h], flush_if_due)
        return AppendResult(offset, offset, self.log_start_offset)

    def append_as_follower(self, payload: bytes, flush_if_due: bool = True) -> AppendResult:
        """Write batches fetched from the leader as they are: the leader's offsets, epochs,
        timestamps and CRCs stay byte for byte (Kafka's appendAsFollower; nothing is assigned or
        re-stamped). Every batch's framing, magic and CRC is checked; the first must start at or
        past the log end (past it when the leader's log was compacted there) and offsets must
        grow. Producer state and leader epochs follow the batches. The high watermark is not
        moved: a follower learns it from the leader."""
        headers = _follower_batches(payload)
        if headers[0].base_offset < self.log_end_offset:
            raise UnexpectedAppendOffset(
                f"{self.topic}-{self.partition}: batch at offset {headers[0].base_offset} is below the log end "
                f"offset {self.log_end_offset}")
        prev = self.log_end_offset - 1
        for h in headers:
            if h.base_offset <= prev or h.last_offset < h.base_offset:
                raise OffsetsOutOfOrder(f"{self.topic}-{self.partition}: batch offsets {h.base_offset}.."
                                        f"{h.last_offset} follow offset {prev}")
            prev = h.last_offset
        self._maybe_roll(len(payload), prev + 1)
        for h in headers:
            if h.partition_leader_epoch >= 0 and h.partition_leader_epoch != self.leader_epochs.latest_epoch:
                self._assign_epoch(h.partition_leader_epoch, h.base_offset)
        self._write(payload, headers, flush_if_due)
        return AppendResult(headers[0].base_offset, headers[-1].last_offset, self.log_start_offset)

    def _write(self, buf: bytes, headers: list[BatchHeader], flush_if_due: bool) -> None:
        """Append batches whose offsets are settled (by the leader's append or the leader's log),
        record their producers, and flush if the flush policy says so."""
        try:
            self.active.append(buf, headers)
        except OSError as e:
            raise StorageError(f"{self.topic}-{self.partition}: write failed: {os.strerror(e.errno or errno.EIO)}") from e
        pos = 0
        for h in headers:
            if h.is_control and h.has_producer_id:
                try:
                    self._apply_marker(self.active, h, memoryview(buf)[pos:pos + h.size])
                except (records.InvalidRecordError, ValueError) as e:
                    log.warning("%s-%d: control batch at offset %d not applied: %s", self.topic, self.partition,
                                h.base_offset, e)
            else:
                self.producer_state.record(h)
            pos += h.size
        self._unflushed_messages += sum(h.records_count for h in headers)
        if self._first_unflushed_at is None:
            self._first_unflushed_at = time.monotonic()
        try:
            if flush_if_due:
                self.maybe_flush()
        except OSError as e:
            raise StorageError(f"{self.topic}-{self.partition}: flush failed: {os.strerror(e.errno or errno.EIO)}") from e

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        if epoch >= 0:
            try:
                self.leader_epochs.assign(epoch, start_offset)
            except OSError as e:
                raise StorageError(f"{self.topic}-{self.partition}: leader epoch checkpoint write failed: "
                                   f"{os.strerror(e.errno or errno.EIO)}") from e

    def assign_epoch_start(self, epoch: int) -> None:
        """This broker leads from `epoch` on: the epoch starts at the log end, even before a batch
        of it is written (Kafka's maybeAssignEpochStartOffset when a replica becomes leader).
        An epoch older than the latest one recorded is refused with a warning: epochs only grow,
        and assigning it would drop every later entry."""
        if epoch < self.leader_epochs.latest_epoch:
            log.warning("%s-%d: leader epoch %d is older than the latest recorded, %d; not recorded",
                        self.topic, self.partition, epoch, self.leader_epochs.latest_epoch)
            return
        self._assign_epoch(epoch, self.log_end_offset)

    def _validate_keys(self, payload: bytes, headers: list[BatchHeader]) -> None:
        """A compacted log keeps the latest record per key, so every record needs one (Kafka's
        LogValidator refuses the batch: INVALID_RECORD). This decodes (decompresses) the batch."""
        pos = 0
        for h in headers:
            if not h.is_control:
                for r in batch_records.decode_records(payload[pos:pos + h.size], h):
                    if r.key is None:
                        raise KeylessRecord(f"compacted topic {self.topic} cannot accept a record without a key "
                                            f"(offset delta {r.offset - h.base_offset} of a batch)")
            pos += h.size

    def _validate_timestamps(self, payload: bytes, headers: list[BatchHeader], now_ms: int) -> None:
        """message.timestamp.after.max.ms from each batch's max timestamp (its largest); before.max.ms
        from its records' timestamps, decoded only when the setting is not the unlimited default."""
        after, before = self.config.message_timestamp_after_max_ms, self.config.message_timestamp_before_max_ms
        pos = 0
        for h in headers:
            if h.max_timestamp - now_ms > after:
                raise InvalidTimestamp(f"timestamp {h.max_timestamp} of a record is more than {after} ms after "
                                       f"the broker's time {now_ms} (message.timestamp.after.max.ms)")
            if before < 2**63 - 1:
                oldest = h.base_timestamp
                try:
                    oldest = min(ts for _, ts in batch_records.record_timestamps(payload[pos:pos + h.size]))
                except (records.InvalidRecordError, ValueError):
                    pass
                if now_ms - oldest > before:
                    raise InvalidTimestamp(f"timestamp {oldest} of a record is more than {before} ms before the "
                                           f"broker's time {now_ms} (message.timestamp.before.max.ms)")
            pos += h.size

    def _maybe_roll(self, incoming: int, next_offset: int) -> None:
        seg = self.active
        if seg.size == 0:
            return
        too_big = seg.size + incoming > self.config.segment_bytes
        too_old = seg.age_seconds * 1000 >= self.config.segment_ms
        offsets_overflow = next_offset - seg.base_offset > 2**31 - 1
        if too_big or too_old or offsets_overflow:
            self.roll()

    def roll(self) -> None:
        """Start a new active segment at the log end. The old segment's fsync and the producer
        snapshot are written in the storage threads when an event loop runs (Kafka schedules
        the same flush asynchronously); without one (tools, tests) they are done here."""
        base = self.log_end_offset
        try:
            new = Segment(self.directory, base, self.config.index_interval_bytes)
        except OSError as e:
            raise StorageError(f"{self.topic}-{self.partition}: cannot roll segment: {e.strerror}") from e
        try:
            self.active.seal()
        except OSError as e:
            new.delete()
            raise StorageError(f"{self.topic}-{self.partition}: cannot roll segment: {e.strerror}") from e
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            try:
                self.flush()
            except OSError as e:
                new.delete()
                raise StorageError(f"{self.topic}-{self.partition}: cannot roll segment: {e.strerror}") from e
            self.segments.append(new)
            try:
                self.producer_state.take_snapshot(base)
            except OSError as e:
                log.warning("%s-%d: producer snapshot failed: %s", self.topic, self.partition, e)
            return
        self.segments.append(new)
        snapshot = self.producer_state.snapshot_bytes(base)
        task = loop.create_task(self._after_roll(base, snapshot), name=f"roll-{self.topic}-{self.partition}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _after_roll(self, base: int, snapshot: bytes) -> None:
        try:
            await self.flush_async(upto=base)
            await asyncio.get_running_loop().run_in_executor(
                STORAGE_IO, self.producer_state.write_snapshot, base, snapshot)
        except OSError as e:
            if self.on_background_failure is not None:
                self.on_background_failure(e)
            else:
                log.error("%s-%d: flush after roll failed: %s", self.topic, self.partition, e)

    def flush_is_due(self) -> bool:
        """flush.messages or flush.ms say the unflushed data must be fsynced now."""
        due_count = self._unflushed_messages >= self.config.flush_messages
        due_time = (
            self.config.flush_ms is not None
            and self._first_unflushed_at is not None
            and (time.monotonic() - self._first_unflushed_at) * 1000 >= self.config.flush_ms
        )
        return due_count or due_time

    def maybe_flush(self) -> None:
        """fsync here if flush.messages or flush.ms say it is due."""
        if self.flush_is_due():
            self.flush()

    def flush(self) -> None:
        """fsync everything written so far and move the recovery point up to the log end
        (blocking: for shutdown and tools; a serving broker uses flush_async)."""
        for seg in self.segments:
            if seg.next_offset > self.recovery_point:  # holds data not yet known to be on disk
                seg.flush()
        epochs = self.leader_epochs.sync_job()
        if epochs is not None:
            epochs()
        self.recovery_point = self.log_end_offset
        self._unflushed_messages = 0
        self._first_unflushed_at = None

    async def flush_async(self, upto: int | None = None) -> None:
        """fsync, in the storage threads, every segment holding data below `upto` (default: the
        log end) past the recovery point; the recovery point moves once that is on disk. The
        event loop goes on serving meanwhile; an acknowledgement that needs the data durable
        awaits this. Raises OSError if the disk refused."""
        async with self._flush_lock:
            target = self.log_end_offset if upto is None else upto
            if target <= self.recovery_point:
                return
            if target == self.log_end_offset:
                self._unflushed_messages = 0
                self._first_unflushed_at = None
            jobs = [seg.flush_job() for seg in self.segments
                    if seg.next_offset > self.recovery_point and seg.base_offset < target]
            epochs = self.leader_epochs.sync_job()
            if epochs is not None:
                jobs.insert(0, epochs)
            await asyncio.get_running_loop().run_in_executor(STORAGE_IO, _run_all, jobs)
            self.recovery_point = max(self.recovery_point, target)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget idempotent producers idle past producer.id.expiration.ms (see ProducerStateManager)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return self.producer_state.remove_expired(now_ms, self.config.producer_id_expiration_ms)

    # -- reading -----------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, upper_bound: int, min_one: bool = True) -> FileRegion | None:
        """Batches from `offset` (inclusive) below `upper_bound` (e.g. the high watermark)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}] of {self.topic}-{self.partition}")
        if offset >= upper_bound:
            return None
        first = bisect.bisect_right(self.segments, offset, key=_base_offset) - 1
        for i in range(max(first, 0), len(self.segments)):
            seg = self.segments[i]
            max_position = None
            if upper_bound < seg.next_offset:
                found = seg.find_position(upper_bound)
                max_position = found[0] if found else None
            region = seg.read(offset, max_bytes, max_position, min_one)
            if region is not None:
                return region
            if upper_bound <= seg.next_offset:
                return None
        return None

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= `timestamp`, searched in
        the first segment whose largest timestamp reaches it, as Kafka does. Segments wholly below
        the log start offset (DeleteRecords, until the retention pass removes them) are passed over:
        their records are gone, and a later segment may hold the answer."""
        for seg in self.segments:
            if seg.max_timestamp < timestamp or seg.next_offset <= self.log_start_offset:
                continue
            return seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record holding the largest timestamp, or (-1, -1);
        segments wholly below the log start offset are gone already."""
        best = None
        for seg in self.segments:
            if seg.next_offset <= self.log_start_offset:
                continue
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        return best.max_timestamp_record() if best is not None else (-1, -1)

    # -- compaction ---------------------------------------------------------------------------
    def replace_segments(self, old: list[Segment], new: Segment | None) -> None:
        """The log cleaner's swap: `new` (or nothing, if no record was kept) takes the place of
        the consecutive closed segments `old`, whose files the cleaner has already moved away."""
        i = next(i for i, s in enumerate(self.segments) if s is old[0])
        self.segments[i:i + len(old)] = [new] if new is not None else []
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)

    # -- retention and deletion --------------------------------------------------------------
    def advance_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset forward to `offset` (KIP-107: DeleteRecords on a leader, a
        follower taking its leader's), as Kafka's maybeIncrementLogStartOffset: never back, never
        past the high watermark (OffsetOutOfRange). Records below it are unreadable at once; the
        segments wholly below it are deleted by the retention loop (`delete_segments_below_start`).
        Returns whether it moved."""
        if offset > self.high_watermark:
            raise OffsetOutOfRange(f"cannot move the log start offset of {self.topic}-{self.partition} to {offset}: "
                                   f"past the high watermark {self.high_watermark}")
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self.leader_epochs.truncate_from_start(offset)
        return True

    def delete_segments_below_start(self) -> int:
        """Delete the segments wholly below the log start offset (those whose next segment starts
        at or below it: Kafka's deleteLogStartOffsetBreachedSegments), whatever the cleanup policy;
        the segment holding the log start stays. Returns how many."""
        deleted = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= self.log_start_offset:
            self.segments.pop(0).delete()
            deleted += 1
        return deleted

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past retention.ms or beyond retention.bytes; return how many."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        deleted = 0
        cfg = self.config
        while len(self.segments) > 0:
            seg = self.segments[0]
            if (seg.size == 0 and seg is self.active) or seg.next_offset > self.high_watermark:
                break
            expired = cfg.retention_ms >= 0 and seg.max_timestamp >= 0 and now_ms - seg.max_timestamp > cfg.retention_ms
            expired = expired or (seg.size == 0 and seg is not self.active)  # left empty by the cleaner
            oversized = cfg.retention_bytes >= 0 and self.size_bytes - seg.size >= cfg.retention_bytes
            if not (expired or oversized):
                break
            if seg is self.active:
                self.roll()
            self.segments.pop(0)
            seg.delete()
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            deleted += 1
        if deleted:
            self.leader_epochs.truncate_from_start(self.log_start_offset)
        return deleted

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset at or past `offset`, as Kafka's Log.truncateTo does
        for a follower whose log diverged from its leader's: later segments are deleted, the one
        holding `offset` is cut at that batch's first byte, and the indexes, producer state and
        leader epochs follow; the high watermark and recovery point are clamped to the new end.
        A follower truncates to a batch boundary (an epoch's end offset); an `offset` inside a
        batch removes that whole batch, so the log then ends at the batch's base offset. An
        `offset` at or before the first segment's base empties the log, which then starts at
        `offset`. Returns whether anything was removed."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.topic}-{self.partition} to negative offset {offset}")
        if offset >= self.log_end_offset:
            self.leader_epochs.truncate_from_end(self.log_end_offset)
            return False
        try:
            if offset <= self.segments[0].base_offset:
                self._truncate_fully_and_start_at(offset)
            else:
                while self.segments[-1].base_offset > offset:
                    self.segments.pop().delete()
                self.active.truncate_to(offset)
                self.leader_epochs.truncate_from_end(self.log_end_offset)
                self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        except OSError as e:
            raise StorageError(f"{self.topic}-{self.partition}: truncation failed: {e.strerror}") from e
        end = self.log_end_offset
        self._rebuild_producer_state()
        self.high_watermark = min(self.high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)
        self._truncated(offset, False)
        return True

    def _truncated(self, offset: int, fully: bool) -> None:
        for listener in self.truncation_listeners:
            listener(offset, fully)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start it empty at `offset` (Kafka's truncateFullyAndStartAt): a
        follower whose log ends below its leader's log start (retention, DeleteRecords, or an empty
        volume) has nothing the leader still holds. Every segment goes, a new empty one starts at
        `offset`, and log start, high watermark and recovery point move there; producer state
        and leader epochs are cleared (they come back with the leader's batches)."""
        if offset < 0:
            raise ValueError(f"cannot start {self.topic}-{self.partition} at negative offset {offset}")
        try:
            self._truncate_fully_and_start_at(offset)
        except OSError as e:
            raise StorageError(f"{self.topic}-{self.partition}: truncation failed: {e.strerror}") from e
        self._rebuild_producer_state()
        self.high_watermark = offset
        self.recovery_point = offset
        self._unflushed_messages = 0
        self._first_unflushed_at = None
        self._truncated(offset, True)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for seg in self.segments:
            seg.delete()
        self.segments = [Segment(self.directory, offset, self.config.index_interval_bytes)]
        self.producer_state.delete_snapshots()
        self.leader_epochs.clear()
        self.log_start_offset = offset

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> bool:
        """Flush, snapshot producer state at the log end, and close files (clean shutdown).
        Returns False if the data could not all be made durable (then recovery runs next start)."""
        ok = True
        try:
            self.active.seal()
            self.flush()
            self.producer_state.take_snapshot(self.log_end_offset)
        except OSError as e:
            log.error("%s-%d: flush on close failed: %s", self.topic, self.partition, e)
            ok = False
        for seg in self.segments:
            seg.close()
        return ok

    def delete(self) -> None:
        for seg in self.segments:
            seg.delete()
        self.producer_state.delete_snapshots()
        self.segments.clear()
        for p in self.directory.iterdir():
            p.unlink(missing_ok=True)
        self.directory.rmdir()
