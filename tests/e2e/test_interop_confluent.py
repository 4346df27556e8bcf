"""confluent-kafka (librdkafka) against the broker: the shared interop scenarios plus DescribeCluster."""

import time

import pytest

from tests.support.broker_process import free_port
from tests.support.clients import keyed_records
from tests.support.fault_proxy import FaultProxy
from tests.support.interop_suite import AdminScenarios, InteropSuite, make_topic
from tests.support.verify import read_all


class TestConfluentKafka(InteropSuite, AdminScenarios):
    family_name = "confluent"

    @pytest.mark.timeout(60)
    def test_describe_cluster(self, client, shared_broker):
        d = client.describe_cluster(shared_broker.bootstrap)
        assert d["cluster_id"], "no cluster id"
        assert [(h, p) for _, h, p in d["nodes"]] == [(shared_broker.host, shared_broker.advertised_port)]
        assert d["controller"] in [n for n, _, _ in d["nodes"]] or d["controller"] == -1

    @pytest.mark.timeout(120)
    def test_lost_responses_duplicate_without_idempotence(self, client, broker_factory):
        """Control for test_idempotent_retries_after_lost_responses: the same faults without
        idempotence do duplicate records, so the proxy really forces retries."""
        port = free_port()
        with FaultProxy(port, drop_produce_responses=2) as proxy:
            b = broker_factory(port=port, advertised_port=proxy.port)
            topic = make_topic(b, 1, "dup")
            sent = keyed_records(50, keys=1, prefix="dup")
            client.produce(f"127.0.0.1:{proxy.port}", topic, sent, idempotent=False, acks="all")
            assert proxy.dropped == 2
            got = read_all(f"127.0.0.1:{proxy.port}", topic, (0,))
        assert len(got) > len(sent), "no duplicates: the proxy did not force a retry"
        assert {r.value for r in got} == {v for _, v in sent}

    @pytest.mark.timeout(60)
    def test_fetch_returns_a_first_batch_larger_than_the_fetch_limits(self, client, shared_broker):
        """KIP-74: a batch larger than max.partition.fetch.bytes / fetch.max.bytes is still returned
        when it is the first one, so a consumer can always make progress."""
        from confluent_kafka import Consumer, TopicPartition

        topic = make_topic(shared_broker, 1, "kip74")
        sent = [("k", "A" * 300_000), ("k", "B" * 300_000)]
        client.produce(shared_broker.bootstrap, topic, sent)
        c = Consumer(
            {
                "bootstrap.servers": shared_broker.bootstrap,
                "group.id": "unused",
                "enable.auto.commit": False,
                "message.max.bytes": 1000,  # librdkafka wants fetch.max.bytes >= this
                "fetch.max.bytes": 1024,
                "max.partition.fetch.bytes": 1024,
                "receive.message.max.bytes": 2000000,
            }
        )
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 2 and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    got.append((m.offset(), len(m.value())))
        finally:
            c.close()
        assert got == [(0, 300_000), (1, 300_000)]
