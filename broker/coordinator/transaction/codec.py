"""Keys and values of `__transaction_state` records, in Apache Kafka's TransactionLog layout.

Every key and value starts with an int16 schema version.

  key v0:    transactional_id string (int16 length)
  value v0:  producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
             status int8 (TxnState's value), partitions [topic string, [partition int32]]
             (nullable array: null while Empty), last_update_timestamp_ms int64,
             start_timestamp_ms int64                                        <- written
  value v1:  the same fields in the flexible encoding (compact arrays and strings, tagged
             fields: 0 previous producer id, 1 next producer id, 2 client transaction version)

Kafka writes v0 until transaction.version 2 is enabled, which this broker does not offer; v1 is
read so a log holding it loads. A tombstone (null value) removes the transactional id.
"""

from __future__ import annotations

import struct

from broker.coordinator.group import codec as group_codec
from broker.coordinator.transaction.state import NO_PRODUCER_ID, Transit, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class CodecError(ValueError):
    """A key or value of `__transaction_state` is not in a layout this broker reads."""


def _string(v: str) -> bytes:
    data = v.encode()
    if len(data) > 0x7FFF:
        raise CodecError(f"string of {len(data)} bytes is too long")
    return _I16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(t: Transit) -> bytes:
    parts = [_I16.pack(VALUE_VERSION), _I64.pack(t.producer_id), _I16.pack(t.producer_epoch),
             _I32.pack(t.timeout_ms), _I8.pack(t.state.value)]
    if t.state == TxnState.EMPTY:
        parts.append(_I32.pack(-1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(index)
        parts.append(_I32.pack(len(by_topic)))
        for topic, indexes in by_topic.items():
            parts.append(_string(topic))
            parts.append(_I32.pack(len(indexes)))
            parts.extend(_I32.pack(i) for i in indexes)
    parts.append(_I64.pack(t.last_update_ms))
    parts.append(_I64.pack(t.start_ms))
    return b"".join(parts)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise CodecError("record ends early")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def i8(self) -> int:
        return self._take(_I8)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.buf) or shift > 28:
                raise CodecError("bad varint")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CodecError("record ends early")
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        return data

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise CodecError("null string")
        return self.raw(n).decode()

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise CodecError("null string")
        return self.raw(n).decode()

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise CodecError(f"{len(self.buf) - self.pos} bytes after the record")


def decode_key(buf: bytes) -> str:
    r = _Reader(buf)
    version = r.i16()
    if version != KEY_VERSION:
        raise CodecError(f"unknown key version {version}")
    tid = r.string()
    r.end()
    return tid


def decode_value(buf: bytes) -> Transit:
    r = _Reader(buf)
    version = r.i16()
    if version not in (0, 1):
        raise CodecError(f"unknown value version {version}")
    flexible = version >= 1
    producer_id, epoch, timeout_ms, status = r.i64(), r.i16(), r.i32(), r.i8()
    try:
        state = TxnState(status)
    except ValueError:
        raise CodecError(f"unknown transaction status {status}") from None
    partitions: set[tuple[str, int]] = set()
    count = r.uvarint() - 1 if flexible else r.i32()
    for _ in range(max(count, 0)):
        topic = r.compact_string() if flexible else r.string()
        n = r.uvarint() - 1 if flexible else r.i32()
        partitions.update((topic, r.i32()) for _ in range(max(n, 0)))
        if flexible:
            _skip_tags(r)
    last_update_ms, start_ms = r.i64(), r.i64()
    previous_producer_id = NO_PRODUCER_ID
    if flexible:
        for tag, data in _tags(r):
            if tag == 0 and len(data) == 8:
                (previous_producer_id,) = _I64.unpack(data)
    r.end()
    return Transit(producer_id=producer_id, last_producer_id=previous_producer_id, producer_epoch=epoch,
                   last_producer_epoch=-1, timeout_ms=timeout_ms, state=state, partitions=frozenset(partitions),
                   start_ms=start_ms, last_update_ms=last_update_ms)


def _tags(r: _Reader) -> list[tuple[int, bytes]]:
    out = []
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        out.append((tag, r.raw(r.uvarint())))
    return out


def _skip_tags(r: _Reader) -> None:
    _tags(r)


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(transactionalId.hashCode) % partitions (the group codec's hash)."""
    return group_codec.partition_for(transactional_id, num_partitions)
