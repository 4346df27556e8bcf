"""DeleteTopics refused by a broker with delete.topic.enable=false, as Kafka refuses it: every topic
named, existing or not, is answered TOPIC_DELETION_DISABLED (73) from v3 on and INVALID_REQUEST (42)
before (clients older than the error code), and nothing is deleted: the topic and its records stay.
librdkafka's admin client reports the error. Passes against Apache Kafka 4.1 too."""

from __future__ import annotations

import datetime
import importlib

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from tests.support.clients import ConfluentFamily, keyed_records
from tests.support.verify import read_all

pytestmark = pytest.mark.broker_config({"delete.topic.enable": "false"})


def delete_request(version: int, names: list[str]):
    module = importlib.import_module(f"kio.schema.delete_topics.v{version}.request")
    timeout = datetime.timedelta(seconds=10)
    if version >= 6:
        return module.DeleteTopicsRequest(topics=tuple(module.DeleteTopicState(name=n, topic_id=None) for n in names),
                                          timeout=timeout)
    return module.DeleteTopicsRequest(topic_names=tuple(names), timeout=timeout)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_delete_topics_is_refused_and_deletes_nothing(broker, version: int) -> None:
    topic = kafka_wire.unique_topic("keep")
    missing = kafka_wire.unique_topic("never-created")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 2) == ErrorCode.none
    sent = keyed_records(20, keys=4, prefix="kept")
    ConfluentFamily().produce(broker.bootstrap, topic, sent, acks="all")

    with kafka_wire.connect(broker.bootstrap) as conn:
        resp = conn.request(delete_request(version, [topic, missing]))
    want = ErrorCode.topic_deletion_disabled if version >= 3 else ErrorCode.invalid_request
    assert sorted((r.name, r.error_code) for r in resp.responses) == sorted([(topic, want), (missing, want)])

    with kafka_wire.connect(broker.bootstrap) as conn:
        (t,) = conn.metadata([topic]).topics
    assert t.error_code == ErrorCode.none and len(t.partitions) == 2
    got = read_all(broker.bootstrap, topic, (0, 1))
    assert sorted((r.key, r.value) for r in got) == sorted(sent)


@pytest.mark.timeout(120)
def test_admin_client_reports_topic_deletion_disabled(broker) -> None:
    from confluent_kafka import KafkaException

    topic = kafka_wire.unique_topic("keep-admin")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == ErrorCode.none
    with pytest.raises(KafkaException) as failed:
        ConfluentFamily().delete_topic(broker.bootstrap, topic)
    assert failed.value.args[0].code() == ErrorCode.topic_deletion_disabled.value, failed.value
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.metadata([topic]).topics[0].error_code == ErrorCode.none
