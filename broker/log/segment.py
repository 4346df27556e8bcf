"""One log segment: a file of RecordBatch v2 bytes plus its offset and time indexes.

Files are named after the segment's base offset, as Kafka names them
(00000000000000000000.log / .index / .timeindex). The log file holds the client's batches
byte for byte, with broker-assigned base offsets, so fetches can sendfile() them unchanged.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path

import crc32c

from broker.log.durable import fsync_data, fsync_path
from broker.log.transaction_index import TransactionIndex
from broker.log.index import OffsetIndex, TimeIndex
from broker.protocol import batch_records, records
from broker.protocol.file_region import FileRegion  # noqa: F401 (what read() returns)
from broker.protocol.records import BatchHeader

log = logging.getLogger(__name__)

SCAN_BLOCK = 16384  # bytes read at a time when walking batch headers (a few index intervals)


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class SegmentFile:
    """An open segment file whose descriptor is closed only when nothing refers to it any more.

    The segment holds one reference and every FileRegion read from it another, so a fetch
    response still waiting to be sent keeps its file open (readable even once deleted): the
    descriptor number cannot be closed and reused for another topic's file under it. CPython's
    reference counting closes the descriptor as soon as the last holder lets go; no per-fetch
    system call is needed.
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class Segment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int, suffix: str = "") -> None:
        """`suffix` names files being built beside the live ones (the cleaner's `.cleaned`)."""
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / (segment_name(base_offset, ".log") + suffix)
        self.offset_index = OffsetIndex(directory / (segment_name(base_offset, ".index") + suffix))
        self.time_index = TimeIndex(directory / (segment_name(base_offset, ".timeindex") + suffix))
        self.txn_index = TransactionIndex(directory / (segment_name(base_offset, ".txnindex") + suffix))
        self.index_interval_bytes = index_interval_bytes
        self.file: SegmentFile | None = SegmentFile(os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644))
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.created_at = time.time()
        self._bytes_since_index = 0

    @property
    def fd(self) -> int:
        if self.file is None:
            raise OSError(errno.EBADF, f"{self.log_path} is closed")
        return self.file.fd

    # -- writing -----------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Append already re-based batches. On an OS error the file is cut back, nothing half-written stays."""
        position = self.size
        try:
            written = os.pwrite(self.fd, data, position)
            if written != len(data):
                raise OSError(28, "short write")
        except OSError:
            os.ftruncate(self.fd, position)
            raise
        for h in headers:
            self._index_batch(h, position)
            position += h.size
        self.size = position

    def _index_batch(self, h: BatchHeader, position: int) -> None:
        """Kafka's sparse indexing: one offset entry and one time entry (the largest timestamp so
        far and the offset holding it) per index.interval.bytes of log, not per batch."""
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.last_offset
        if self._bytes_since_index >= self.index_interval_bytes or position == 0:
            self.offset_index.append(h.base_offset - self.base_offset, position)
            self._index_max_timestamp()
            self._bytes_since_index = 0
        self._bytes_since_index += h.size
        self.next_offset = h.last_offset + 1

    def _index_max_timestamp(self) -> None:
        if self.max_timestamp >= 0:
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)

    def seal(self) -> None:
        """The segment stops being appended to (rolled, or the log closes): its time index gets
        the final largest timestamp, so reopening it knows its max without a scan (as Kafka's
        onBecomeInactiveSegment and close do)."""
        self._index_max_timestamp()

    def flush(self) -> None:
        fsync_data(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def flush_job(self):
        """A callable that fsyncs this segment from another thread: it holds its own reference
        to the log file (see SegmentFile) and reaches the indexes by name, so a segment deleted
        or closed meanwhile is harmless."""
        file, indexes = self.file, (self.offset_index.path, self.time_index.path, self.txn_index.path)

        def job() -> None:
            if file is not None:
                fsync_data(file.fd)
            for path in indexes:
                fsync_path(path)

        return job

    # -- reading -----------------------------------------------------------------------------
    def read_header_at(self, position: int) -> BatchHeader | None:
        buf = os.pread(self.fd, records.HEADER_SIZE, position)
        if len(buf) < records.HEADER_SIZE:
            return None
        h = records.read_header(buf)
        if h.size < records.HEADER_SIZE or position + h.size > self.size:
            return None  # torn or not a batch (only recovery may find such bytes)
        return h

    def iter_headers(self, position: int = 0):
        """(position, header) of each whole batch from `position` on. The file is read in blocks,
        not one system call per batch: a scan over small batches costs one pread per block."""
        end = self.size
        while position < end:
            buf = os.pread(self.fd, min(SCAN_BLOCK, end - position), position)
            pos = 0
            while pos + records.HEADER_SIZE <= len(buf):
                h = records.read_header(buf, pos)
                if h.batch_length < records.HEADER_SIZE - records.LOG_OVERHEAD or position + pos + h.size > end:
                    return  # corrupt or torn: recovery deals with it
                yield position + pos, h
                pos += h.size
            if pos == 0 and len(buf) < records.HEADER_SIZE:
                return
            position += pos

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset`: the offset
        index gives a position at most index.interval.bytes before it, the scan the rest."""
        start = self.offset_index.lookup(offset - self.base_offset)
        for position, h in self.iter_headers(start):
            if h.last_offset >= offset:
                return position, h
        return None

    def read(self, offset: int, max_bytes: int, max_position: int | None, min_one: bool) -> FileRegion | None:
        """The bytes from the batch holding `offset` on, up to `max_bytes`, as Kafka's
        LogSegment.read sends them: one byte range, no walk over the batches it holds. Its last
        batch may be cut short (clients drop a partial trailing batch); with `min_one` the first
        batch is sent whole even if larger than `max_bytes`. `max_position` (a batch boundary:
        where the high watermark's batch starts) bounds what is visible."""
        found = self.find_position(offset)
        if found is None:
            return None
        start, first = found
        end_limit = self.size if max_position is None else min(self.size, max_position)
        if start >= end_limit:
            return None
        length = min(end_limit - start, max(max_bytes, first.size) if min_one else max_bytes)
        if length <= 0:
            return None
        return FileRegion(self.file, start, length)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `start_offset` whose timestamp is
        >= `timestamp`. The time index gives where to start; batches are skipped by their max
        timestamp and only the batch that must hold the answer is decoded."""
        rel = self.time_index.lookup(timestamp)
        found = self.find_position(max(self.base_offset + rel, start_offset))
        if found is None:
            return None
        for position, h in self.iter_headers(found[0]):
            if h.max_timestamp >= timestamp and h.last_offset >= start_offset:
                hit = self._first_record(position, h, lambda off, ts: ts >= timestamp and off >= start_offset)
                if hit is not None:
                    return hit
        return None

    def max_timestamp_record(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record holding this segment's largest timestamp."""
        if self.max_timestamp < 0:
            return -1, -1
        found = self.find_position(self.offset_of_max_timestamp)
        if found is not None:
            for position, h in self.iter_headers(found[0]):
                if h.max_timestamp == self.max_timestamp:
                    hit = self._first_record(position, h, lambda off, ts: ts == self.max_timestamp)
                    if hit is not None:
                        return hit
                    break
        return self.offset_of_max_timestamp, self.max_timestamp

    def _first_record(self, position: int, h: BatchHeader, wanted) -> tuple[int, int] | None:
        """The first (offset, timestamp) of the batch at `position` that `wanted` accepts. A batch
        whose records cannot be read (its compressed body was never validated) answers at batch
        granularity, with a warning, rather than failing the request."""
        data = os.pread(self.fd, h.size, position)
        try:
            for off, ts in batch_records.record_timestamps(data):
                if wanted(off, ts):
                    return off, ts
            return None
        except records.InvalidRecordError as e:
            log.warning("%s: batch at offset %d: %s; answering with the batch's first offset",
                        self.log_path, h.base_offset, e)
            return (h.base_offset, h.max_timestamp) if wanted(h.last_offset, h.max_timestamp) else None

    # -- recovery ----------------------------------------------------------------------------
    def load_indexes(self) -> None:
        """Trust index files of a cleanly closed segment; recompute the in-memory summary."""
        self.offset_index.load()
        self.time_index.load()
        if self.offset_index.values and self.offset_index.values[-1] >= self.size:
            self.offset_index.truncate_to_position(self.size)
        last = None
        start = self.offset_index.values[-1] if self.offset_index.values else 0
        for _, h in self.iter_headers(start):
            last = h
        if last is not None:
            self.next_offset = last.last_offset + 1
        if self.time_index.keys:
            self.max_timestamp = self.time_index.keys[-1]
            self.offset_of_max_timestamp = self.base_offset + self.time_index.values[-1]
        self._bytes_since_index = self.index_interval_bytes  # index the next append

    def _valid_batch_at(self, position: int, expected_offset: int) -> BatchHeader | None:
        """The header of a whole batch at `position` with a good size, magic and CRC whose
        offsets do not go back, else None (a torn or corrupt batch)."""
        head = os.pread(self.fd, records.LOG_OVERHEAD, position)
        size = records.peek_size(head)
        if size is None or size < records.HEADER_SIZE or position + size > self.size:
            return None
        data = os.pread(self.fd, size, position)
        h = records.read_header(data)
        if h.magic != 2 or crc32c.crc32c(memoryview(data)[records.ATTRIBUTES_OFFSET:]) != h.crc:
            return None
        if h.base_offset < expected_offset:
            return None
        return h

    def tail_is_intact(self) -> bool:
        """After load_indexes of a cleanly closed segment: the batches after the last offset
        index entry (about index.interval.bytes) are whole and valid up to the end of the file,
        so nothing was appended or torn since. Cheap, unlike a full recover()."""
        position = self.offset_index.values[-1] if self.offset_index.values else 0
        expected = self.base_offset + (self.offset_index.keys[-1] if self.offset_index.keys else 0)
        while position < self.size:
            h = self._valid_batch_at(position, expected)
            if h is None:
                return False
            expected = h.last_offset + 1
            position += h.size
        return True

    def recover(self) -> int:
        """Validate every batch (size, magic, CRC), rebuild the indexes and cut a torn tail.

        Returns the number of bytes truncated.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.next_offset = self.base_offset
        self._bytes_since_index = 0
        position = 0
        file_size = self.size
        expected_offset = self.base_offset
        while position < file_size:
            h = self._valid_batch_at(position, expected_offset)
            if h is None:
                break
            self._index_batch(h, position)
            expected_offset = h.last_offset + 1
            position += h.size
        truncated = file_size - position
        if truncated:
            os.ftruncate(self.fd, position)
        self.size = position
        return truncated

    def truncate_to(self, offset: int) -> None:
        """Cut the file at the first byte of the batch holding `offset` (or of the first batch
        after it, in a gap a compacted log left): nothing at or past `offset` stays, as Kafka's
        LogSegment.truncateTo. The segment then ends at that batch's base offset, or at `offset`
        if it fell in a gap (used when replicas diverge)."""
        found = self.find_position(offset)
        if found is None:
            return
        position, h = found
        os.ftruncate(self.fd, position)
        self.size = position
        self.next_offset = max(self.base_offset, min(offset, h.base_offset))
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(self.next_offset - self.base_offset)
        self.txn_index.truncate_to(self.next_offset)
        self._bytes_since_index = self.index_interval_bytes  # index the next append
        self._rescan_max_timestamp()

    def _rescan_max_timestamp(self) -> None:
        """Largest timestamp after a truncation: the last time index entry, then the batches
        after it (the index is sparse, so it may lag behind the log)."""
        self.max_timestamp, self.offset_of_max_timestamp = -1, -1
        start = 0
        if self.time_index.keys:
            self.max_timestamp = self.time_index.keys[-1]
            self.offset_of_max_timestamp = self.base_offset + self.time_index.values[-1]
            start = self.offset_index.lookup(self.time_index.values[-1])
        for _, h in self.iter_headers(start):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def age_seconds(self) -> float:
        return time.time() - self.created_at

    def close(self) -> None:
        """Let go of the files; the log descriptor closes once no pending FileRegion holds it."""
        self.offset_index.close()
        self.time_index.close()
        self.file = None

    def delete(self) -> None:
        """Remove the files. A fetch response still sending from this segment keeps reading the
        unlinked file through its own reference (see SegmentFile)."""
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
