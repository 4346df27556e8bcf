"""A tiny blocking Kafka wire client for tests that must control every byte.

Message types come from kio (request/response dataclasses and their readers and writers); this
module only frames them: a 4-byte length, a request header (v1 for classic, v2 for flexible
requests), and the matching response header (v0, or v1 for flexible responses, except that
ApiVersions always answers with v0 so that a client of any version can read it).

It also builds v2 record batches (kio.records.writers.write_new_batch) for Produce requests,
and can corrupt them in the ways the bad-input tests need.
"""

from __future__ import annotations

import datetime
import importlib
import io
import itertools
import socket
import struct
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import kio.serial as kser
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.static.primitive import i8, i16, i32, i64

API_VERSIONS_KEY = 18
DEFAULT_TIMEOUT = 10.0
MAX_FRAME = 200 * 1024 * 1024


class ConnectionClosed(EOFError):
    """The broker closed the connection (possibly on purpose)."""


def _split(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


def _header_type(request_type: type) -> type:
    return RequestHeaderV2 if request_type.__flexible__ else RequestHeaderV1


def _response_header_type(response_type: type) -> type:
    if response_type.__api_key__ == API_VERSIONS_KEY:
        return ResponseHeaderV0
    return ResponseHeaderV1 if response_type.__flexible__ else ResponseHeaderV0


def response_type_for(request: Any) -> type:
    """The kio response class matching a kio request instance (same API, same version)."""
    module_name = type(request).__module__.rsplit(".", 1)[0] + ".response"
    module = importlib.import_module(module_name)
    name = type(request).__name__.replace("Request", "Response")
    return getattr(module, name)


def encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    kser.entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def decode(entity_type: type, data: bytes, offset: int = 0) -> tuple[Any, int]:
    value, size = kser.entity_reader(entity_type)(data, offset)
    return value, offset + size


class KafkaConnection:
    """One TCP connection to a broker; requests are sent and answered one at a time."""

    def __init__(self, bootstrap: str, timeout: float = DEFAULT_TIMEOUT, client_id: str = "flotilla-tests"):
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.sock = socket.create_connection(_split(bootstrap), timeout=timeout)
        self.sock.settimeout(timeout)
        self._correlation = itertools.count(1)

    # -- framing -------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def _recv_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionClosed("connection closed by broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exactly(4))
        if size < 0 or size > MAX_FRAME:
            raise ValueError(f"bad response frame size {size}")
        return self._recv_exactly(size)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True if the broker closes (or resets) this connection within `timeout` seconds."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except (TimeoutError, socket.timeout):
            return False

    # -- requests ------------------------------------------------------------------------------

    def header_bytes(self, api_key: int, api_version: int, flexible: bool, correlation_id: int) -> bytes:
        header_type = RequestHeaderV2 if flexible else RequestHeaderV1
        header = header_type(
            request_api_key=i16(api_key),
            request_api_version=i16(api_version),
            correlation_id=i32(correlation_id),
            client_id=self.client_id,
        )
        return encode(header)

    def send(self, request: Any) -> int:
        correlation_id = next(self._correlation)
        t = type(request)
        self.send_frame(
            self.header_bytes(t.__api_key__, t.__version__, t.__flexible__, correlation_id) + encode(request)
        )
        return correlation_id

    def receive(self, response_type: type, correlation_id: int) -> Any:
        frame = self.recv_frame()
        header, offset = decode(_response_header_type(response_type), frame)
        if header.correlation_id != correlation_id:
            raise ValueError(f"correlation id {header.correlation_id} != expected {correlation_id}")
        body, end = decode(response_type, frame, offset)
        if end != len(frame):
            raise ValueError(f"{len(frame) - end} unread bytes after {response_type.__name__}")
        return body

    def request(self, request: Any) -> Any:
        return self.receive(response_type_for(request), self.send(request))

    # -- conveniences --------------------------------------------------------------------------

    def api_versions(self, version: int = 3) -> Any:
        """ApiVersions at `version` (3 or 4: v4 is the first to list features whose minimum is 0)."""
        module = importlib.import_module(f"kio.schema.api_versions.v{version}.request")
        return self.request(
            module.ApiVersionsRequest(client_software_name="flotilla-tests", client_software_version="0")
        )

    def metadata(self, topics: Sequence[str] | None = None, auto_create: bool = False) -> Any:
        from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

        wanted = None if topics is None else tuple(
            MetadataRequestTopic(topic_id=None, name=t) for t in topics
        )
        return self.request(
            MetadataRequest(
                topics=wanted,
                allow_auto_topic_creation=auto_create,
                include_topic_authorized_operations=False,
            )
        )

    def create_topic(
        self, name: str, partitions: int = 1, configs: dict[str, str] | None = None, wait: bool = True,
        replication_factor: int = 1, assignment: list[list[int]] | None = None,
    ) -> ErrorCode:
        """CreateTopics; `assignment` places the replicas by hand (partition i on assignment[i],
        preferred leader first), as `kafka-topics.sh --replica-assignment` does."""
        from kio.schema.create_topics.v7.request import (CreatableReplicaAssignment, CreatableTopic,
                                                         CreatableTopicConfig, CreateTopicsRequest)

        if assignment is not None:
            partitions = len(assignment)

        req = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=name,
                    num_partitions=i32(-1 if assignment else partitions),
                    replication_factor=i16(-1 if assignment else replication_factor),
                    assignments=tuple(CreatableReplicaAssignment(partition_index=i32(i), broker_ids=tuple(
                        i32(b) for b in brokers)) for i, brokers in enumerate(assignment or ())),
                    configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()),
                ),
            ),
            timeout=datetime.timedelta(seconds=10),
            validate_only=False,
        )
        resp = self.request(req)
        code = resp.topics[0].error_code
        if code == ErrorCode.none and wait:
            self.wait_for_leaders(name, partitions)
        return code

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 15.0) -> None:
        """Until metadata names a leader for every partition (CreateTopics may answer before the
        partitions can take writes, as Apache Kafka's does)."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            t = self.metadata([topic]).topics[0]
            if (
                t.error_code == ErrorCode.none
                and len(t.partitions) >= partitions
                and all(p.error_code == ErrorCode.none and p.leader_id >= 0 for p in t.partitions)
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: partitions have no leader {timeout}s after CreateTopics: {t}")
            time.sleep(0.05)

    def init_producer_id(self) -> tuple[int, int]:
        from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

        import time

        deadline = time.monotonic() + 30
        while True:
            resp = self.request(
                InitProducerIdRequest(transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60))
            )
            if resp.error_code == ErrorCode.none:
                return int(resp.producer_id), int(resp.producer_epoch)
            if not resp.error_code.retriable or time.monotonic() > deadline:
                raise RuntimeError(f"InitProducerId failed: {resp.error_code!r}")
            time.sleep(0.2)

    def begin_transaction(self, transactional_id: str, partitions: Sequence[tuple[str, int]], inits: int = 1,
                          timeout_ms: int = 900000) -> tuple[int, int]:
        """What a transactional producer asks the id's coordinator (found with FindCoordinator; another
        connection when it is not this connection's broker) before its first batch: InitProducerId `inits` times (each bumps the epoch), then
        AddPartitionsToTxn for `partitions`; returns (producer id, epoch). The partition leader
        verifies a transactional batch with the coordinator (KIP-890 part 1), so raw transactional
        batches need this first."""
        import time

        from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
        from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
        from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

        def retry(what: str, call: Callable[[], Any], code_of: Callable[[Any], ErrorCode]) -> Any:
            deadline = time.monotonic() + 60
            while True:
                resp = call()
                code = code_of(resp)
                if code == ErrorCode.none:
                    return resp
                if not code.retriable or time.monotonic() > deadline:
                    raise RuntimeError(f"{what} failed: {code!r}")
                time.sleep(0.2)

        found = retry("FindCoordinator", lambda: self.request(FindCoordinatorRequest(
            key_type=i8(1), coordinator_keys=(transactional_id,))), lambda r: r.coordinators[0].error_code)
        coordinator = found.coordinators[0]
        address = f"{coordinator.host}:{int(coordinator.port)}"
        if address != self.bootstrap:
            # In a fleet the id's coordinator may be another broker: ask it, as a producer does.
            with KafkaConnection(address, client_id=self.client_id) as other:
                return other.begin_transaction(transactional_id, partitions, inits, timeout_ms)
        for _ in range(inits):
            init = retry("InitProducerId", lambda: self.request(InitProducerIdRequest(
                transactional_id=transactional_id, transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                producer_id=i64(-1), producer_epoch=i16(-1))), lambda r: r.error_code)
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        retry("AddPartitionsToTxn", lambda: self.request(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=i64(pid),
            v3_and_below_producer_epoch=i16(epoch), v3_and_below_topics=tuple(
                AddPartitionsToTxnTopic(name=t, partitions=tuple(i32(p) for p in ps)) for t, ps in by_topic.items()))),
            lambda r: max((p.partition_error_code for t in r.results_by_topic_v3_and_below
                           for p in t.results_by_partition), key=lambda c: c != ErrorCode.none))
        return pid, epoch

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1, timeout_ms: int = 10000,
                transactional_id: str | None = None) -> Any:
        """Send one batch (or any bytes) as a Produce v9 request; return the partition response."""
        from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

        req = ProduceRequest(
            transactional_id=transactional_id,
            acks=i16(acks),
            timeout=datetime.timedelta(milliseconds=timeout_ms),
            topic_data=(
                TopicProduceData(
                    name=topic,
                    partition_data=(PartitionProduceData(index=i32(partition), records=records),),
                ),
            ),
        )
        if acks == 0:
            self.send(req)
            return None
        resp = self.request(req)
        return resp.responses[0].partition_responses[0]

    def produce_when_led(self, topic: str, partition: int, records: bytes, acks: int = -1,
                         timeout: float = 30.0) -> Any:
        """`produce`, tried again while the answer is NOT_LEADER_OR_FOLLOWER,
        LEADER_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION (nothing was appended; all three are
        retriable for Kafka's clients too): right after CreateTopics a Kafka broker's Metadata can
        name it leader before its replica manager has applied that, or before it knows the topic."""
        from flotilla.testenv.waiting import wait_for

        retriable = {ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
                     ErrorCode.unknown_topic_or_partition}
        return wait_for(f"a leader of {topic}-{partition} to take a produce",
                        lambda: self.produce(topic, partition, records, acks=acks), timeout=timeout,
                        interval=0.2, until=lambda r: r.error_code not in retriable)

    def list_offsets(self, topic: str, partition: int, timestamp: int = -1, isolation_level: int = 0) -> int:
        """Offset for a timestamp (-1 latest: the high watermark, or the last stable offset with
        isolation_level=1; -2 earliest)."""
        from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

        req = ListOffsetsRequest(
            replica_id=i32(-1),
            isolation_level=i8(isolation_level),
            topics=(
                ListOffsetsTopic(
                    name=topic,
                    partitions=(
                        ListOffsetsPartition(partition_index=i32(partition), timestamp=i64(timestamp)),
                    ),
                ),
            ),
        )
        resp = self.request(req)
        p = resp.topics[0].partitions[0]
        if p.error_code != ErrorCode.none:
            raise RuntimeError(f"ListOffsets {topic}-{partition}: {p.error_code!r}")
        return int(p.offset)

    def write_txn_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                          partitions: Sequence[tuple[str, int]], coordinator_epoch: int = 0) -> dict[tuple[str, int], int]:
        """WriteTxnMarkers v1 (what a transaction coordinator sends a partition leader): one marker
        for these partitions; returns each partition's error code."""
        from kio.schema.write_txn_markers.v1.request import (WritableTxnMarker, WritableTxnMarkerTopic,
                                                             WriteTxnMarkersRequest)

        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        resp = self.request(WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=i64(producer_id), producer_epoch=i16(producer_epoch), transaction_result=commit,
            coordinator_epoch=i32(coordinator_epoch),
            topics=tuple(WritableTxnMarkerTopic(name=t, partition_indexes=tuple(i32(i) for i in ix))
                         for t, ix in by_topic.items())),)))
        return {(t.name, int(p.partition_index)): int(p.error_code)
                for m in resp.markers for t in m.topics for p in t.partitions}

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "KafkaConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(bootstrap: str, timeout: float = DEFAULT_TIMEOUT) -> KafkaConnection:
    return KafkaConnection(bootstrap, timeout=timeout)


# -- record batches ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Msg:
    key: bytes | None
    value: bytes | None


def encode_request_frame(conn: "KafkaConnection", api_key: int, version: int, correlation_id: int,
                         body: bytes = b"") -> bytes:
    """A whole framed request with the connection's client id (v0 ApiVersions has an empty body)."""
    payload = conn.header_bytes(api_key, version, False, correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def build_batch(
    messages: Iterable[Msg | tuple[bytes | None, bytes | None]],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp: datetime.datetime | None = None,
    transactional: bool = False,
) -> bytes:
    """An uncompressed v2 record batch (base offset 0) with a valid CRC (with `transactional`, the
    attribute of a transactional producer's batch)."""
    ts = timestamp or datetime.datetime.now(datetime.timezone.utc)
    ts = ts.replace(microsecond=(ts.microsecond // 1000) * 1000)
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=ts,
            offset=i64(i),
            key=m.key if isinstance(m, Msg) else m[0],
            value=m.value if isinstance(m, Msg) else m[1],
            headers=(),
        )
        for i, m in enumerate(messages)
    )
    buf = io.BytesIO()
    write_new_batch(
        buf,
        NewRecordBatch(
            producer_id=i64(producer_id),
            producer_epoch=i16(producer_epoch),
            base_sequence=i32(base_sequence),
            records=records,
            attributes=i16(0x10 if transactional else 0),
        ),
    )
    return buf.getvalue()


# Byte offsets inside a v2 batch header (see Kafka's DefaultRecordBatch).
CRC_OFFSET = 17  # baseOffset(8) + batchLength(4) + partitionLeaderEpoch(4) + magic(1)


def with_bad_crc(batch: bytes) -> bytes:
    """The same batch with its CRC field flipped (content untouched)."""
    b = bytearray(batch)
    for i in range(CRC_OFFSET, CRC_OFFSET + 4):
        b[i] ^= 0xFF
    return bytes(b)


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
