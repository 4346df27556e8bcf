"""OffsetForLeaderEpoch (API 23) over the wire with kio, at every version Kafka 4.1 serves (2-4):
the end offset of the leader's current epoch is the log end, an epoch past every known one is
UNDEFINED, a current_leader_epoch newer than the leader's is UNKNOWN_LEADER_EPOCH, an unknown
partition UNKNOWN_TOPIC_OR_PARTITION. Runs against Apache Kafka too (`--kafka-target=apache`)."""

from __future__ import annotations

import importlib

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from flotilla.testenv import kafka_wire

VERSIONS = (2, 3, 4)


def offset_for_leader_epoch(conn, version: int, topic: str, partition: int, leader_epoch: int,
                            current_leader_epoch: int = -1):
    req = importlib.import_module(f"kio.schema.offset_for_leader_epoch.v{version}.request")
    extra = {"replica_id": i32(-1)} if version >= 3 else {}
    resp = conn.request(req.OffsetForLeaderEpochRequest(**extra, topics=(req.OffsetForLeaderTopic(
        topic=topic, partitions=(req.OffsetForLeaderPartition(
            partition=i32(partition), current_leader_epoch=i32(current_leader_epoch),
            leader_epoch=i32(leader_epoch)),)),)))
    [t] = resp.topics
    [p] = t.partitions
    assert t.topic == topic and int(p.partition) == partition
    return p.error_code, int(p.leader_epoch), int(p.end_offset)


def test_advertised_versions(broker):
    with kafka_wire.connect(broker.bootstrap) as conn:
        keys = {int(k.api_key): k for k in conn.api_versions().api_keys}
    assert 23 in keys
    assert int(keys[23].min_version) <= 2 and int(keys[23].max_version) == 4


@pytest.mark.parametrize("version", VERSIONS)
def test_end_offsets_from_the_leader_epoch_cache(broker, version):
    topic = kafka_wire.unique_topic("olep")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == ErrorCode.none
        for n in (2, 3, 1):
            resp = conn.produce(topic, 0, kafka_wire.build_batch([(None, b"v%d" % i) for i in range(n)]))
            assert resp.error_code == ErrorCode.none
        [p] = conn.metadata([topic]).topics[0].partitions
        epoch = int(p.leader_epoch)
        assert epoch >= 0

        # the current epoch ends at the log end, with or without current_leader_epoch
        assert offset_for_leader_epoch(conn, version, topic, 0, epoch) == (ErrorCode.none, epoch, 6)
        assert offset_for_leader_epoch(conn, version, topic, 0, epoch, epoch) == (ErrorCode.none, epoch, 6)
        # an epoch no leader has had yet: undefined
        assert offset_for_leader_epoch(conn, version, topic, 0, epoch + 5, epoch) == (ErrorCode.none, -1, -1)
        # the client knows a newer leader than this broker
        code, _, _ = offset_for_leader_epoch(conn, version, topic, 0, epoch, epoch + 1)
        assert code == ErrorCode.unknown_leader_epoch
        # no such partition
        code, _, _ = offset_for_leader_epoch(conn, version, topic, 7, epoch)
        assert code == ErrorCode.unknown_topic_or_partition


def read_epoch_file(broker, topic: str) -> list[tuple[int, int]]:
    lines = (broker.log_dirs / f"{topic}-0" / "leader-epoch-checkpoint").read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2, lines
    return [(int(e), int(o)) for e, o in (line.split() for line in lines[2:])]


def leader_epoch(conn, topic: str) -> int:
    [p] = conn.metadata([topic]).topics[0].partitions
    return int(p.leader_epoch)


def test_leader_epoch_checkpoint_file_survives_a_restart(broker):
    """The partition directory holds Kafka's leader-epoch-checkpoint (version, count, "epoch
    startOffset" lines); after a restart (which may bring a new leader epoch) the epochs before it
    still end where they did."""
    topic = kafka_wire.unique_topic("olep-file")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == ErrorCode.none
        for n in (2, 3):
            assert conn.produce(topic, 0, kafka_wire.build_batch(
                [(None, b"v%d" % i) for i in range(n)])).error_code == ErrorCode.none
        first = leader_epoch(conn, topic)
    assert read_epoch_file(broker, topic) == [(first, 0)]
    broker.restart()
    with kafka_wire.connect(broker.bootstrap) as conn:
        conn.wait_for_leaders(topic, 1)
        now = leader_epoch(conn, topic)
        assert conn.produce(topic, 0, kafka_wire.build_batch([(None, b"after")])).error_code == ErrorCode.none
        entries = read_epoch_file(broker, topic)
        assert entries[0] == (first, 0) and entries[-1][0] == now
        if now > first:
            assert entries[-1] == (now, 5)
            assert offset_for_leader_epoch(conn, 4, topic, 0, first) == (ErrorCode.none, first, 5)
        assert offset_for_leader_epoch(conn, 4, topic, 0, now) == (ErrorCode.none, now, 6)


def test_java_consumer_validates_a_seek_with_an_epoch(broker):
    """The Java consumer checks a position that carries a leader epoch with OffsetForLeaderEpoch
    before fetching: within the epoch it consumes from there; past the epoch's end offset it
    reports log truncation (LogTruncationException with auto.offset.reset=none)."""
    import json

    from tests.support import java_client

    topic = kafka_wire.unique_topic("olep-java")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == ErrorCode.none
        assert conn.produce(topic, 0, kafka_wire.build_batch(
            [(None, b"v%d" % i) for i in range(5)])).error_code == ErrorCode.none
        epoch = leader_epoch(conn, topic)

    def seek(offset: int) -> dict:
        out = java_client.run("seek-epoch", "--bootstrap", broker.bootstrap, "--topic", topic,
                              "--offset", str(offset), "--epoch", str(epoch))
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert seek(3) == {"first_offset": 3}
    assert seek(10) == {"error": "LogTruncationException"}
