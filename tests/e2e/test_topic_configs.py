"""Topic configs are in force or refused: LogAppendTime, message.timestamp.after/before.max.ms,
min.insync.replicas with acks=all, INVALID_CONFIG naming an unknown key, and DescribeConfigs
types, sources, synonyms and documentation. Every test but the Flotilla-only one passes against
Apache Kafka too (`--kafka-target=apache`), with the same expectations."""

from __future__ import annotations

import datetime
import time

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32

from flotilla.testenv import kafka_wire

BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
DYNAMIC_TOPIC_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 3, 4, 5


def produce(conn, topic: str, batch: bytes, acks: int = -1):
    """Produce, retrying while the new topic's leader is not ready yet (Apache Kafka answers
    NOT_LEADER_OR_FOLLOWER for a moment after CreateTopics)."""
    deadline = time.monotonic() + 15
    while True:
        resp = conn.produce(topic, 0, batch, acks=acks)
        if resp.error_code != ErrorCode.not_leader_or_follower or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


def create(conn, name: str, configs: dict[str, str]) -> tuple[ErrorCode, str | None]:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest

    resp = conn.request(CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=i32(1), replication_factor=i16(1), assignments=(),
                               configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs.items())),),
        timeout=datetime.timedelta(seconds=10), validate_only=False))
    t = resp.topics[0]
    if t.error_code == ErrorCode.none:
        conn.wait_for_leaders(name, 1)
    return t.error_code, t.error_message


def describe_topic(conn, name: str, synonyms: bool, docs: bool):
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

    resp = conn.request(DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=i8(2), resource_name=name, configuration_keys=None),),
        include_synonyms=synonyms, include_documentation=docs))
    [result] = resp.results
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: c for c in result.configs}


def test_unknown_topic_config_is_refused_naming_the_key(broker):
    with kafka_wire.connect(broker.bootstrap) as conn:
        code, message = create(conn, kafka_wire.unique_topic("cfg"), {"retention.ms": "1000", "no.such.config": "1"})
        assert code == ErrorCode.invalid_config
        assert "no.such.config" in (message or "")
        code, message = create(conn, kafka_wire.unique_topic("cfg"), {"min.cleanable.dirty.ratio": "1.5"})
        assert code == ErrorCode.invalid_config and "min.cleanable.dirty.ratio" in (message or "")


@pytest.mark.flotilla_only("keys Apache Kafka implements and Flotilla refuses rather than ignores")
@pytest.mark.parametrize("key,value", [
    ("compression.type", "gzip"), ("file.delete.delay.ms", "1000"), ("segment.index.bytes", "4096"),
    ("local.retention.ms", "1000"), ("remote.storage.enable", "true"), ("preallocate", "true"),
    ("segment.jitter.ms", "100"),
    ("message.downconversion.enable", "false"), ("message.timestamp.difference.max.ms", "1000"),
])
def test_unimplemented_topic_configs_are_refused(broker, key, value):
    with kafka_wire.connect(broker.bootstrap) as conn:
        code, message = create(conn, kafka_wire.unique_topic("cfg"), {key: value})
        assert code == ErrorCode.invalid_config, f"{key}={value} was accepted"
        assert key in (message or "")
        # the value that describes what the broker does is fine where there is one
        if key == "preallocate":
            assert create(conn, kafka_wire.unique_topic("cfg"), {key: "false"})[0] == ErrorCode.none


def test_unclean_leader_election_is_a_topic_key_in_force(broker):
    """Replication (issue 11): the controller honours unclean.leader.election.enable per topic."""
    with kafka_wire.connect(broker.bootstrap) as conn:
        for value in ("true", "false"):
            assert create(conn, kafka_wire.unique_topic("cfg"), {"unclean.leader.election.enable": value})[0] == \
                ErrorCode.none
        code, message = create(conn, kafka_wire.unique_topic("cfg"), {"unclean.leader.election.enable": "maybe"})
        assert code == ErrorCode.invalid_config and "unclean.leader.election.enable" in (message or "")


def test_log_append_time_stamps_batches_with_the_broker_clock(broker):
    topic = kafka_wire.unique_topic("appendtime")
    old = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert create(conn, topic, {"message.timestamp.type": "LogAppendTime"})[0] == ErrorCode.none
        before = time.time() * 1000
        resp = produce(conn, topic, kafka_wire.build_batch([(b"k", b"v"), (b"k2", b"v2")], timestamp=old))
        after = time.time() * 1000
        assert resp.error_code == ErrorCode.none
        assert resp.log_append_time is not None
        stamped = resp.log_append_time.timestamp() * 1000
        assert before - 1000 <= stamped <= after + 1000
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "appendtime"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.timestamp())
    c.close()
    assert got == [(TIMESTAMP_LOG_APPEND_TIME, int(stamped))] * 2


def test_create_time_too_far_in_the_future_or_past_is_invalid_timestamp(broker):
    topic = kafka_wire.unique_topic("ts")
    now = datetime.datetime.now(datetime.timezone.utc)
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert create(conn, topic, {"message.timestamp.before.max.ms": "86400000"})[0] == ErrorCode.none
        # message.timestamp.after.max.ms defaults to one hour (Kafka 4)
        future = kafka_wire.build_batch([(b"k", b"v")], timestamp=now + datetime.timedelta(hours=2))
        assert produce(conn, topic, future).error_code == ErrorCode.invalid_timestamp
        past = kafka_wire.build_batch([(b"k", b"v")], timestamp=now - datetime.timedelta(days=2))
        assert produce(conn, topic, past).error_code == ErrorCode.invalid_timestamp
        fine = kafka_wire.build_batch([(b"k", b"v")], timestamp=now - datetime.timedelta(hours=2))
        resp = produce(conn, topic, fine)
        assert resp.error_code == ErrorCode.none and resp.base_offset == 0


def test_min_insync_replicas_is_capped_by_the_replication_factor(broker):
    """Kafka 4 checks acks=all against min(min.insync.replicas, replicas) (Partition.effectiveMinIsr),
    so a one-replica topic with min.insync.replicas=2 still takes acks=all writes; the setting
    is stored and reported, and bites once a topic has more replicas than its ISR."""
    topic = kafka_wire.unique_topic("minisr")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert create(conn, topic, {"min.insync.replicas": "2"})[0] == ErrorCode.none
        batch = kafka_wire.build_batch([(b"k", b"v")])
        resp = produce(conn, topic, batch, acks=-1)
        assert resp.error_code == ErrorCode.none and resp.base_offset == 0
        assert describe_topic(conn, topic, False, False)["min.insync.replicas"].value == "2"
        code, message = create(conn, kafka_wire.unique_topic("minisr"), {"min.insync.replicas": "0"})
        assert code == ErrorCode.invalid_config and "min.insync.replicas" in (message or "")


# (type, source) Apache Kafka 4.1 reports for a topic created with retention.ms and
# cleanup.policy set, on a broker started with this suite's settings.
EXPECTED = {
    "retention.ms": (LONG, DYNAMIC_TOPIC_CONFIG),
    "cleanup.policy": (LIST, DYNAMIC_TOPIC_CONFIG),
    "segment.bytes": (INT, DEFAULT_CONFIG),
    "segment.ms": (LONG, DEFAULT_CONFIG),
    "retention.bytes": (LONG, DEFAULT_CONFIG),
    "max.message.bytes": (INT, DEFAULT_CONFIG),
    "min.insync.replicas": (INT, DEFAULT_CONFIG),
    "message.timestamp.type": (STRING, DEFAULT_CONFIG),
    "min.cleanable.dirty.ratio": (DOUBLE, DEFAULT_CONFIG),
    "delete.retention.ms": (LONG, DEFAULT_CONFIG),
    "compression.type": (STRING, DEFAULT_CONFIG),
    "unclean.leader.election.enable": (BOOLEAN, DEFAULT_CONFIG),
    "flush.ms": (LONG, DEFAULT_CONFIG),
    "index.interval.bytes": (INT, DEFAULT_CONFIG),
}


def test_describe_configs_types_sources_synonyms_and_documentation(broker):
    topic = kafka_wire.unique_topic("described")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert create(conn, topic, {"retention.ms": "123456", "cleanup.policy": "compact"})[0] == ErrorCode.none
        plain = describe_topic(conn, topic, synonyms=False, docs=False)
        full = describe_topic(conn, topic, synonyms=True, docs=True)
    got = {k: (int(full[k].config_type), int(full[k].config_source)) for k in EXPECTED}
    # Apache Kafka 4's storage format writes a cluster-wide dynamic default of
    # min.insync.replicas (DYNAMIC_DEFAULT_BROKER_CONFIG, 3); Flotilla has no dynamic defaults.
    if got["min.insync.replicas"] == (INT, DYNAMIC_DEFAULT_BROKER_CONFIG):
        got["min.insync.replicas"] = (INT, DEFAULT_CONFIG)
    assert got == EXPECTED
    assert plain["retention.ms"].value == "123456" and plain["cleanup.policy"].value == "compact"
    assert plain["segment.bytes"].value == str(1024**3) and plain["compression.type"].value == "producer"
    assert not any(c.read_only for c in plain.values())
    # documentation and synonyms only when asked for
    assert all(c.documentation is None and not c.synonyms for c in plain.values())
    assert all(full[k].documentation for k in EXPECTED)
    # synonyms: the topic's own value first, then broker keys, in order of precedence
    for name in ("retention.ms", "cleanup.policy"):
        syn = full[name].synonyms
        assert (syn[0].name, syn[0].value, int(syn[0].source)) == (name, plain[name].value, DYNAMIC_TOPIC_CONFIG)
        assert all(int(s.source) in (STATIC_BROKER_CONFIG, DEFAULT_CONFIG) for s in syn[1:])
    cleanup = [(s.name, s.value, int(s.source)) for s in full["cleanup.policy"].synonyms]
    assert cleanup == [("cleanup.policy", "compact", DYNAMIC_TOPIC_CONFIG), ("log.cleanup.policy", "delete", DEFAULT_CONFIG)]
    seg = full["segment.bytes"].synonyms
    assert [(s.name, s.value, int(s.source)) for s in seg] == [("log.segment.bytes", str(1024**3), DEFAULT_CONFIG)]
    assert not full["flush.ms"].synonyms and full["flush.ms"].value == str(2**63 - 1)  # no broker value set


BROKER_EXPECTED = {
    "log.dirs": (STRING, STATIC_BROKER_CONFIG),
    "message.max.bytes": (INT, DEFAULT_CONFIG),
    "log.segment.bytes": (INT, DEFAULT_CONFIG),
    "log.cleanup.policy": (LIST, DEFAULT_CONFIG),
    "log.cleaner.min.cleanable.ratio": (DOUBLE, DEFAULT_CONFIG),
    "log.cleaner.enable": (BOOLEAN, DEFAULT_CONFIG),
    "compression.type": (STRING, DEFAULT_CONFIG),
    "log.flush.interval.ms": (LONG, DEFAULT_CONFIG),
}


def test_describe_broker_configs_types_and_sources(broker):
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

    with kafka_wire.connect(broker.bootstrap) as conn:
        node = conn.metadata([]).brokers[0].node_id
        resp = conn.request(DescribeConfigsRequest(
            resources=(DescribeConfigsResource(resource_type=i8(4), resource_name=str(node),
                                               configuration_keys=tuple(BROKER_EXPECTED)),),
            include_synonyms=True, include_documentation=False))
    [result] = resp.results
    assert result.error_code == ErrorCode.none
    got = {c.name: c for c in result.configs}
    assert {k: (int(c.config_type), int(c.config_source)) for k, c in got.items()} == BROKER_EXPECTED
    assert got["log.flush.interval.ms"].value is None and not got["log.flush.interval.ms"].synonyms
    assert [(s.name, int(s.source)) for s in got["log.cleanup.policy"].synonyms] == [("log.cleanup.policy", DEFAULT_CONFIG)]
    assert got["log.dirs"].synonyms[0].source == STATIC_BROKER_CONFIG
