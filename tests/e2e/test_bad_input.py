"""Bad input over raw sockets: the broker refuses it precisely and keeps serving everyone else.

Frames are built with kio types (flotilla.testenv.kafka_wire); error codes are Kafka's.
"""

from __future__ import annotations

import datetime
import os
import re
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.static.primitive import i16, i32

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import FlotillaBroker, ServerProcess
from flotilla.testenv.kafka_wire import ConnectionClosed, KafkaConnection
from tests.support.verify import read_all

CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_VERSION = 35
KAFKA_STORAGE_ERROR = 56


def still_serving(broker: ServerProcess, other: KafkaConnection | None = None) -> None:
    """The broker answers on a connection opened before the bad one, and on a new one."""
    if other is not None:
        assert int(other.api_versions().error_code) == 0
    with kafka_wire.connect(broker.bootstrap) as fresh:
        assert int(fresh.api_versions().error_code) == 0
        assert fresh.metadata([]).brokers


def wait_log_mentions(broker: ServerProcess, before: int, port: int, timeout: float = 5.0) -> str:
    """New broker log output that names the bad connection (its port) or the problem."""
    pattern = re.compile(rf"{port}|invalid|malformed|frame|size|clos|disconnect", re.IGNORECASE)
    deadline = time.monotonic() + timeout
    while True:
        new = broker.log_text()[before:]
        if pattern.search(new):
            return new
        if time.monotonic() > deadline:
            raise AssertionError(f"broker logged nothing about the bad connection (port {port}); new log: {new[-2000:]!r}")
        time.sleep(0.2)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http-request"),
        pytest.param(struct.pack(">i", -5) + b"\x00" * 16, id="negative-length"),
        pytest.param(struct.pack(">i", 3) + b"\x00\x12\x00", id="truncated-header"),
        pytest.param(struct.pack(">i", 12) + b"\x7f" * 12, id="garbage-header"),
    ],
)
@pytest.mark.broker_config({"socket.request.max.bytes": "1048576"})
def test_malformed_frame_closes_only_that_connection(broker: ServerProcess, payload: bytes) -> None:
    with kafka_wire.connect(broker.bootstrap) as good, kafka_wire.connect(broker.bootstrap) as bad:
        assert int(good.api_versions().error_code) == 0
        before = len(broker.log_text())
        bad.send_raw(payload)
        assert bad.is_closed_by_peer(10), "broker kept a connection open after a malformed frame"
        still_serving(broker, good)
        assert broker.is_running()
        if payload.startswith(b"GET") or payload[:4] == struct.pack(">i", -5):
            wait_log_mentions(broker, before, bad.sock.getsockname()[1])


# Issue 8, item 0: kio's reader pre-allocated these counts (96 GB, 240 GB) and the process aborted.
ISSUE_8_FRAMES = [
    pytest.param("000000250000000b0000058b0002667a0000ffff02010002c2ffffff2c40ff0101ff00ffff00010200",
                 id="produce-v11-array-of-1.2e10"),
    pytest.param("000000100003000900000001ffff00ffffffff6f", id="metadata-v9-array-of-3e10"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("frame_hex", ISSUE_8_FRAMES)
def test_array_length_beyond_the_frame_is_refused_not_allocated(shared_broker: ServerProcess, frame_hex: str) -> None:
    """Kafka refuses a collection longer than the bytes left and closes the connection."""
    with kafka_wire.connect(shared_broker.bootstrap) as good, kafka_wire.connect(shared_broker.bootstrap) as bad:
        assert int(good.api_versions().error_code) == 0
        bad.send_raw(bytes.fromhex(frame_hex))
        assert bad.is_closed_by_peer(10), "the broker kept the connection open after an impossible array length"
        assert shared_broker.is_running(), f"the broker died:\n{shared_broker.log_tail(20)}"
        still_serving(shared_broker, good)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("api_key,version,body_hex", [
    pytest.param(15, 1, "ffffffff", id="describe-groups-null-groups"),
    pytest.param(20, 1, "ffffffff00002710", id="delete-topics-null-names"),
    pytest.param(2, 1, "ffffffffffffffff", id="list-offsets-null-topics"),
    pytest.param(10, 4, "000000", id="find-coordinator-null-keys"),
])
def test_null_for_a_non_nullable_array_is_an_invalid_request(shared_broker: ServerProcess, api_key: int,
                                                             version: int, body_hex: str) -> None:
    """Kafka's generated reader throws "non-nullable field ... was serialized as null"; the request
    cannot be parsed, so Kafka closes the connection (SocketServer.processCompletedReceives)."""
    with kafka_wire.connect(shared_broker.bootstrap) as good, kafka_wire.connect(shared_broker.bootstrap) as bad:
        flexible = version >= 4 and api_key == 10
        bad.send_frame(bad.header_bytes(api_key, version, flexible, 9) + bytes.fromhex(body_hex))
        try:
            frame = bad.recv_frame()
        except (ConnectionClosed, ConnectionResetError):
            pass
        else:
            raise AssertionError(f"a null non-nullable array was answered: {frame!r}")
        still_serving(shared_broker, good)
        assert shared_broker.is_running()


@pytest.mark.timeout(60)
@pytest.mark.broker_config({"socket.request.max.bytes": "1048576"})
def test_length_prefix_beyond_socket_request_max_bytes(broker: ServerProcess) -> None:
    with kafka_wire.connect(broker.bootstrap) as good, kafka_wire.connect(broker.bootstrap) as bad:
        before = len(broker.log_text())
        port = bad.sock.getsockname()[1]
        # Announce 2 MiB but send only a little: the broker must refuse on the prefix alone.
        bad.send_raw(struct.pack(">i", 2 * 1024 * 1024) + b"\x00\x12\x00\x03")
        assert bad.is_closed_by_peer(10), "oversized length prefix did not close the connection"
        wait_log_mentions(broker, before, port)
        still_serving(broker, good)


@pytest.mark.timeout(60)
def test_bad_crc_is_corrupt_message(shared_broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("crc")
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
        batch = kafka_wire.build_batch([(b"k", b"v")] * 3)
        resp = conn.produce(topic, 0, kafka_wire.with_bad_crc(batch))
        assert int(resp.error_code) == CORRUPT_MESSAGE
        assert conn.list_offsets(topic, 0) == 0, "a corrupt batch was appended"
        # The same batch with its real CRC is fine on the same connection.
        ok = conn.produce(topic, 0, batch)
        assert int(ok.error_code) == 0 and int(ok.base_offset) == 0
        assert conn.list_offsets(topic, 0) == 3


@pytest.mark.timeout(60)
@pytest.mark.broker_config({"auto.create.topics.enable": "false"})
def test_produce_to_unknown_topic_without_auto_create(broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("ghost")
    with kafka_wire.connect(broker.bootstrap) as conn:
        resp = conn.produce(topic, 0, kafka_wire.build_batch([(b"k", b"v")]))
        assert int(resp.error_code) == UNKNOWN_TOPIC_OR_PARTITION
        md = conn.metadata([topic], auto_create=True)
        assert int(md.topics[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
        assert topic not in {t.name for t in conn.metadata(None).topics}, "topic was auto-created"


@pytest.mark.timeout(60)
@pytest.mark.broker_config({"message.max.bytes": "10000"})
def test_too_large_batch_is_message_too_large(broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("big")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)  # Apache answers NOT_LEADER_OR_FOLLOWER until it leads (a CI run hit it)
        big = kafka_wire.build_batch([(b"k", os.urandom(20_000))])
        resp = conn.produce(topic, 0, big)
        assert int(resp.error_code) == MESSAGE_TOO_LARGE
        assert conn.list_offsets(topic, 0) == 0
        small = conn.produce(topic, 0, kafka_wire.build_batch([(b"k", b"x" * 5000)]))
        assert int(small.error_code) == 0


def _api_versions_unsupported_frame(conn: KafkaConnection, version: int, correlation_id: int) -> bytes:
    # A flexible (v2) header as a newer client would send, and a v3-shaped body.
    header = conn.header_bytes(18, version, True, correlation_id)
    body = b"\x05tests" + b"\x021" + b"\x00"  # compact strings + empty tagged fields
    return header + body


@pytest.mark.timeout(60)
def test_unsupported_api_versions_version_answers_v0(shared_broker: ServerProcess) -> None:
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        conn.send_frame(_api_versions_unsupported_frame(conn, 999, 77))
        frame = conn.recv_frame()
        header, offset = kafka_wire.decode(ResponseHeaderV0, frame)
        assert header.correlation_id == 77
        body, end = kafka_wire.decode(ApiVersionsResponseV0, frame, offset)
        assert end == len(frame), "response is not a plain ApiVersions v0 body"
        assert body.error_code == ErrorCode.unsupported_version
        keys = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
        assert 18 in keys and keys[18][0] == 0 and keys[18][1] >= 3, f"ApiVersions range: {keys.get(18)}"
        # The client can now retry with a supported version on the same connection.
        assert int(conn.api_versions().error_code) == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "api_key,version",
    [pytest.param(9999, 0, id="unknown-api-key"), pytest.param(3, 999, id="metadata-v999")],
)
def test_unknown_api_or_version_fails_cleanly(shared_broker: ServerProcess, api_key: int, version: int) -> None:
    with kafka_wire.connect(shared_broker.bootstrap) as good, kafka_wire.connect(shared_broker.bootstrap) as bad:
        bad.send_frame(bad.header_bytes(api_key, version, False, 5) + b"\x00\x00\x00\x00")
        try:
            frame = bad.recv_frame()
        except (ConnectionClosed, ConnectionResetError):
            pass  # closing the connection is a clean refusal
        else:
            header, offset = kafka_wire.decode(ResponseHeaderV0, frame)
            assert header.correlation_id == 5
            # An answer must carry an error code (UNSUPPORTED_VERSION or INVALID_REQUEST) first.
            (code,) = struct.unpack(">h", frame[offset : offset + 2]) if len(frame) >= offset + 2 else (None,)
            assert code in (UNSUPPORTED_VERSION, 42), f"unexpected answer {frame!r}"
        still_serving(shared_broker, good)


# -- full disk -------------------------------------------------------------------------------------


def _mount_tmpfs(path: Path, size: str) -> None:
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here (needs root): {proc.stderr.strip()}")


@pytest.mark.timeout(180)
@pytest.mark.flotilla_only("Apache Kafka takes a full log dir offline and halts instead of answering 56")
def test_full_disk_answers_storage_error(broker_factory, tmp_path: Path) -> None:
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    _mount_tmpfs(mnt, "4m")
    b = None
    try:
        b = broker_factory({"log.dirs": str(mnt), "log.segment.bytes": "1048576"})
        topic = kafka_wire.unique_topic("full")
        acked: list[bytes] = []
        code = 0
        with kafka_wire.connect(b.bootstrap) as conn:
            assert int(conn.create_topic(topic, 1)) == 0
            for i in range(200):  # 200 x 64 KiB = 12.5 MiB, far beyond the 4 MiB disk
                value = f"{i:06d}-{os.urandom(32 * 1024).hex()}".encode()
                resp = conn.produce(topic, 0, kafka_wire.build_batch([(b"k", value)]))
                code = int(resp.error_code)
                if code != 0:
                    break
                acked.append(value)
        assert code == KAFKA_STORAGE_ERROR, f"expected KAFKA_STORAGE_ERROR once the disk filled, got {code}"
        assert acked, "nothing was acknowledged before the disk filled"
        assert b.is_running(), "broker died on a full disk"
        got = read_all(b.bootstrap, topic, (0,))
        assert [r.offset for r in got] == list(range(len(acked)))
        assert [r.value for r in got] == [v.decode() for v in acked], "acknowledged records changed"
    finally:
        if b is not None:
            b.kill9()
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill_inodes(directory: Path) -> int:
    """Create empty files until the file system has no inode left (a disk 'full' for new files)."""
    directory.mkdir()
    n = 0
    while True:
        try:
            (directory / f"f{n}").touch()
        except OSError:
            return n
        n += 1


def _metric(url: str, name: str, labels: str) -> float | None:
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(f"{name}{{{labels}}} "):
                return float(line.rsplit(" ", 1)[1])
    return None


def _checkpoint_offset(path: Path, topic: str) -> int | None:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        t, _p, offset = line.rsplit(" ", 2)
        if t == topic:
            return int(offset)
    return None


@pytest.mark.timeout(180)
@pytest.mark.flotilla_only("Flotilla's metric and log lines; Apache Kafka also refuses reads of an offline dir")
def test_failed_log_dir_goes_offline_and_housekeeping_goes_on(broker_factory, tmp_path: Path) -> None:
    """A log dir on a disk without free inodes fails at the next segment roll (retention rolls
    an expired active segment) and at checkpoints. The broker says so (a log line and the
    flotilla_log_dir_offline metric), refuses writes there with KAFKA_STORAGE_ERROR, keeps
    serving reads and the other log dir (its checkpoints still advance: housekeeping lives on),
    and a SIGTERM then stops cleanly, says what it could not do and leaves no .tmp file."""
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    _mount_tmpfs(mnt, "16m,nr_inodes=64")
    small, normal = mnt / "data", tmp_path / "normal-data"
    b = None
    try:
        b = broker_factory({"log.dirs": f"{normal},{small}", "log.retention.check.interval.ms": "300"})
        ok_topic, doomed = kafka_wire.unique_topic("healthy"), kafka_wire.unique_topic("offline")
        old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=64)
        with kafka_wire.connect(b.bootstrap) as conn:
            assert int(conn.create_topic(ok_topic, 1)) == 0  # the emptier dir first: `normal`
            assert int(conn.create_topic(doomed, 1, configs={"retention.ms": "66000"})) == 0
            assert (small / f"{doomed}-0").is_dir() and (normal / f"{ok_topic}-0").is_dir()
            # Records 64 s old with a 66 s retention: the active segment expires in about 2 s (before
            # the first periodic checkpoint), and retention then rolls it, which needs a new file.
            resp = conn.produce(doomed, 0, kafka_wire.build_batch([(b"k", b"before")], timestamp=old))
            assert int(resp.error_code) == 0
            _fill_inodes(mnt / "filler")
            deadline = time.monotonic() + 30
            while _metric(b.metrics_url, "flotilla_log_dir_offline", f'dir="{small}"') != 1.0:
                assert time.monotonic() < deadline, "the failed log dir was never reported offline"
                time.sleep(0.3)
            assert _metric(b.metrics_url, "flotilla_log_dir_offline", f'dir="{normal}"') == 0.0
            assert re.search(rf"log directory {re.escape(str(small))} is offline", b.log_text())
            resp = conn.produce(doomed, 0, kafka_wire.build_batch([(b"k", b"refused")]))
            assert int(resp.error_code) == KAFKA_STORAGE_ERROR
            resp = conn.produce(ok_topic, 0, kafka_wire.build_batch([(b"k", b"v")] * 3))
            assert int(resp.error_code) == 0
        checkpoint = normal / "replication-offset-checkpoint"
        deadline = time.monotonic() + 20
        while _checkpoint_offset(checkpoint, ok_topic) != 3:
            assert time.monotonic() < deadline, "checkpoints of the healthy log dir stopped: housekeeping died"
            time.sleep(0.3)
        assert [r.value for r in read_all(b.bootstrap, doomed, (0,))] == ["before"]
        assert b.log_text().count(f"{small} is offline") == 1, "the failure must be reported once, not per attempt"
        code = b.stop()
        assert code in b.clean_exit_codes
        text = b.log_text()
        assert "shutdown could not finish" in text and str(small) in text.split("shutdown could not finish", 1)[1]
        assert "cannot start" not in text
        assert not list(small.rglob("*.tmp")), "shutdown left temporary files on the full disk"
        assert (normal / ".kafka_cleanshutdown").exists() and not (small / ".kafka_cleanshutdown").exists()
        # Space again: the next start recovers the failed dir and takes writes there.
        subprocess.run(["rm", "-rf", str(mnt / "filler")], check=True)
        b.start()
        with kafka_wire.connect(b.bootstrap) as conn:
            assert int(conn.produce(doomed, 0, kafka_wire.build_batch([(b"k", b"after")])).error_code) == 0
    finally:
        if b is not None:
            b.kill9()
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# -- many partitions ---------------------------------------------------------------------------------

INVALID_PARTITIONS = 37


def _create_topic(conn: KafkaConnection, name: str, partitions: int) -> tuple[int, str | None]:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    resp = conn.request(CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=i32(partitions), replication_factor=i16(1),
                               assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=30), validate_only=False))
    return int(resp.topics[0].error_code), resp.topics[0].error_message


def _grow_topic(conn: KafkaConnection, name: str, total: int) -> tuple[int, str | None]:
    from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic

    resp = conn.request(CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=name, count=i32(total), assignments=None),),
        timeout=datetime.timedelta(seconds=30), validate_only=False))
    return int(resp.results[0].error_code), resp.results[0].error_message


def _topic_exists(conn: KafkaConnection, name: str) -> bool:
    return int(conn.metadata([name]).topics[0].error_code) != UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.timeout(90)
@pytest.mark.flotilla_only("Apache Kafka has no cap on partitions (flotilla.max.partitions)")
@pytest.mark.broker_config({"flotilla.max.partitions": "120"})
def test_partition_count_is_bounded_before_anything_is_recorded(broker: ServerProcess) -> None:
    with kafka_wire.connect(broker.bootstrap) as conn:
        for count in (524_291, 121):  # the bit-flipped request of issue 8, and one over the limit
            name = kafka_wire.unique_topic("huge")
            code, message = _create_topic(conn, name, count)
            assert code == INVALID_PARTITIONS and "flotilla.max.partitions=120" in (message or ""), message
            assert not _topic_exists(conn, name), "a refused topic was recorded anyway"
        grown = kafka_wire.unique_topic("grown")
        assert _create_topic(conn, grown, 60)[0] == 0
        code, message = _grow_topic(conn, grown, 200)
        assert code == INVALID_PARTITIONS and "flotilla.max.partitions" in (message or ""), message
        assert len(conn.metadata([grown]).topics[0].partitions) == 60
        assert _grow_topic(conn, grown, 100)[0] == 0
    still_serving(broker)


@pytest.mark.timeout(180)
@pytest.mark.flotilla_only("white-box: NOT_LEADER_OR_FOLLOWER while this broker is still opening the logs")
def test_thousands_of_new_partitions_open_while_others_are_served(broker: ServerProcess) -> None:
    """The logs of a 3,000-partition topic are opened a chunk at a time: while they open, other
    requests are answered (a Produce to the last partition gets NOT_LEADER_OR_FOLLOWER, retriable,
    until its log is open), instead of the whole broker waiting for all of them."""
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    name = kafka_wire.unique_topic("wide")
    with kafka_wire.connect(broker.bootstrap, timeout=120) as admin, kafka_wire.connect(broker.bootstrap) as prod:
        admin.send(CreateTopicsRequest(
            topics=(CreatableTopic(name=name, num_partitions=i32(3000), replication_factor=i16(1),
                                   assignments=(), configs=()),),
            timeout=datetime.timedelta(seconds=0), validate_only=False))
        codes = []
        deadline = time.monotonic() + 60
        while not codes or codes[-1] != 0:
            assert time.monotonic() < deadline, f"never writable; answers: {sorted(set(codes))}"
            codes.append(int(prod.produce(name, 2999, kafka_wire.build_batch([(b"k", b"v")]), acks=1).error_code))
        assert 6 in codes, f"no answer came while the logs were being opened: {sorted(set(codes))}"
    still_serving(broker)


class FdLimitedBroker(FlotillaBroker):
    """A broker started under `prlimit --nofile=SOFT:HARD`."""

    def __init__(self, workdir: Path, nofile: str, **kw: object) -> None:
        super().__init__(workdir, **kw)
        self.nofile = nofile

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.nofile}", "--"] + super().command()


@pytest.mark.timeout(240)
@pytest.mark.flotilla_only("Flotilla's start-up, refusal messages and log lines")
def test_file_descriptor_limit(tmp_path: Path, kafka_target: str) -> None:
    """The broker raises its soft open-file limit to the hard one at start, refuses topics it
    could not open (before recording them) instead of failing half-way, restarts with what it
    holds, and an accept() starved of descriptors is logged once, not per attempt."""
    b = FdLimitedBroker(tmp_path / "b", "256:1024", overrides={"flotilla.max.partitions": "100000"})
    try:
        b.start()
        assert "raised the open-file limit (RLIMIT_NOFILE) from 256 to 1024" in b.log_text()
        many, too_many = kafka_wire.unique_topic("many"), kafka_wire.unique_topic("toomany")
        with kafka_wire.connect(b.bootstrap) as conn:
            assert _create_topic(conn, many, 250)[0] == 0  # more than the 256 the process started with
            conn.wait_for_leaders(many, 250, timeout=60)
            for p in (0, 249):
                assert int(conn.produce(many, p, kafka_wire.build_batch([(b"k", b"v%d" % p)])).error_code) == 0
            code, message = _create_topic(conn, too_many, 400)
            assert code == INVALID_PARTITIONS and "file descriptors" in (message or ""), message
            assert not _topic_exists(conn, too_many)
        still_serving(b)
        assert b.stop() in b.clean_exit_codes
        b.start()
        assert [r.value for r in read_all(b.bootstrap, many, (249,))] == ["v249"]
        # Starve accept() of descriptors: connections past the limit wait in the listen backlog.
        before = len(b.log_text())
        socks = []
        try:
            for _ in range(1100):
                try:
                    socks.append(socket.create_connection(b.bootstrap.rsplit(":", 1), timeout=2))
                except OSError:
                    break
            time.sleep(4)
            starved = b.log_text()[before:]
            assert starved.count("out of system resource") <= 1, "an fd shortage floods the log"
        finally:
            for s_ in socks:
                s_.close()
        time.sleep(1.5)
        still_serving(b)
        with kafka_wire.connect(b.bootstrap) as conn:  # a descriptor shortage is no disk failure
            assert int(conn.produce(many, 0, kafka_wire.build_batch([(b"k", b"after")])).error_code) == 0
        assert "is offline" not in b.log_text()
    finally:
        b.close()


# -- misbehaving but well-formed clients -------------------------------------------------------------


@pytest.mark.timeout(60)
def test_stalled_partial_frame_does_not_block_others(shared_broker: ServerProcess) -> None:
    with kafka_wire.connect(shared_broker.bootstrap) as stalled:
        stalled.send_raw(b"\x00\x00")  # half a length prefix, then nothing
        for _ in range(5):
            start = time.monotonic()
            still_serving(shared_broker)
            assert time.monotonic() - start < 2.0


@pytest.mark.timeout(60)
def test_disconnect_mid_produce_appends_nothing(shared_broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("halfsent")
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        req = ProduceRequest(
            transactional_id=None,
            acks=i16(-1),
            timeout=datetime.timedelta(seconds=5),
            topic_data=(
                TopicProduceData(
                    name=topic,
                    partition_data=(
                        PartitionProduceData(index=i32(0), records=kafka_wire.build_batch([(b"k", b"v" * 5000)])),
                    ),
                ),
            ),
        )
        payload = conn.header_bytes(0, 9, True, 1) + kafka_wire.encode(req)
        frame = struct.pack(">i", len(payload)) + payload
        conn.send_raw(frame[: len(frame) // 2])
    time.sleep(0.5)
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert conn.list_offsets(topic, 0) == 0, "half a Produce request was appended"


@pytest.mark.timeout(90)
def test_client_that_never_reads_does_not_block_others(shared_broker: ServerProcess) -> None:
    """A client pipelines requests without reading the answers. The broker must stop reading
    from that connection at some bound (back-pressure, not an ever-growing queue of answers)
    and keep serving everyone else."""
    names = []
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        for i in range(20):  # make each Metadata request and answer a few hundred bytes or more
            names.append(kafka_wire.unique_topic(f"bulk{i}"))
            assert int(conn.create_topic(names[-1], 4)) == 0
    req = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    limit = 64 * 1024 * 1024
    request_size = len(kafka_wire.encode(req))
    greedy = kafka_wire.connect(shared_broker.bootstrap)
    try:
        greedy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        greedy.sock.settimeout(1.0)
        sent_bytes = 0
        blocked = False
        deadline = time.monotonic() + 40
        while sent_bytes < limit and time.monotonic() < deadline:
            try:
                greedy.send(req)
            except (TimeoutError, socket.timeout):
                blocked = True
                break
            sent_bytes += request_size
        assert blocked, f"broker kept reading {sent_bytes / 1e6:.0f} MB of requests whose answers nobody reads"
        # Others are still answered while the greedy connection's answers pile up (a blocked broker
        # would make these time out: kafka_wire's socket timeout, not a wall-clock bound here).
        for _ in range(5):
            still_serving(shared_broker)
    finally:
        greedy.close()
    still_serving(shared_broker)
    assert shared_broker.is_running()


@pytest.mark.timeout(90)
def test_many_connections(shared_broker: ServerProcess) -> None:
    conns = [kafka_wire.connect(shared_broker.bootstrap) for _ in range(150)]
    try:
        req = ApiVersionsRequest(client_software_name="m", client_software_version="1")
        ids = [c.send(req) for c in conns]
        for c, cid in zip(conns, ids):
            assert int(c.receive(ApiVersionsResponse, cid).error_code) == 0
    finally:
        for c in conns:
            c.close()
    still_serving(shared_broker)


# -- issue 8, item 9: memory and wire defects ---------------------------------------------------------


def _answered_within(conn: KafkaConnection, correlation_id: int, seconds: float) -> bool:
    """Whether an answer to `correlation_id` arrives on `conn` within `seconds`."""
    conn.sock.settimeout(seconds)
    try:
        frame = conn.recv_frame()
    except (TimeoutError, socket.timeout):
        return False
    finally:
        conn.sock.settimeout(kafka_wire.DEFAULT_TIMEOUT)
    assert struct.unpack_from(">i", frame)[0] == correlation_id
    return True


@pytest.mark.timeout(60)
@pytest.mark.broker_config({"connections.max.idle.ms": "1500"})
def test_a_stalled_frame_body_is_closed_after_the_idle_timeout(broker: ServerProcess) -> None:
    """Bytes stop in the middle of a frame's body: closed after connections.max.idle.ms of silence,
    as an idle connection is (before, the body was read with no timeout at all)."""
    with kafka_wire.connect(broker.bootstrap) as stalled:
        before = len(broker.log_text())
        payload = stalled.header_bytes(18, 3, True, 1) + b"\x05tests\x021\x00"
        stalled.send_raw(struct.pack(">i", len(payload)) + payload[:6])  # length, then part of the body
        assert stalled.is_closed_by_peer(15), "a frame whose body stalled was kept open"
        if broker.kind == "flotilla":
            assert "stalled" in broker.log_text()[before:]
    with kafka_wire.connect(broker.bootstrap) as busy:  # traffic keeps a connection open past the timeout
        for _ in range(6):
            time.sleep(0.5)
            assert int(busy.api_versions().error_code) == 0


@pytest.mark.timeout(60)
@pytest.mark.flotilla_only("checks Flotilla's stop: Kafka logs no per-connection traceback either")
def test_sigterm_with_clients_connected_logs_no_traceback(broker: ServerProcess) -> None:
    conns = [kafka_wire.connect(broker.bootstrap) for _ in range(5)]
    try:
        for c in conns[:3]:
            assert int(c.api_versions().error_code) == 0
        conns[3].send_raw(b"\x00\x00")  # half a length prefix
        conns[4].send_raw(struct.pack(">i", 100) + b"\x00\x12")  # part of a frame
        time.sleep(0.3)
        before = len(broker.log_text())
        code = broker.stop()
        assert code in broker.clean_exit_codes, f"exit code {code}"
        new = broker.log_text()[before:]
        assert "Traceback" not in new and "CancelledError" not in new, new[-3000:]
        assert "shutdown complete" in new
    finally:
        for c in conns:
            c.close()


@pytest.mark.timeout(60)
@pytest.mark.broker_config({"socket.request.max.bytes": "1048576", "queued.max.request.bytes": "1048576"})
def test_queued_max_request_bytes_stops_reading_until_memory_is_freed(broker: ServerProcess) -> None:
    """One connection announces a frame as large as the whole pool and sends it slowly: the broker
    reads nothing more from anyone until that frame is handled (Kafka's back-pressure)."""
    with kafka_wire.connect(broker.bootstrap) as big, kafka_wire.connect(broker.bootstrap) as other:
        assert int(other.api_versions().error_code) == 0
        big.send_raw(struct.pack(">i", 1048576) + b"\x00\x03\x00\x01")  # Metadata v1 header begins
        time.sleep(0.5)
        req = kafka_wire.encode_request_frame(other, 18, 0, 41)
        other.send_raw(req)
        assert not _answered_within(other, 41, 2.0), "answered while the pool was held by a pending frame"
        if broker.metrics_url:
            import urllib.request

            with urllib.request.urlopen(broker.metrics_url, timeout=5) as resp:
                lines = resp.read().decode().splitlines()
            used = [float(l.split()[1]) for l in lines if l.startswith("flotilla_request_memory_used_bytes ")]
            assert used == [1048576.0], used
        big.close()  # the pending frame is dropped: its memory returns to the pool
        assert _answered_within(other, 41, 10.0), "the broker never read the waiting request"
        still_serving(broker, other)


@pytest.mark.timeout(60)
def test_acks_0_produce_error_closes_the_connection(shared_broker: ServerProcess) -> None:
    """acks=0 gets no answer, so an error closes the connection and the producer refreshes its
    metadata (KafkaApis.handleProduceRequest does the same)."""
    with kafka_wire.connect(shared_broker.bootstrap) as good, kafka_wire.connect(shared_broker.bootstrap) as conn:
        topic = kafka_wire.unique_topic("acks0")
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)  # else a not-yet-led partition's error closes the connection
        conn.produce(topic, 0, kafka_wire.build_batch([(b"k", b"v")]), acks=0)
        assert int(conn.api_versions().error_code) == 0, "a good acks=0 produce must keep the connection"
        conn.produce(topic, 7, kafka_wire.build_batch([(b"k", b"v")]), acks=0)  # no partition 7
        assert conn.is_closed_by_peer(10), "an acks=0 produce error left the connection open"
        still_serving(shared_broker, good)
        assert good.list_offsets(topic, 0) == 1


@pytest.mark.timeout(60)
def test_metadata_v10_with_a_null_topic_name_is_an_invalid_request(shared_broker: ServerProcess) -> None:
    """Topic ids and null names are for v12+; Kafka's handler refuses them with INVALID_REQUEST
    for each requested topic and keeps the connection."""
    from kio.schema.metadata.v10.request import MetadataRequest as MetadataRequestV10
    from kio.schema.metadata.v10.request import MetadataRequestTopic as MetadataRequestTopicV10
    from kio.schema.metadata.v10.response import MetadataResponse as MetadataResponseV10

    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        req = MetadataRequestV10(topics=(MetadataRequestTopicV10(topic_id=None, name=None),),
                                 allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                 include_topic_authorized_operations=False)
        resp = conn.request(req)
        assert isinstance(resp, MetadataResponseV10)
        assert [int(t.error_code) for t in resp.topics] == [42]
        assert int(conn.api_versions().error_code) == 0


@pytest.mark.timeout(60)
def test_unknown_tagged_field_is_ignored(shared_broker: ServerProcess) -> None:
    """A newer client may send tagged fields this broker's schema lacks: Kafka keeps and ignores
    them, so the request is answered as if they were absent."""
    from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
    from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1

    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        body = b"\x00" + b"\x00" + b"\x00" + b"\x01" + bytes([99, 2]) + b"zz"  # all topics, two bools, tag 99
        conn.send_frame(conn.header_bytes(3, 12, True, 31) + body)
        frame = conn.recv_frame()
        header, offset = kafka_wire.decode(ResponseHeaderV1, frame)
        assert header.correlation_id == 31
        resp, _ = kafka_wire.decode(MetadataResponseV12, frame, offset)
        assert resp.brokers
