"""Transaction markers: the COMMIT/ABORT control batch a partition leader writes (KIP-98).

A marker is a v2 batch with the transactional and control attributes, the producer's id and
epoch, no sequence (-1), and one record whose key and value are Kafka's control record layout:

    key   = version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)
    value = version int16 (0) | coordinator_epoch int32

Only the WriteTxnMarkers handler builds one; logs read them back (producer state, recovery).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from broker.protocol import batch_records, records
from broker.protocol.varint import varint_bytes

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclass(frozen=True, slots=True)
class Marker:
    commit: bool
    coordinator_epoch: int


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp_ms: int) -> bytes:
    """One control batch at offset 0 (the log re-bases it), CRC set."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    body = (b"\x00" + varint_bytes(0) + varint_bytes(0) + varint_bytes(len(key)) + key
            + varint_bytes(len(value)) + value + varint_bytes(0))
    record = varint_bytes(len(body)) + body
    attributes = records.ATTR_TRANSACTIONAL | records.ATTR_CONTROL
    size = records.HEADER_SIZE + len(record)
    head = bytearray(_HEADER.pack(0, size - records.LOG_OVERHEAD, -1, 2, 0, attributes, 0, timestamp_ms,
                                  timestamp_ms, producer_id, producer_epoch, records.NO_SEQUENCE, 1))
    batch = head + record
    struct.pack_into(">I", batch, records.CRC_OFFSET, crc32c.crc32c(memoryview(batch)[records.ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def read_marker(batch: bytes, h: records.BatchHeader) -> Marker | None:
    """The COMMIT/ABORT marker a control batch holds, or None for another control type (Kafka
    ignores those in producer state). Raises InvalidRecordError if the batch is unreadable."""
    recs = batch_records.decode_records(batch, h)
    if not recs or recs[0].key is None or len(recs[0].key) < 4:
        raise records.InvalidRecordError(f"control batch at offset {h.base_offset} has no control record key")
    _, kind = _KEY.unpack_from(recs[0].key)
    if kind not in (ABORT, COMMIT):
        return None
    tail = recs[0].tail  # offset delta, key length, key, value length, value, headers
    _, p = batch_records._varint(tail, 0)
    key_len, p = batch_records._varint(tail, p)
    p += max(key_len, 0)
    value_len, p = batch_records._varint(tail, p)
    coordinator_epoch = -1
    if value_len >= _VALUE.size:
        _, coordinator_epoch = _VALUE.unpack_from(tail, p)
    return Marker(kind == COMMIT, coordinator_epoch)
