"""Hand-written FetchResponse encoder (v4-v18) that leaves record bytes in their files.

Fetch is the hot path: kio would need the records as Python bytes, copied out of the segment
files and into a buffer. This encoder instead emits a list of chunks, bytes for the framing
and FileRegions for record sets, which the connection sends with sendfile(). It writes
exactly what kio's FetchResponse writer writes for the same values (a unit test compares
them byte for byte); tagged fields are written only for KIP-951 (CurrentLeader, NodeEndpoints) when a partition is
led elsewhere.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field, replace

from broker.protocol.file_region import FileRegion
from broker.protocol.varint import uvarint_bytes

MIN_VERSION = 4
MAX_VERSION = 18  # v18 (KIP-1166) only adds a tagged field to the request
FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13

_i16 = struct.Struct(">h").pack
_i32 = struct.Struct(">i").pack
_i64 = struct.Struct(">q").pack


@dataclass(slots=True)
class PartitionResult:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None  # (producer_id, first_offset)
    preferred_read_replica: int = -1
    records: FileRegion | bytes | None = None
    # KIP-951 (tagged, v12+): (leader id, leader epoch) when the error is NOT_LEADER_OR_FOLLOWER
    current_leader: tuple[int, int] | None = None

    @property
    def records_size(self) -> int:
        if self.records is None:
            return 0
        return self.records.length if isinstance(self.records, FileRegion) else len(self.records)


@dataclass(frozen=True)
class NodeEndpoint:
    """A leader's address for the response's NodeEndpoints (KIP-951, tagged, v16+)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class TopicResult:
    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[PartitionResult] = field(default_factory=list)


class _Chunks:
    """Accumulates bytes, cutting at each file region."""

    def __init__(self) -> None:
        self.parts: list[bytes | FileRegion] = []
        self.buf = bytearray()  # the same object throughout: callers may append to it directly
        self.size = 0

    def write(self, b: bytes) -> None:
        self.buf += b

    def region(self, r: FileRegion) -> None:
        self._flush()
        self.parts.append(r)
        self.size += r.length

    def _flush(self) -> None:
        if self.buf:
            self.parts.append(bytes(self.buf))
            self.size += len(self.buf)
            self.buf.clear()

    def done(self) -> list[bytes | FileRegion]:
        self._flush()
        return self.parts


def encode_fetch_response(
    version: int,
    correlation_id: int,
    throttle_time_ms: int,
    error_code: int,
    session_id: int,
    topics: list[TopicResult],
    node_endpoints: list[NodeEndpoint] | tuple[NodeEndpoint, ...] = (),
) -> list[bytes | FileRegion]:
    """Frame a whole FetchResponse (size prefix and response header included) as chunks."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"FetchResponse v{version} is not supported by this encoder")
    flexible = version >= FIRST_FLEXIBLE
    out = _Chunks()

    def array_len(n: int | None) -> bytes:
        if flexible:
            return uvarint_bytes(0 if n is None else n + 1)
        return _i32(-1 if n is None else n)

    # Response header: correlation id, plus an empty tagged-field section when flexible.
    out.write(_i32(correlation_id))
    if flexible:
        out.write(b"\x00")
    out.write(_i32(throttle_time_ms))
    if version >= 7:
        out.write(_i16(error_code))
        out.write(_i32(session_id))
    out.write(array_len(len(topics)))
    buf = out.buf
    # A partition with no records, no aborted transactions, no preferred replica and no leader
    # hint (an idle partition of a full fetch: thousands per response) is one pack and one append.
    head = struct.Struct(">ihqqq" if version >= 5 else ">ihqq").pack
    # No records are written as empty records, never as null: Kafka's broker always sends
    # MemoryRecords.EMPTY (an error, nothing new), and librdkafka treats a null record set
    # (MessageSetSize -1) as a protocol error and stops fetching that partition.
    plain_tail = array_len(None) + (_i32(-1) if version >= 11 else b"") + array_len(0) + (b"\x00" if flexible else b"")
    for t in topics:
        if version >= FIRST_TOPIC_ID:
            out.write((t.topic_id or uuid.UUID(int=0)).bytes)
        else:
            name = (t.name or "").encode()
            out.write(uvarint_bytes(len(name) + 1) if flexible else _i16(len(name)))
            out.write(name)
        out.write(array_len(len(t.partitions)))
        for p in t.partitions:
            if version >= 5:
                buf += head(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset)
            else:
                buf += head(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            rec = p.records
            if ((rec is None or rec == b"") and p.aborted_transactions is None and p.preferred_read_replica == -1
                    and p.current_leader is None and not isinstance(rec, FileRegion)):
                buf += plain_tail
                continue
            aborted = p.aborted_transactions
            out.write(array_len(None if aborted is None else len(aborted)))
            for producer_id, first_offset in aborted or ():
                out.write(_i64(producer_id))
                out.write(_i64(first_offset))
                if flexible:
                    out.write(b"\x00")
            if version >= 11:
                out.write(_i32(p.preferred_read_replica))
            out.write(array_len(p.records_size))  # None: empty, as above
            if isinstance(p.records, FileRegion):
                out.region(p.records)
            elif p.records:
                out.write(p.records)
            if flexible:
                if p.current_leader is None:
                    out.write(b"\x00")
                else:  # one tagged field: tag 1 = CurrentLeader {LeaderId, LeaderEpoch, no tags}
                    out.write(b"\x01\x01\x09" + _i32(p.current_leader[0]) + _i32(p.current_leader[1]) + b"\x00")
        if flexible:
            out.write(b"\x00")
    if flexible:
        if version >= 16 and node_endpoints:  # one tagged field: tag 0 = NodeEndpoints
            body = bytearray(uvarint_bytes(len(node_endpoints) + 1))
            for n in node_endpoints:
                host = n.host.encode()
                body += _i32(n.node_id) + uvarint_bytes(len(host) + 1) + host + _i32(n.port)
                if n.rack is None:
                    body += b"\x00"
                else:
                    rack = n.rack.encode()
                    body += uvarint_bytes(len(rack) + 1) + rack
                body += b"\x00"
            out.write(b"\x01\x00" + uvarint_bytes(len(body)) + bytes(body))
        else:
            out.write(b"\x00")
    parts = out.done()
    return [_i32(out.size)] + parts


def response_size(chunks: list[bytes | FileRegion]) -> int:
    """Bytes of an encoded response, size prefix included (what a fetch quota counts)."""
    return sum(c.length if isinstance(c, FileRegion) else len(c) for c in chunks)


def quota_size(version: int, topics: list[TopicResult]) -> int:
    """What Kafka's leader replication quota counts for a follower fetch: FetchResponse.sizeOf of
    a response holding only `topics` (the throttled partitions), i.e. 4 plus that response's body
    without the response header and NodeEndpoints. Not 0 when `topics` is empty or idle: every
    follower fetch counts, so under a tiny rate the in-sync followers' fetches alone exceed it."""
    sized = [TopicResult(t.name, t.topic_id, [
        p if p.records is None or isinstance(p.records, FileRegion)
        else replace(p, records=FileRegion(None, 0, p.records_size))  # type: ignore[arg-type]  # sized, never read
        for p in t.partitions]) for t in topics]
    header = 4 + (1 if version >= FIRST_FLEXIBLE else 0)  # correlation id, tagged fields
    return response_size(encode_fetch_response(version, 0, 0, 0, 0, sized)) - header
