"""DeleteRecords (KIP-107) on one broker, through Kafka's own tools and the client families:
confluent-kafka's AdminClient.delete_records, kafka-python's delete_records and
`kafka-delete-records.sh --offset-json-file` (the Java AdminClient, Kafka's DeleteRecordsCommand).
Each answer carries the low watermark (one replica: the new log start); ListOffsets earliest moves
there; an offset past the high watermark is refused OFFSET_OUT_OF_RANGE and -1 means the high
watermark; a consumer positioned below the new log start is refused OFFSET_OUT_OF_RANGE and resets
by its auto.offset.reset. Passes against Apache Kafka 4.1 too (`make interop-apache`).

Three brokers: tests/e2e/test_delete_records_fleet.py.
"""

from __future__ import annotations

import datetime
import importlib
import json
import subprocess

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv import kafka_wire
from tests.support.clients import ConfluentFamily, keyed_records
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.timeout(180)


def make_topic(bootstrap: str, prefix: str, records: int, **configs: str) -> str:
    topic = kafka_wire.unique_topic(prefix)
    with kafka_wire.connect(bootstrap) as conn:
        assert conn.create_topic(topic, 1, configs=configs) == ErrorCode.none
    ConfluentFamily().produce(bootstrap, topic, keyed_records(records), acks="all")
    return topic


def earliest(bootstrap: str, topic: str) -> int:
    with kafka_wire.connect(bootstrap) as conn:
        return conn.list_offsets(topic, 0, -2)


def latest(bootstrap: str, topic: str) -> int:
    with kafka_wire.connect(bootstrap) as conn:
        return conn.list_offsets(topic, 0, -1)


def delete_request(version: int, offsets: dict[tuple[str, int], int], timeout_ms: int = 10000):
    m = importlib.import_module(f"kio.schema.delete_records.v{version}.request")
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(m.DeleteRecordsPartition(partition_index=i32(partition), offset=i64(offset)))
    return m.DeleteRecordsRequest(topics=tuple(m.DeleteRecordsTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()),
                                  timeout=datetime.timedelta(milliseconds=timeout_ms))


def wire_delete(bootstrap: str, version: int, offsets: dict[tuple[str, int], int],
                timeout_ms: int = 10000) -> dict[tuple[str, int], tuple]:
    """{(topic, partition): (error code, low watermark)} of one DeleteRecords request."""
    with kafka_wire.connect(bootstrap, timeout=timeout_ms / 1000 + 30) as conn:
        resp = conn.request(delete_request(version, offsets, timeout_ms))
    return {(t.name, int(p.partition_index)): (ErrorCode(p.error_code), int(p.low_watermark))
            for t in resp.topics for p in t.partitions}


def fetch_at(bootstrap: str, topic: str, offset: int) -> tuple[ErrorCode, int]:
    """(error code, log_start_offset) of a consumer's Fetch (v11) of partition 0 from `offset`."""
    from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic

    req = FetchRequest(replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=100), min_bytes=i32(1),
                       max_bytes=i32(1 << 20), isolation_level=0, session_id=i32(0), session_epoch=i32(-1),
                       topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                           partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
                           log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
                       forgotten_topics_data=(), rack_id="")
    with kafka_wire.connect(bootstrap) as conn:
        p = conn.request(req).responses[0].partitions[0]
    return ErrorCode(p.error_code), int(p.log_start_offset)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_wire_versions_move_the_log_start_and_answer_the_low_watermark(broker, version):
    b = broker.bootstrap
    topic = make_topic(b, "dr-wire", 40)
    missing = kafka_wire.unique_topic("dr-missing")
    got = wire_delete(b, version, {(topic, 0): 15, (topic, 7): 3, (missing, 0): 1})
    assert got == {(topic, 0): (ErrorCode.none, 15),
                   (topic, 7): (ErrorCode.unknown_topic_or_partition, -1),
                   (missing, 0): (ErrorCode.unknown_topic_or_partition, -1)}
    assert earliest(b, topic) == 15
    assert fetch_at(b, topic, 15) == (ErrorCode.none, 15)  # Fetch's log_start_offset follows
    assert fetch_at(b, topic, 14)[0] == ErrorCode.offset_out_of_range
    # past the high watermark: refused, nothing moves
    assert wire_delete(b, version, {(topic, 0): 41}) == {(topic, 0): (ErrorCode.offset_out_of_range, -1)}
    # below the log start: nothing moves, and the answer is the low watermark as it is
    assert wire_delete(b, version, {(topic, 0): 5}) == {(topic, 0): (ErrorCode.none, 15)}
    # -1: up to the high watermark
    assert wire_delete(b, version, {(topic, 0): -1}) == {(topic, 0): (ErrorCode.none, 40)}
    assert earliest(b, topic) == latest(b, topic) == 40


def test_a_compacted_topic_refuses_with_policy_violation(broker):
    b = broker.bootstrap
    topic = make_topic(b, "dr-compact", 10, **{"cleanup.policy": "compact"})
    assert wire_delete(b, 2, {(topic, 0): 5}) == {(topic, 0): (ErrorCode.policy_violation, -1)}
    assert earliest(b, topic) == 0


def test_confluent_admin_client_delete_records(broker):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    b = broker.bootstrap
    topic = make_topic(b, "dr-confluent", 50)
    admin = AdminClient({"bootstrap.servers": b})
    futures = admin.delete_records([TopicPartition(topic, 0, 20)], request_timeout=30, operation_timeout=10)
    (deleted,) = [f.result(30) for f in futures.values()]
    assert deleted.low_watermark == 20
    assert earliest(b, topic) == 20
    from confluent_kafka import KafkaException

    futures = admin.delete_records([TopicPartition(topic, 0, 51)], request_timeout=30)
    with pytest.raises(KafkaException) as refused:
        [f.result(30) for f in futures.values()]
    assert refused.value.args[0].code() == ErrorCode.offset_out_of_range.value
    assert earliest(b, topic) == 20


def test_kafka_python_delete_records(broker):
    from kafka import KafkaAdminClient, TopicPartition

    b = broker.bootstrap
    topic = make_topic(b, "dr-kafka-python", 30)
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=30000)
    try:
        result = admin.delete_records({TopicPartition(topic, 0): 12}, timeout_ms=20000)
    finally:
        admin.close()
    assert result[TopicPartition(topic, 0)]["low_watermark"] == 12
    assert result[TopicPartition(topic, 0)]["error_code"] == 0
    assert earliest(b, topic) == 12


def test_kafka_delete_records_tool(broker, tmp_path):
    """kafka-delete-records.sh is `kafka-run-class.sh org.apache.kafka.tools.DeleteRecordsCommand`."""
    try:
        kafka_tools.ensure_libs()
    except kafka_tools.ToolsMissing as e:
        pytest.skip(str(e))
    b = broker.bootstrap
    topic = make_topic(b, "dr-java", 60)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 25}]}))
    out = subprocess.run(kafka_tools.command("DeleteRecordsCommand", "--bootstrap-server", b,
                                             "--offset-json-file", str(offsets)),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert f"partition: {topic}-0\tlow_watermark: 25" in out.stdout, out.stdout
    assert earliest(b, topic) == 25


def _consume_first(bootstrap: str, topic: str, start: int, reset: str, produce_after=None):
    """The first message (or error) a confluent-kafka consumer gets, assigned at `start`."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": kafka_wire.unique_topic("dr-group"),
                  "enable.auto.commit": False, "auto.offset.reset": reset})
    try:
        c.assign([TopicPartition(topic, 0, start)])
        seen: list = []

        def first() -> bool:
            msg = c.poll(0.5)
            if msg is not None:
                seen.append(msg)
            elif produce_after is not None and not seen:
                produce_after()
            return bool(seen)

        wait_for(f"a message or error from {topic} at offset {start} (auto.offset.reset={reset})", first,
                 timeout=60, interval=0)
        return seen[0]
    finally:
        c.close()


def test_a_consumer_below_the_log_start_resets_by_its_policy(broker):
    b = broker.bootstrap
    topic = make_topic(b, "dr-consumer", 40)
    assert wire_delete(b, 2, {(topic, 0): 30}) == {(topic, 0): (ErrorCode.none, 30)}

    refused = _consume_first(b, topic, 10, "error")  # no reset: the broker's OFFSET_OUT_OF_RANGE surfaces
    assert refused.error() is not None and "out of range" in refused.error().str().lower(), refused.error()

    msg = _consume_first(b, topic, 10, "earliest")
    assert msg.error() is None and msg.offset() == 30

    produced = []

    def produce_one() -> None:
        if not produced:
            produced.append(ConfluentFamily().produce(b, topic, [("late", "after the reset")])[0])

    msg = _consume_first(b, topic, 10, "latest", produce_after=produce_one)
    assert msg.error() is None and msg.offset() == 40 and msg.value() == b"after the reset"


@pytest.mark.flotilla_only("Flotilla checkpoints the log start before answering and exports it; Kafka checkpoints periodically")
def test_the_new_log_start_is_checkpointed_before_the_answer_and_exported(broker):
    from broker.log.checkpoints import LOG_START_OFFSET, read_checkpoint
    from tests.support.prometheus import metric

    b = broker.bootstrap
    topic = make_topic(b, "dr-checkpoint", 30)
    assert wire_delete(b, 2, {(topic, 0): 17}) == {(topic, 0): (ErrorCode.none, 17)}
    assert read_checkpoint(broker.log_dirs / LOG_START_OFFSET)[(topic, 0)] == 17  # no waiting: already written
    assert metric(broker.metrics_url, "flotilla_log_start_offset", topic=topic, partition="0") == 17
    broker.kill9()  # a crash right after the answer keeps it
    broker.start()
    assert earliest(broker.bootstrap, topic) == 17


def segment_files(broker, topic: str) -> dict[int, int]:
    """Base offset -> bytes of each segment file of partition 0 (Kafka's `<base>.log`; a file Kafka
    renamed to `.log.deleted` before removing it is gone already)."""
    return {int(p.stem): p.stat().st_size for p in (broker.log_dirs / f"{topic}-0").glob("*.log")}


@pytest.mark.broker_config({"log.retention.check.interval.ms": "300"})
def test_whole_segments_below_the_log_start_leave_the_disk(broker):
    b = broker.bootstrap
    topic = kafka_wire.unique_topic("dr-disk")
    with kafka_wire.connect(b) as conn:  # 1 MiB: the smallest segment.bytes Kafka 4.1 takes
        assert conn.create_topic(topic, 1, configs={"segment.bytes": str(1 << 20)}) == ErrorCode.none
    ConfluentFamily().produce(b, topic, keyed_records(3600, size=1000), acks="all")
    before = segment_files(broker, topic)
    bases = sorted(before)
    assert len(bases) >= 4, before
    cut = bases[2] + 5  # inside the third segment: the first two are wholly below it
    assert wire_delete(b, 2, {(topic, 0): cut}) == {(topic, 0): (ErrorCode.none, cut)}
    after = wait_for(f"the segments of {topic}-0 below {bases[2]} deleted", lambda: segment_files(broker, topic),
                     timeout=60, until=lambda files: sorted(files) == bases[2:])
    assert sum(after.values()) == sum(before[base] for base in bases[2:])  # the partition's disk usage fell by theirs
    assert earliest(b, topic) == cut
    # the segment holding the new log start stays, and reads from it start at the log start
    msg = _consume_first(b, topic, cut, "error")
    assert msg.error() is None and msg.offset() == cut
