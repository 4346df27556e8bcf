"""Fetch requests over kio, with KIP-227 sessions kept the way Kafka's Java client keeps them.

`fetch_request` builds one FetchRequest of any (session id, epoch) so tests can walk the session
state machine by hand; `exchange` sends it and returns the decoded response with the byte sizes
of both frames. `SessionFetcher` is a fetcher of many partitions that opens a session with a full
request and then sends only what changed (new partitions, moved fetch offsets, forgotten ones),
as the Java client's FetchSessionHandler does; with `sessions=False` it sends full sessionless
requests (session id 0, epoch -1), as pre-KIP-227 clients and librdkafka do.
"""

from __future__ import annotations

import datetime
import importlib
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, Hashable

from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
FIRST_RACK_ID_VERSION = 11
FIRST_TOPIC_ID_VERSION = 13
FIRST_REPLICA_STATE_VERSION = 15


def _module(version: int, kind: str):
    return importlib.import_module(f"kio.schema.fetch.v{version}.{kind}")


def fetch_request(
    version: int,
    session_id: int,
    epoch: int,
    topics: dict[Hashable, dict[int, int]],
    forgotten: dict[Hashable, list[int]] | None = None,
    *,
    replica_id: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    partition_max_bytes: int = 1 << 20,
    max_bytes: int = 50 << 20,
    rack_id: str = "",
) -> Any:
    """A FetchRequest; topics are keyed by name below v13 and by topic id (uuid) from v13 on:
    {topic: {partition: fetch offset}}; `rack_id` (v11+, KIP-392) is the client's rack."""
    m = _module(version, "request")
    uses_ids = version >= FIRST_TOPIC_ID_VERSION

    def topic_kw(t: Hashable) -> dict[str, Any]:
        return {"topic_id": t} if uses_ids else {"topic": t}

    kw: dict[str, Any] = dict(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(
            m.FetchTopic(**topic_kw(t), partitions=tuple(
                m.FetchPartition(partition=p, fetch_offset=off, partition_max_bytes=partition_max_bytes)
                for p, off in parts.items()))
            for t, parts in topics.items()),
        forgotten_topics_data=tuple(
            m.ForgottenTopic(**topic_kw(t), partitions=tuple(ps)) for t, ps in (forgotten or {}).items()),
    )
    if version >= FIRST_RACK_ID_VERSION:
        kw["rack_id"] = rack_id
    elif rack_id:
        raise ValueError(f"Fetch v{version} has no rack_id (v{FIRST_RACK_ID_VERSION}+)")
    if version >= FIRST_REPLICA_STATE_VERSION:
        kw["replica_state"] = m.ReplicaState(replica_id=replica_id)
    else:
        kw["replica_id"] = replica_id
    return m.FetchRequest(**kw)


@dataclass
class Exchange:
    response: Any
    request_bytes: int  # whole frame, size prefix included
    response_bytes: int

    @property
    def partitions(self) -> dict[tuple[Hashable, int], Any]:
        """{(topic name or id, partition): partition data} of the response."""
        out = {}
        for t in self.response.responses:
            key = t.topic_id if hasattr(t, "topic_id") else t.topic
            for p in t.partitions:
                out[(key, int(p.partition_index))] = p
        return out


def exchange(conn: kafka_wire.KafkaConnection, request: Any) -> Exchange:
    """Send one FetchRequest and read its response, measuring both frames."""
    t = type(request)
    correlation_id = next(conn._correlation)
    payload = conn.header_bytes(t.__api_key__, t.__version__, t.__flexible__, correlation_id) + kafka_wire.encode(request)
    conn.send_frame(payload)
    frame = conn.recv_frame()
    response_type = kafka_wire.response_type_for(request)
    header, offset = kafka_wire.decode(kafka_wire._response_header_type(response_type), frame)
    if header.correlation_id != correlation_id:
        raise ValueError(f"correlation id {header.correlation_id} != {correlation_id}")
    body, _ = kafka_wire.decode(response_type, frame, offset)
    return Exchange(body, 4 + len(payload), 4 + len(frame))


def next_offset(records: bytes | None, current: int) -> int:
    """The offset after the last record of the v2 batches in `records` (whole batches only)."""
    pos, nxt = 0, current
    data = records or b""
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        nxt = max(nxt, base + last_delta + 1)
        pos += 12 + length
    return nxt


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass
class SessionFetcher:
    """Fetches a set of partitions, keeping a session like Kafka's FetchSessionHandler."""

    conn: kafka_wire.KafkaConnection
    version: int = 12
    sessions: bool = True
    replica_id: int = -1
    max_wait_ms: int = 0
    min_bytes: int = 1
    partition_max_bytes: int = 1 << 20
    rack_id: str = ""  # v11+: the client's rack (KIP-392)
    wanted: dict[tuple[Hashable, int], int] = field(default_factory=dict)  # (topic, p) -> fetch offset
    session_id: int = 0
    epoch: int = INITIAL_EPOCH
    in_session: dict[tuple[Hashable, int], int] = field(default_factory=dict)  # what the broker's session holds
    records: int = 0
    fetches: int = 0
    kinds: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.sessions:
            self.epoch = FINAL_EPOCH

    def add(self, topic: Hashable, partitions: int | list[int], offset: int = 0) -> None:
        for p in (range(partitions) if isinstance(partitions, int) else partitions):
            self.wanted[(topic, p)] = offset

    def build(self) -> tuple[Any, str]:
        if self.session_id == 0:  # full: everything we want
            topics: dict[Hashable, dict[int, int]] = {}
            for (t, p), off in self.wanted.items():
                topics.setdefault(t, {})[p] = off
            return self._request(topics, {}), "full" if self.sessions else "sessionless"
        topics, forgotten = {}, {}
        for (t, p), off in self.wanted.items():
            if self.in_session.get((t, p)) != off:
                topics.setdefault(t, {})[p] = off
        for (t, p) in self.in_session:
            if (t, p) not in self.wanted:
                forgotten.setdefault(t, []).append(p)
        return self._request(topics, forgotten), "incremental"

    def _request(self, topics, forgotten) -> Any:
        return fetch_request(self.version, self.session_id, self.epoch, topics, forgotten, replica_id=self.replica_id,
                             max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
                             partition_max_bytes=self.partition_max_bytes, rack_id=self.rack_id)

    def fetch(self) -> Exchange:
        request, kind = self.build()
        ex = exchange(self.conn, request)
        self.fetches += 1
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        resp = ex.response
        if resp.error_code != ErrorCode.none:
            if resp.error_code in (ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch,
                                   ErrorCode.fetch_session_topic_id_error):
                self.session_id, self.epoch, self.in_session = 0, INITIAL_EPOCH, {}  # start over
            return ex
        if self.sessions:
            if kind == "full":
                self.session_id = int(resp.session_id)
                self.epoch = 1 if self.session_id else INITIAL_EPOCH
                self.in_session = dict(self.wanted) if self.session_id else {}
            else:
                self.epoch = next_epoch(self.epoch)
                self.in_session = dict(self.wanted)
        for key, p in ex.partitions.items():
            if key in self.wanted and p.error_code == ErrorCode.none and p.records:
                before = self.wanted[key]
                self.wanted[key] = next_offset(p.records, before)
                self.records += self.wanted[key] - before
        return ex
