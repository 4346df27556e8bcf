"""Kafka RecordBatch v2 headers: read, validate and re-base batches without decoding records.

The produce path never looks inside a batch beyond its 61-byte header: it checks sizes and the
CRC32C (which covers attributes..end, so assigning a base offset keeps it valid), then writes
the client's bytes to the log with the offset field patched. Record-level decoding (for tests
and tools) is left to kio.records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LEN = struct.Struct(">qi")

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20


class InvalidRecordError(ValueError):
    """The bytes are not a well-formed v2 record batch (Kafka: INVALID_RECORD / CORRUPT_MESSAGE)."""


class CorruptRecordError(InvalidRecordError):
    """Sizes or CRC do not match (Kafka: CORRUPT_MESSAGE)."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed-size header of one record batch, as stored."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    def rebased(self, base_offset: int, partition_leader_epoch: int) -> "BatchHeader":
        """This header as written to the log (dataclasses.replace costs several times more)."""
        return BatchHeader(base_offset, self.batch_length, partition_leader_epoch, self.magic, self.crc,
                           self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
                           self.producer_id, self.producer_epoch, self.base_sequence, self.records_count)

    @property
    def size(self) -> int:
        """Bytes this batch takes in a log, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def read_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidRecordError("record batch shorter than its header")
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def peek_size(buf: bytes | memoryview, pos: int = 0) -> int | None:
    """Total size of the batch starting at `pos`, or None if fewer than 12 bytes remain."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    _, length = _LEN.unpack_from(buf, pos)
    return length + LOG_OVERHEAD


def validate_batches(payload: bytes, max_batch_bytes: int) -> list[BatchHeader]:
    """Split a Produce payload into batches, checking framing, magic and CRC.

    Raises CorruptRecordError for bad sizes/CRC and InvalidRecordError for other violations.
    A batch larger than `max_batch_bytes` raises RecordTooLargeError.
    """
    headers = []
    view = memoryview(payload)
    pos = 0
    end = len(payload)
    if end == 0:
        raise InvalidRecordError("empty record set")
    while pos < end:
        size = peek_size(view, pos)
        if size is None or size < HEADER_SIZE or pos + size > end:
            raise CorruptRecordError("record batch size does not match the bytes sent")
        if view[pos + MAGIC_OFFSET] != 2:
            raise InvalidRecordError(f"unsupported record batch magic {view[pos + MAGIC_OFFSET]}")
        h = read_header(view, pos)
        if size > max_batch_bytes:
            raise RecordTooLargeError(f"record batch of {size} bytes exceeds message.max.bytes {max_batch_bytes}")
        if crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != h.crc:
            raise CorruptRecordError("record batch CRC32C mismatch")
        if h.records_count <= 0 or h.last_offset_delta < 0 or h.records_count != h.last_offset_delta + 1:
            # Kafka requires dense offsets for v2 batches from producers.
            raise InvalidRecordError("record count does not match the batch's last offset delta")
        headers.append(h)
        pos += size
    return headers


class RecordTooLargeError(InvalidRecordError):
    """A batch exceeds message.max.bytes (Kafka: MESSAGE_TOO_LARGE)."""


def rebase(batch: bytearray, pos: int, base_offset: int) -> None:
    """Write `base_offset` into the batch at `pos`; the CRC does not cover this field."""
    struct.pack_into(">q", batch, pos, base_offset)


def set_leader_epoch(batch: bytearray, pos: int, epoch: int) -> None:
    struct.pack_into(">i", batch, pos + 12, epoch)


def set_log_append_time(batch: bytearray, pos: int, size: int, now_ms: int) -> None:
    """Stamp the batch at `pos` as LogAppendTime: attribute bit 3 and max timestamp = now, CRC
    recomputed (Kafka's setMaxTimestamp; records keep their own deltas, readers ignore them)."""
    (attributes,) = struct.unpack_from(">h", batch, pos + ATTRIBUTES_OFFSET)
    struct.pack_into(">h", batch, pos + ATTRIBUTES_OFFSET, attributes | ATTR_TIMESTAMP_TYPE)
    struct.pack_into(">q", batch, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    crc = crc32c.crc32c(memoryview(batch)[pos + ATTRIBUTES_OFFSET:pos + size])
    struct.pack_into(">I", batch, pos + CRC_OFFSET, crc)


def iter_headers(buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch in `buf[pos:end]`; stops at a torn tail."""
    end = len(buf) if end is None else end
    while pos < end:
        size = peek_size(buf, pos)
        if size is None or size < HEADER_SIZE or pos + size > end:
            return
        yield pos, read_header(buf, pos)
        pos += size


def whole_batches_size(buf: bytes | memoryview) -> int:
    """Bytes of the whole batches at the start of `buf`: a fetch response may end inside a batch
    (the leader stops at its size limit), and that partial batch is the fetcher's to drop."""
    pos = 0
    while True:
        size = peek_size(buf, pos)
        if size is None or size < LOG_OVERHEAD or pos + size > len(buf):
            return pos
        pos += size
