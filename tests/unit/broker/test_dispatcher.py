"""RequestDispatcher: a handler that raises answers UNKNOWN_SERVER_ERROR in its API's response
shape (Kafka's getErrorResponse) instead of closing the connection (issue 8, item 9)."""

import asyncio
import dataclasses
import datetime
import struct

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse as FindCoordinatorResponseV3
from kio.schema.find_coordinator.v6.response import FindCoordinatorResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.static.primitive import i16, i32

from broker.protocol.response import Response
from broker.apis.dispatcher import RequestDispatcher
from broker.apis.handlers.base import Handler
from broker.apis.handlers.find_coordinator import FindCoordinatorHandler
from broker.apis.handlers.produce import ProduceHandler
from broker.server.metrics import BrokerMetrics
from flotilla.testenv import kafka_wire


class FakeConnection:  # only what the dispatcher reads
    peer = "127.0.0.1:1"
    id = 1
    listener_name = "PLAINTEXT"


def failing(handler_cls: type[Handler]) -> Handler:
    class Failing(handler_cls):
        async def handle(self, ctx, request):
            raise RuntimeError("boom")
    return Failing(broker=None)


def dispatch(handler: Handler, frame: bytes) -> Response:
    metrics = BrokerMetrics()
    return asyncio.run(RequestDispatcher([handler], metrics).dispatch(FakeConnection(), frame)), metrics


def header(api_key: int, version: int, flexible: bool, correlation_id: int = 7) -> bytes:
    head = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"t"
    return head + b"\x00" if flexible else head


def produce_frame(acks: int) -> bytes:
    req = ProduceRequest(transactional_id=None, acks=i16(acks), timeout=datetime.timedelta(seconds=1), topic_data=(
        TopicProduceData(name="a", partition_data=(PartitionProduceData(index=i32(0), records=b""),
                                                   PartitionProduceData(index=i32(3), records=b""))),))
    return header(0, 9, True) + kafka_wire.encode(req)


def test_failed_produce_answers_every_partition_with_unknown_server_error():
    response, metrics = dispatch(failing(ProduceHandler), produce_frame(acks=-1))
    assert not response.close_after
    (frame,) = response.chunks
    (size, corr) = struct.unpack_from(">ii", frame)
    assert (size, corr) == (len(frame) - 4, 7)
    body, end = kafka_wire.decode(ProduceResponse, frame, 4 + 4 + 1)  # size, correlation id, tagged fields
    assert end == len(frame)
    parts = [(t.name, int(p.index), p.error_code) for t in body.responses for p in t.partition_responses]
    assert parts == [("a", 0, ErrorCode.unknown_server_error), ("a", 3, ErrorCode.unknown_server_error)]
    assert "boom" in body.responses[0].partition_responses[0].error_message
    assert metrics.request_errors.labels("produce")._value.get() == 1


def test_failed_acks_0_produce_closes_the_connection():
    response, _ = dispatch(failing(ProduceHandler), produce_frame(acks=0))
    assert response.close_after and response.chunks == []


def test_failed_find_coordinator_answers_per_key_or_at_the_top():
    frame = header(10, 6, True) + b"\x00" + b"\x03" + b"\x03g1\x02h" + b"\x00"  # key type 0, keys "g1" and "h"
    response, _ = dispatch(failing(FindCoordinatorHandler), frame)
    (out,) = response.chunks
    body, _ = kafka_wire.decode(FindCoordinatorResponse, out, 4 + 4 + 1)
    assert [(c.key, c.error_code, c.node_id) for c in body.coordinators] == [
        ("g1", ErrorCode.unknown_server_error, -1), ("h", ErrorCode.unknown_server_error, -1)]
    # v3 has one top-level error code, filled by the default error_response.
    frame = header(10, 3, True) + b"\x02g" + b"\x00" + b"\x00"  # compact key "g", key type 0, no tags
    response, _ = dispatch(failing(FindCoordinatorHandler), frame)
    body, _ = kafka_wire.decode(FindCoordinatorResponseV3, response.chunks[0], 4 + 4 + 1)
    assert body.error_code == ErrorCode.unknown_server_error and body.node_id == -1 and "boom" in body.error_message


def test_failed_handler_answers_each_requested_entry():
    """The default error response mirrors the request's entries (as Kafka's getErrorResponse)."""
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
    from kio.schema.list_offsets.v7.response import ListOffsetsResponse

    from broker.apis.handlers.list_offsets import ListOffsetsHandler

    req = ListOffsetsRequest(replica_id=i32(-1), isolation_level=0, topics=(
        ListOffsetsTopic(name="a", partitions=(ListOffsetsPartition(partition_index=i32(2), current_leader_epoch=i32(-1),
                                                                    timestamp=-1),)),))
    response, _ = dispatch(failing(ListOffsetsHandler), header(2, 7, True) + kafka_wire.encode(req))
    body, _ = kafka_wire.decode(ListOffsetsResponse, response.chunks[0], 4 + 4 + 1)
    assert [(t.name, int(p.partition_index), p.error_code, int(p.offset)) for t in body.topics for p in t.partitions] == [
        ("a", 2, ErrorCode.unknown_server_error, -1)]


def error_codes(body) -> list:
    """Every error code in a decoded response, at any depth."""
    out = []
    for f in dataclasses.fields(body):
        value = getattr(body, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            out.append(value)
        for item in value if isinstance(value, tuple) else (value,):
            if dataclasses.is_dataclass(item):
                out += error_codes(item)
    return out


def test_every_served_version_answers_a_failed_handler_with_its_error():
    """For every API and version served, a handler that raises is answered, through the dispatcher,
    with a frame the client decodes to the end, and every error code in it (top level and per
    entry) is UNKNOWN_SERVER_ERROR: none says success. Only acks=0 Produce closes instead."""
    import random

    from broker.protocol import codec
    from broker.apis.handlers import all_handlers
    from tests.support.wire_fuzz import BodyGenerator, sample_records

    rng = random.Random(11)
    gen = BodyGenerator(rng, ("t", "g"), sample_records(2, rng))
    answered = with_codes = 0
    for cls in all_handlers():
        lo, hi = codec.kio_versions(cls.api_key)
        for v in range(max(lo, cls.min_version), min(hi, cls.max_version) + 1):
            flexible = codec.is_flexible(cls.api_key, v)
            for _ in range(10):
                frame = header(cls.api_key, v, flexible) + gen.body(codec.request_type(cls.api_key, v))
                response, _ = dispatch(failing(cls), frame)
                if response.close_after:
                    assert cls is ProduceHandler and response.chunks == [], (cls.__name__, v)
                    continue
                (out,) = response.chunks
                # ApiVersions answers with a v0 response header (no tagged fields) at every version.
                start = 4 + 4 + (1 if flexible and cls.api_key != 18 else 0)
                body, end = kafka_wire.decode(codec.response_type(cls.api_key, v), out, start)
                assert end == len(out), f"{cls.__name__} v{v}: {len(out) - end} bytes after the body"
                codes = error_codes(body)
                assert all(c == ErrorCode.unknown_server_error for c in codes), f"{cls.__name__} v{v}: {codes}"
                answered += 1
                with_codes += bool(codes)
    # Most answers carry the error (the rest answer requests with no entries in APIs without a
    # top-level error code, as Kafka's getErrorResponse does).
    assert with_codes > answered // 2, (with_codes, answered)
