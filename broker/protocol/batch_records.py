"""The (offset, timestamp) of each record inside one RecordBatch v2, decompressing if needed.

The produce and fetch paths never look inside a batch. ListOffsets does, for one batch only:
a lookup by timestamp must answer with the first *record* at or after the time, and
MAX_TIMESTAMP with the record that holds the largest timestamp, which need not be a batch's
last. Only the fields in front of each record's key are read; keys, values and headers are
skipped by the record's length.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

import cramjam

from broker.protocol import records
from broker.protocol.records import BatchHeader

NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
_XERIAL_MAGIC = b"\x82SNAPPY\x00"  # snappy-java's stream framing (the Java client's snappy)
_I32 = struct.Struct(">i")


class BatchDecodeError(records.InvalidRecordError):
    """The records inside a batch cannot be read (bad varint, unknown codec, corrupt data)."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's signed varint/varlong) at `pos`: (value, next position)."""
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise BatchDecodeError("truncated or overlong varint inside a record")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _snappy(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = 16  # magic (8), version (4), compatible version (4)
    while pos < len(data):
        if pos + 4 > len(data):
            raise BatchDecodeError("truncated snappy block length")
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise BatchDecodeError("snappy block runs past the batch")
        out += bytes(cramjam.snappy.decompress_raw(data[pos:pos + n]))
        pos += n
    return bytes(out)


def _decompress(codec: int, data: bytes) -> bytes:
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise BatchDecodeError(f"cannot decompress records (codec {codec}): {e}") from e
    raise BatchDecodeError(f"unknown compression codec {codec}")


def record_timestamps(batch: bytes) -> Iterator[tuple[int, int]]:
    """Yield (offset, timestamp) of every record of one whole batch, in order.

    With LOG_APPEND_TIME every record's timestamp is the batch's max timestamp, as Kafka reads it.
    """
    h = records.read_header(batch)
    body = batch[records.HEADER_SIZE:h.size]
    codec = h.attributes & records.ATTR_COMPRESSION_MASK
    if codec != NO_COMPRESSION:
        body = _decompress(codec, body)
    log_append_time = bool(h.attributes & records.ATTR_TIMESTAMP_TYPE)
    pos = 0
    for _ in range(h.records_count):
        length, start = _varint(body, pos)
        end = start + length
        if length < 0 or end > len(body):
            raise BatchDecodeError("record length runs past the batch")
        pos = start + 1  # record attributes (int8, unused)
        ts_delta, pos = _varint(body, pos)
        offset_delta, pos = _varint(body, pos)
        if pos > end:
            raise BatchDecodeError("record shorter than its own fields")
        ts = h.max_timestamp if log_append_time else h.base_timestamp + ts_delta
        yield h.base_offset + offset_delta, ts
        pos = end


@dataclass(slots=True)
class RawRecord:
    """One record of a batch: what the log cleaner decides on, and the bytes it copies."""

    offset: int
    timestamp: int
    key: bytes | None
    is_tombstone: bool
    attributes: int
    tail: bytes  # from the offset delta to the end: unchanged when the batch is rewritten


def decode_records(batch: bytes, h: BatchHeader) -> list[RawRecord]:
    """Every record of one whole batch (decompressed). Raises InvalidRecordError if unreadable."""
    body = batch[records.HEADER_SIZE:h.size]
    codec = h.attributes & records.ATTR_COMPRESSION_MASK
    body = _decompress(codec, bytes(body)) if codec != NO_COMPRESSION else bytes(body)
    log_append_time = bool(h.attributes & records.ATTR_TIMESTAMP_TYPE)
    varint = _varint
    out = []
    pos = 0
    for _ in range(h.records_count):
        length, start = varint(body, pos)
        end = start + length
        if length < 1 or end > len(body):
            raise BatchDecodeError("record length runs past the batch")
        attributes = body[start]
        ts_delta, p = varint(body, start + 1)
        tail_start = p
        offset_delta, p = varint(body, p)
        key_len, p = varint(body, p)
        key = None if key_len < 0 else bytes(body[p:p + key_len])
        p += max(key_len, 0)
        value_len, p = varint(body, p)
        if p > end:
            raise BatchDecodeError("record shorter than its own fields")
        ts = h.max_timestamp if log_append_time else h.base_timestamp + ts_delta
        out.append(RawRecord(h.base_offset + offset_delta, ts, key, value_len < 0, attributes,
                             bytes(body[tail_start:end])))
        pos = end
    return out
