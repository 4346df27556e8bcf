"""Storage under lifecycle events: files deleted, rolled or failing while clients still use them.

Real broker processes, real sockets; record bytes are checked by CRC and content.
"""

from __future__ import annotations

import datetime
import select
import socket
import struct
import time
from pathlib import Path
from typing import Callable

import crc32c
import pytest
from kio.schema.delete_topics.v4.request import DeleteTopicsRequest
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.static.primitive import i8, i16, i32, i64

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import FlotillaBroker, ServerProcess

VALUE_SIZE = 60_000
RECORDS_PER_BATCH = 8  # about 480 KB per batch, under max.message.bytes


def fill(conn: kafka_wire.KafkaConnection, topic: str, marker: bytes, total_bytes: int,
         timestamp: datetime.datetime | None = None) -> None:
    """Append batches whose every value byte is `marker` until about `total_bytes` are written."""
    written = 0
    while written < total_bytes:
        batch = kafka_wire.build_batch([(b"k", marker * VALUE_SIZE)] * RECORDS_PER_BATCH, timestamp=timestamp)
        resp = conn.produce(topic, 0, batch, acks=1)
        assert int(resp.error_code) == 0, f"produce to {topic} failed: {resp.error_code!r}"
        written += len(batch)


class SlowFetcher:
    """A consumer that sends one big Fetch and then does not read its socket for a while, so the
    broker's response waits (in sendfile, behind a full socket buffer) until `read_response`."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
        self.sock.settimeout(30)
        self.sock.connect((host, int(port)))
        self._cid = 7

    def send_fetch(self, topic: str, max_bytes: int) -> None:
        req = FetchRequest(
            replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=0), min_bytes=i32(1), max_bytes=i32(max_bytes),
            isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
            topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), log_start_offset=i64(-1),
                partition_max_bytes=i32(max_bytes)),)),),
            forgotten_topics_data=(), rack_id="")
        header = struct.pack(">hhih", 1, 11, self._cid, len(b"slow")) + b"slow"
        payload = header + kafka_wire.encode(req)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(min(n - len(out), 1 << 20))
            if not chunk:
                raise AssertionError(f"broker closed the connection after {len(out)} of {n} response bytes")
            out += chunk
        return bytes(out)

    def read_response(self) -> bytes:
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def close(self) -> None:
        self.sock.close()


def record_set(frame: bytes) -> bytes:
    """The record bytes of the one partition in a Fetch v11 response frame (header v0 included)."""
    pos = 4 + 4 + 2 + 4  # correlation id, throttle time, error code, session id
    (topics,) = struct.unpack_from(">i", frame, pos)
    assert topics == 1
    (name_len,) = struct.unpack_from(">h", frame, pos + 4)
    pos += 4 + 2 + name_len
    (partitions,) = struct.unpack_from(">i", frame, pos)
    assert partitions == 1
    (error_code,) = struct.unpack_from(">h", frame, pos + 8)
    assert error_code == 0, f"fetch answered error {error_code}"
    pos += 4 + 4 + 2 + 8 + 8 + 8  # partition, error, high watermark, last stable offset, log start offset
    (aborted,) = struct.unpack_from(">i", frame, pos)
    pos += 4 + max(aborted, 0) * 16 + 4  # aborted transactions, preferred read replica
    (size,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    assert pos + size == len(frame), "record set size does not match the frame"
    return frame[pos:]


def check_batches(data: bytes, marker: bytes) -> int:
    """Every batch has a valid CRC, offsets follow on, and no value byte is another topic's.
    Returns the number of batches."""
    pos, batches, expected_offset = 0, 0, 0
    while pos < len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        assert end <= len(data), "a record batch runs past the end of the response"
        assert base_offset == expected_offset, f"batch at {base_offset}, expected {expected_offset}: bytes of another file"
        assert data[pos + 16] == 2, "bad magic: bytes of another file"
        (crc,) = struct.unpack_from(">I", data, pos + 17)
        assert crc32c.crc32c(data[pos + 21:end]) == crc, f"batch at offset {base_offset} has a bad CRC"
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        expected_offset = base_offset + last_delta + 1
        batches += 1
        pos = end
    other = b"B" if marker != b"B" else b"A"
    assert other * 1000 not in data, "the response holds another topic's record bytes"
    return batches


def delete_topic(conn: kafka_wire.KafkaConnection, topic: str) -> None:
    resp = conn.request(DeleteTopicsRequest(topic_names=(topic,), timeout=datetime.timedelta(seconds=10)))
    assert int(resp.responses[0].error_code) == 0


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


FETCH_BYTES = 24 * 1024 * 1024


@pytest.mark.timeout(120)
@pytest.mark.flotilla_only("white-box: relies on descriptor reuse inside the broker process")
def test_deleting_a_topic_under_a_slow_fetch_never_sends_another_topics_bytes(broker: ServerProcess) -> None:
    a, b = kafka_wire.unique_topic("leak-a"), kafka_wire.unique_topic("leak-b")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert int(conn.create_topic(a, 1)) == 0
        fill(conn, a, b"A", 20 * 1024 * 1024)
        slow = SlowFetcher(broker.bootstrap)
        try:
            slow.send_fetch(a, FETCH_BYTES)
            time.sleep(1.0)  # the broker is now blocked sending the region to a reader that does not read
            delete_topic(conn, a)
            # New files now get the lowest free descriptor numbers, A's among them.
            assert int(conn.create_topic(b, 1)) == 0
            fill(conn, b, b"B", 20 * 1024 * 1024)
            frame = slow.read_response()
        finally:
            slow.close()
    assert check_batches(record_set(frame), b"A") > 10


@pytest.mark.timeout(120)
@pytest.mark.flotilla_only("white-box: relies on descriptor reuse inside the broker process")
@pytest.mark.broker_config({"log.retention.check.interval.ms": "300"})
def test_retention_deleting_a_segment_under_a_slow_fetch_never_sends_another_files_bytes(broker: ServerProcess) -> None:
    a, b = kafka_wire.unique_topic("ret-a"), kafka_wire.unique_topic("ret-b")
    retention_ms = 12_000
    # Records stamped 4 s in the past expire about 8 s after they are written.
    old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=4)
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert int(conn.create_topic(a, 1, configs={"retention.ms": str(retention_ms),
                                                    "segment.bytes": str(8 * 1024 * 1024)})) == 0
        fill(conn, a, b"A", 20 * 1024 * 1024, timestamp=old)
        first_segment = Path(broker.log_dirs) / f"{a}-0" / f"{0:020d}.log"
        assert first_segment.exists()
        slow = SlowFetcher(broker.bootstrap)
        try:
            slow.send_fetch(a, FETCH_BYTES)
            wait_until(lambda: not first_segment.exists(), 30, "retention to delete the first segment")
            time.sleep(1.5)  # past any grace period a broker might give deleted files' descriptors
            assert int(conn.create_topic(b, 1)) == 0
            fill(conn, b, b"B", 20 * 1024 * 1024)
            frame = slow.read_response()
        finally:
            slow.close()
    assert check_batches(record_set(frame), b"A") > 5


# -- fsync off the event loop ---------------------------------------------------------------------


def produce_request(topic: str, records: bytes, acks: int = 1):
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

    return ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=i32(0), records=records),)),))


def answered(conn: kafka_wire.KafkaConnection) -> bool:
    """Has the broker sent anything on this connection (without reading it)?"""
    return bool(select.select([conn.sock], [], [], 0)[0])


def fsync_running(flags: Path) -> bool:
    return any(flags.iterdir())


@pytest.fixture
def slow_fsync(tmp_path: Path, broker_factory) -> Callable[..., tuple[FlotillaBroker, Path]]:
    """Starts a broker whose every segment fsync takes 3 s, with a file in the returned directory
    while one runs (tests/support/slow_fsync.py replaces the broker's fsync in its process)."""
    from tests.support.slow_fsync import SlowFsyncBroker

    flags = tmp_path / "fsync-in-progress"
    flags.mkdir()

    def start(overrides: dict[str, str] | None = None) -> tuple[FlotillaBroker, Path]:
        b = SlowFsyncBroker(tmp_path / f"slow-broker{len(broker_factory.started)}", flags=flags, seconds=3,
                            overrides=overrides)
        broker_factory.started.append(b)  # closed with the others, its log tail in a failure report
        return b.start(), flags
    return start


@pytest.mark.timeout(120)
@pytest.mark.flotilla_only("Flotilla's fsync is slowed down in its process")
def test_flush_before_ack_runs_off_the_event_loop(slow_fsync) -> None:
    """flush.messages=1: every Produce is acknowledged only once its data is fsynced, and while
    that fsync runs the broker answers other connections."""
    from kio.schema.produce.v9.response import ProduceResponse

    b, flags = slow_fsync({"log.flush.interval.messages": "1"})
    topic = kafka_wire.unique_topic("fsync-ack")
    with kafka_wire.connect(b.bootstrap) as producer, kafka_wire.connect(b.bootstrap) as other:
        assert int(producer.create_topic(topic, 1)) == 0
        cid = producer.send(produce_request(topic, kafka_wire.build_batch([(b"k", b"durable")])))
        wait_until(lambda: fsync_running(flags), 20, "the Produce's fsync to start")
        assert int(other.api_versions().error_code) == 0
        assert fsync_running(flags), "ApiVersions was answered only after the fsync: it ran on the event loop"
        assert not answered(producer), "the Produce was acknowledged before its data was fsynced"
        resp = producer.receive(ProduceResponse, cid)
        assert int(resp.responses[0].partition_responses[0].error_code) == 0


@pytest.mark.timeout(120)
@pytest.mark.flotilla_only("Flotilla's fsync is slowed down in its process")
def test_segment_roll_flushes_off_the_event_loop(slow_fsync) -> None:
    """A roll fsyncs the old segment (and writes a producer snapshot) in the background: the
    Produce that rolled is answered, and so are other connections, while that fsync runs."""
    from kio.schema.produce.v9.response import ProduceResponse

    b, flags = slow_fsync()
    topic = kafka_wire.unique_topic("fsync-roll")
    value = b"r" * 60_000
    with kafka_wire.connect(b.bootstrap) as producer, kafka_wire.connect(b.bootstrap) as other:
        assert int(producer.create_topic(topic, 1, configs={"segment.bytes": "100000"})) == 0
        assert int(producer.produce(topic, 0, kafka_wire.build_batch([(b"k", value)]), acks=1).error_code) == 0
        assert not fsync_running(flags)
        cid = producer.send(produce_request(topic, kafka_wire.build_batch([(b"k", value)])))  # rolls
        wait_until(lambda: fsync_running(flags), 20, "the rolled segment's fsync to start")
        assert int(other.api_versions().error_code) == 0
        resp = producer.receive(ProduceResponse, cid)
        assert int(resp.responses[0].partition_responses[0].error_code) == 0
        assert fsync_running(flags), "answers waited for the roll's fsync: it ran on the event loop"
    assert len(list((Path(b.log_dirs) / f"{topic}-0").glob("*.log"))) == 2
