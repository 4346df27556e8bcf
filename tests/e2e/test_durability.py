"""Durability: what the broker acknowledged survives a restart, a kill -9, and a torn log tail.

A kill -9 is a process crash, not a power loss: the machine keeps running, so everything the broker
wrote reaches the page cache and is read back after the restart whether it was fsynced or not.
These tests show that recovery finds and keeps acknowledged data after a crash (a torn tail is
written by hand, standing in for a write the crash cut short); they do not show what survives
losing the machine, which depends on fsync (log.flush.interval.*, off by default as in Kafka,
whose answer to power loss is replication)."""

from __future__ import annotations

import os
import re
import struct
import threading
import time
from pathlib import Path

import pytest

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import ServerProcess
from tests.support.clients import ConfluentFamily, Rec, keyed_records
from tests.support.verify import high_watermarks, read_all


def create(broker: ServerProcess, partitions: int, prefix: str) -> str:
    topic = kafka_wire.unique_topic(prefix)
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, partitions)) == 0
    return topic


@pytest.mark.timeout(180)
def test_graceful_restart_reads_everything_back(broker: ServerProcess) -> None:
    topic = create(broker, 3, "restart")
    sent = keyed_records(900, keys=17, prefix="r", size=200)
    delivered = ConfluentFamily().produce(broker.bootstrap, topic, sent, compression="lz4", acks="all")
    before = high_watermarks(broker.bootstrap, topic, range(3))
    code = broker.stop()
    assert code in broker.clean_exit_codes, f"broker exited {code} on SIGTERM"
    broker.start()
    assert high_watermarks(broker.bootstrap, topic, range(3)) == before
    got = read_all(broker.bootstrap, topic, range(3))
    assert sorted(got) == sorted(delivered)
    # And the log takes new appends after the old end.
    more = ConfluentFamily().produce(broker.bootstrap, topic, [("key-0", "after-restart")], acks="all")
    assert more[0].offset == before[more[0].partition]


class AckRecorder:
    """A confluent-kafka producer (acks=1) in a thread, recording every acknowledged record."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Producer

        self.topic = topic
        self.acked: list[Rec] = []
        self.failed = 0
        self.sent = 0
        self.stop_flag = threading.Event()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": 1,
                "linger.ms": 2,
                "message.timeout.ms": 4000,
                "partitioner": "murmur2_random",
                "enable.idempotence": False,
                "retries": 0,
                "reconnect.backoff.max.ms": 500,
            }
        )
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_delivery(self, err: object, msg: object) -> None:
        if err is not None:
            self.failed += 1
        else:
            self.acked.append(Rec(msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))  # type: ignore[attr-defined]

    def run(self) -> None:
        i = 0
        while not self.stop_flag.is_set():
            try:
                self.producer.produce(
                    self.topic, key=f"key-{i % 5}".encode(), value=f"m-{i:08d}".encode(), on_delivery=self.on_delivery
                )
                self.sent += 1
                i += 1
            except BufferError:
                pass
            self.producer.poll(0 if i % 50 else 0.001)
        self.producer.flush(10)

    def start(self) -> None:
        self.thread.start()

    def wait_acked(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < n:
            assert time.monotonic() < deadline, f"only {len(self.acked)} records acknowledged in {timeout}s"
            time.sleep(0.05)

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "producer thread did not stop"


@pytest.mark.timeout(240)
def test_kill9_mid_stream_keeps_every_acknowledged_record(broker: ServerProcess) -> None:
    """A process crash (the page cache survives it, see the module docstring) in the middle of an
    acks=1 stream: every acknowledged record is back at its offset, without holes or duplicates."""
    topic = create(broker, 2, "kill9")
    rec = AckRecorder(broker.bootstrap, topic)
    rec.start()
    try:
        rec.wait_acked(3000, 60)
        broker.kill9()  # while the producer is still sending
    finally:
        rec.stop()
    acked = list(rec.acked)
    assert len(acked) >= 3000
    broker.start()
    got = read_all(broker.bootstrap, topic, (0, 1))
    by_pos = {(r.partition, r.offset): r for r in got}
    lost = [a for a in acked if by_pos.get((a.partition, a.offset)) != a]
    assert not lost, f"{len(lost)} acknowledged records lost or changed after kill -9, e.g. {lost[:3]}"
    for p in (0, 1):
        offsets = [r.offset for r in got if r.partition == p]
        assert offsets == list(range(len(offsets))), f"partition {p}: log has holes after recovery"
    values = [r.value for r in got]
    assert len(values) == len(set(values)), "records duplicated by recovery"
    # Still writable, at the recovered end.
    ends = high_watermarks(broker.bootstrap, topic, (0, 1))
    new = ConfluentFamily().produce(broker.bootstrap, topic, [("key-1", "after-crash")], acks="all")
    assert new[0].offset == ends[new[0].partition]


def last_segment(log_dirs: Path, topic: str, partition: int) -> Path:
    segments = sorted((log_dirs / f"{topic}-{partition}").glob("*.log"))
    assert segments, f"no segment files in {log_dirs / f'{topic}-{partition}'}"
    return segments[-1]


def torn_tail(kind: str) -> bytes:
    if kind == "garbage":
        return os.urandom(3000)
    if kind == "half-batch":
        batch = kafka_wire.build_batch([(b"torn", b"x" * 400)] * 5)
        return batch[: len(batch) // 2]
    if kind == "bad-crc-batch":
        # A complete batch whose CRC does not match: the tail of an interrupted overwrite.
        return kafka_wire.with_bad_crc(kafka_wire.build_batch([(b"torn", b"y" * 100)]))
    raise ValueError(kind)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["garbage", "half-batch", "bad-crc-batch"])
@pytest.mark.parametrize(
    "shutdown",
    [
        pytest.param("kill9", id="after-crash"),
        pytest.param(
            "sigterm",
            id="after-clean-stop",
            marks=pytest.mark.flotilla_only("Apache Kafka trusts its clean-shutdown marker and skips recovery"),
        ),
    ],
)
@pytest.mark.broker_config({"log.segment.bytes": "1048576"})
def test_torn_tail_is_truncated_at_startup(broker: ServerProcess, kind: str, shutdown: str) -> None:
    topic = create(broker, 1, "torn")
    sent = keyed_records(12000, keys=3, prefix="torn", size=150)  # about 2 MiB: several 1 MiB segments
    delivered = ConfluentFamily().produce(broker.bootstrap, topic, sent, acks="all")
    if shutdown == "kill9":
        broker.kill9()
    else:
        assert broker.stop() in broker.clean_exit_codes
    segment = last_segment(broker.log_dirs, topic, 0)
    size_before = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(torn_tail(kind))
    broker.start()
    assert broker.is_running()
    got = read_all(broker.bootstrap, topic, (0,))
    assert got == sorted(delivered), "records before the torn tail are not all readable"
    assert high_watermarks(broker.bootstrap, topic, (0,)) == {0: len(sent)}
    new = ConfluentFamily().produce(broker.bootstrap, topic, [("key-0", "after-repair")], acks="all")
    assert new[0].offset == len(sent)
    assert read_all(broker.bootstrap, topic, (0,))[-1].value == "after-repair"
    if segment.exists():
        assert segment.stat().st_size >= size_before, "recovery truncated acknowledged data"


@pytest.mark.timeout(180)
def test_committed_offsets_survive_kill9(broker: ServerProcess) -> None:
    """An acknowledged OffsetCommit is as durable as an acknowledged record (across a process
    crash: see the module docstring)."""
    topic = create(broker, 2, "commit-crash")
    group = f"g-{os.urandom(4).hex()}"
    fam = ConfluentFamily()
    sent = keyed_records(40, keys=4, prefix="cc")
    fam.produce(broker.bootstrap, topic, sent, acks="all")
    first = fam.consume_and_commit(broker.bootstrap, topic, group, 25)
    committed: dict[int, int] = {}
    for r in first:
        committed[r.partition] = max(committed.get(r.partition, 0), r.offset + 1)
    broker.kill9()
    broker.start()
    with fam.consumer(broker.bootstrap, topic, group=group, offset_reset="earliest") as c:
        c.take(len(sent) - 25)
        c.settle(1.0)
        rest = list(c.records)
    for r in rest:
        assert r.offset >= committed.get(r.partition, 0), f"{r} was consumed before the crash and committed"
    assert sorted((r.key, r.value) for r in first + rest) == sorted(sent)


@pytest.mark.timeout(180)
def test_topic_changes_survive_restart(broker: ServerProcess) -> None:
    """Created, grown and deleted topics are remembered across a kill -9 and a restart."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    grown = create(broker, 2, "grown")
    doomed = create(broker, 1, "doomed")
    ConfluentFamily().produce(broker.bootstrap, doomed, [("k", "old-data")])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(grown, 5)], request_timeout=30)[grown].result(timeout=30)
    admin.delete_topics([doomed], operation_timeout=20, request_timeout=30)[doomed].result(timeout=30)
    del admin
    broker.kill9()
    broker.start()
    with kafka_wire.connect(broker.bootstrap) as conn:
        md = {t.name: t for t in conn.metadata([grown, doomed]).topics}
        assert int(md[grown].error_code) == 0 and len(md[grown].partitions) == 5
        assert int(md[doomed].error_code) == 3, f"deleted topic came back: {md[doomed].error_code!r}"
        # The name can be reused, and starts empty.
        assert int(conn.create_topic(doomed, 1)) == 0
    deadline = time.monotonic() + 20
    while True:
        try:
            ends = high_watermarks(broker.bootstrap, doomed, (0,))
            break
        except RuntimeError:  # leader not yet known right after creation
            assert time.monotonic() < deadline
            time.sleep(0.3)
    assert ends == {0: 0}, "a re-created topic still holds the deleted topic's records"


def batch_at(segment: Path, position: int) -> tuple[int, int]:
    """(file position, base offset) of the batch holding byte `position` of a segment file."""
    data = segment.read_bytes()
    pos = 0
    while pos < len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > position:
            return pos, base_offset
        pos += 12 + length
    raise AssertionError(f"position {position} is past the end of {segment}")


@pytest.mark.timeout(180)
@pytest.mark.flotilla_only("white-box: removes the recovery-point checkpoint to make the broker re-check old segments")
@pytest.mark.broker_config({"log.segment.bytes": "1048576"})
def test_corrupt_older_segment_ends_the_log_there(broker: ServerProcess) -> None:
    """As Kafka's log loader: the log ends at the first invalid batch, later segments are deleted
    (not kept behind a hole in the offsets), and the broker says so."""
    topic = create(broker, 1, "corrupt-mid")
    sent: list[tuple[str, str]] = []
    with kafka_wire.connect(broker.bootstrap) as conn:
        for i in range(600):  # small batches (20 records, about 4.5 KiB), about 2.7 MiB: three segments
            batch = [(f"k{i % 7}", f"v{i:04d}-{j:02d}-" + "x" * 200) for j in range(20)]
            resp = conn.produce(topic, 0, kafka_wire.build_batch([(k.encode(), v.encode()) for k, v in batch]))
            assert int(resp.error_code) == 0
            sent += batch
    broker.kill9()
    segments = sorted((broker.log_dirs / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 3
    # A crash before the first recovery-point checkpoint: every segment is re-checked.
    (broker.log_dirs / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    middle = segments[0].stat().st_size // 2
    pos, cut_offset = batch_at(segments[0], middle)
    assert cut_offset > 1000
    with open(segments[0], "r+b") as f:
        f.seek(pos + 70)  # inside the records: the CRC no longer matches
        f.write(bytes([f.read(1)[0] ^ 0xFF]))
    before = len(broker.log_text())
    broker.start()
    assert high_watermarks(broker.bootstrap, topic, (0,)) == {0: cut_offset}
    got = read_all(broker.bootstrap, topic, (0,))
    assert [r.offset for r in got] == list(range(cut_offset)), "the log has a hole after recovery"
    assert [(r.key, r.value) for r in got] == sent[:cut_offset]
    assert sorted((broker.log_dirs / f"{topic}-0").glob("*.log")) == segments[:1]
    new_log = broker.log_text()[before:]
    assert "deleted" in new_log and re.search(rf"ends at offset {cut_offset}\b", new_log), new_log[-2000:]
    new = ConfluentFamily().produce(broker.bootstrap, topic, [("key-0", "after-repair")], acks="all")
    assert new[0].offset == cut_offset


@pytest.mark.timeout(120)
@pytest.mark.flotilla_only("Flotilla's log lines; Apache Kafka's marker is the same file")
def test_clean_shutdown_marker(broker: ServerProcess) -> None:
    """A clean stop leaves Kafka's .kafka_cleanshutdown marker, so the next start trusts the
    active segments; the start removes it, so a crash afterwards recovers them again."""
    topic = create(broker, 2, "marker")
    ConfluentFamily().produce(broker.bootstrap, topic, keyed_records(200, keys=4, prefix="mk"), acks="all")
    marker = broker.log_dirs / ".kafka_cleanshutdown"
    assert not marker.exists(), "the marker must not exist while the broker runs"
    assert broker.stop() in broker.clean_exit_codes
    assert marker.exists(), "a clean stop did not write the clean-shutdown marker"
    before = len(broker.log_text())
    broker.start()
    assert not marker.exists(), "the marker survived start-up: a crash now would skip recovery"
    assert "after a clean shutdown" in broker.log_text()[before:]
    broker.kill9()
    assert not marker.exists()
    before = len(broker.log_text())
    broker.start()
    assert "recovering segments not known to be flushed" in broker.log_text()[before:]
    assert high_watermarks(broker.bootstrap, topic, (0, 1)) and sum(high_watermarks(broker.bootstrap, topic, (0, 1)).values()) == 200
