"""Changing a live topic's configs: IncrementalAlterConfigs (what `kafka-configs.sh --alter` and
AdminClient.incrementalAlterConfigs send) and the legacy AlterConfigs, through real clients and
the wire; the change is in force on the running partition, and bad requests get Kafka's errors.
Passes against Apache Kafka too (`--kafka-target=apache`), with the same expectations."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from tests.e2e.test_topic_configs import DYNAMIC_TOPIC_CONFIG, create, describe_topic
from flotilla.testenv import kafka_wire
from flotilla.testenv.waiting import wait_for

TOPIC = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def incremental(conn, topic: str, *ops: tuple[str, int, str | None], validate_only: bool = False,
                resource_type: int = TOPIC):
    from kio.schema.incremental_alter_configs.v1.request import (AlterableConfig, AlterConfigsResource,
                                                                  IncrementalAlterConfigsRequest)

    resp = conn.request(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=i8(resource_type), resource_name=topic,
        configs=tuple(AlterableConfig(name=n, config_operation=i8(op), value=v) for n, op, v in ops)),),
        validate_only=validate_only))
    [r] = resp.responses
    return r.error_code, r.error_message


def in_force(conn, topic: str) -> dict[str, tuple[str, int]]:
    return {name: (c.value, c.config_source) for name, c in describe_topic(conn, topic, False, False).items()}


def test_incremental_set_append_subtract_delete_as_kafka_configs_does(broker):
    topic = kafka_wire.unique_topic("alter")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert create(conn, topic, {})[0] == ErrorCode.none
        default_retention = in_force(conn, topic)["retention.ms"]
        assert default_retention[1] != DYNAMIC_TOPIC_CONFIG

        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ])
        for fut in admin.incremental_alter_configs([resource]).values():
            fut.result(timeout=30)
        now = wait_for("the SET and APPEND", lambda: (c := in_force(conn, topic))["retention.ms"][0] == "123456"
                         and c, timeout=15)
        assert now["retention.ms"] == ("123456", DYNAMIC_TOPIC_CONFIG)
        policy, source = now["cleanup.policy"]
        assert set(policy.split(",")) == {"delete", "compact"} and source == DYNAMIC_TOPIC_CONFIG  # appended to the default

        assert incremental(conn, topic, ("cleanup.policy", SUBTRACT, "delete"),
                           ("retention.ms", DELETE, None)) == (ErrorCode.none, None)
        now = wait_for("the SUBTRACT and DELETE", lambda: (c := in_force(conn, topic))["cleanup.policy"][0]
                         == "compact" and c, timeout=15)
        assert now["retention.ms"] == default_retention  # back to the broker's value
        # validate_only changes nothing
        assert incremental(conn, topic, ("retention.ms", SET, "999"), validate_only=True)[0] == ErrorCode.none
        time.sleep(0.5)
        assert in_force(conn, topic)["retention.ms"] == default_retention


def test_a_changed_config_is_in_force_on_the_live_partition(broker):
    """message.timestamp.type switched to LogAppendTime: the next record a client produces carries
    the broker's clock, not its own, without restarting anything."""
    topic = kafka_wire.unique_topic("alter-live")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert create(conn, topic, {})[0] == ErrorCode.none
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    old_ms = int(time.time() * 1000) - 30 * 60 * 1000  # half an hour ago: allowed, and recognisable
    producer.produce(topic, b"before", timestamp=old_ms)
    producer.flush(30)
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert incremental(conn, topic, ("message.timestamp.type", SET, "LogAppendTime")) == (ErrorCode.none, None)
        wait_for("LogAppendTime in force",
                   lambda: in_force(conn, topic)["message.timestamp.type"][0] == "LogAppendTime", timeout=15)
        # The partition itself applies it: a Produce answer carries the log append time (-1 before).
        wait_for("a Produce answer with a log append time",
                 lambda: conn.produce(topic, 0, kafka_wire.build_batch([(None, b"probe")])),
                 until=lambda answer: answer.error_code == ErrorCode.none and answer.log_append_time is not None,
                 timeout=15)
    producer.produce(topic, b"after", timestamp=old_ms)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": kafka_wire.unique_topic("g"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = {}
    deadline = time.monotonic() + 30
    while not {b"before", b"after"} <= got.keys() and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got[m.value()] = m.timestamp()
    consumer.close()
    assert got[b"before"] == (TIMESTAMP_CREATE_TIME, old_ms)
    kind, ts = got[b"after"]
    assert kind == TIMESTAMP_LOG_APPEND_TIME and ts > old_ms + 25 * 60 * 1000


def legacy(conn, topic: str, configs: dict[str, str]):
    from kio.schema.alter_configs.v2.request import AlterableConfig, AlterConfigsRequest, AlterConfigsResource

    resp = conn.request(AlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=i8(TOPIC), resource_name=topic,
        configs=tuple(AlterableConfig(name=k, value=v) for k, v in configs.items())),), validate_only=False))
    [r] = resp.responses
    return r.error_code, r.error_message


def test_legacy_alter_configs_replaces_the_whole_set(broker):
    """AlterConfigs (key 33): keys left out return to the broker's value. kafka-python's admin,
    told to use it, re-sends the topic's other dynamic keys itself, so they stay."""
    from kafka.admin import ConfigResource as KPConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    topic = kafka_wire.unique_topic("alter-legacy")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert create(conn, topic, {"retention.ms": "7777"})[0] == ErrorCode.none
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.alter_configs([KPConfigResource(ConfigResourceType.TOPIC, topic, configs={"segment.bytes": "1048576"})],
                            incremental=False)
    finally:
        admin.close()
    with kafka_wire.connect(broker.bootstrap) as conn:
        now = wait_for("the new set", lambda: (c := in_force(conn, topic))["segment.bytes"][0] == "1048576" and c,
                       timeout=15)
        assert now["segment.bytes"] == ("1048576", DYNAMIC_TOPIC_CONFIG)
        assert now["retention.ms"] == ("7777", DYNAMIC_TOPIC_CONFIG)

        assert legacy(conn, topic, {"max.message.bytes": "65536"}) == (ErrorCode.none, None)
        now = wait_for("the replaced set",
                         lambda: (c := in_force(conn, topic))["max.message.bytes"][0] == "65536" and c,
                         timeout=15)
        assert now["retention.ms"][1] != DYNAMIC_TOPIC_CONFIG and now["segment.bytes"][1] != DYNAMIC_TOPIC_CONFIG
        assert legacy(conn, topic, {"no.such.config": "1"})[0] == ErrorCode.invalid_config


@pytest.mark.parametrize("ops, code, names", [
    ((("no.such.config", SET, "1"),), ErrorCode.invalid_config, "no.such.config"),
    ((("retention.ms", SET, "not-a-number"),), ErrorCode.invalid_config, "retention.ms"),
    ((("retention.ms", APPEND, "5"),), ErrorCode.invalid_config, "retention.ms"),
    ((("retention.ms", SET, "1"), ("retention.ms", SET, "2")), ErrorCode.invalid_request, ""),  # Kafka names none
    ((("retention.ms", SET, None),), ErrorCode.invalid_request, "retention.ms"),
])
def test_bad_changes_are_refused_and_change_nothing(broker, ops, code, names):
    topic = kafka_wire.unique_topic("alter-bad")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert create(conn, topic, {"retention.ms": "4242"})[0] == ErrorCode.none
        got_code, message = incremental(conn, topic, *ops)
        assert got_code == code, message
        assert message and names in message
        time.sleep(0.3)
        assert in_force(conn, topic)["retention.ms"] == ("4242", DYNAMIC_TOPIC_CONFIG)


def test_unknown_topic_is_unknown_topic_or_partition(broker):
    with kafka_wire.connect(broker.bootstrap) as conn:
        code, _ = incremental(conn, kafka_wire.unique_topic("absent"), ("retention.ms", SET, "1"))
        assert code == ErrorCode.unknown_topic_or_partition
