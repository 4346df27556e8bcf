"""confluent-kafka (librdkafka) against the broker: the shared interop scenarios plus DescribeCluster."""

import time

import pytest

from flotilla.testenv.brokers.broker_process import free_port
from tests.support.clients import keyed_records
from tests.support.fault_proxy import FaultProxy
from tests.support.interop_suite import AdminScenarios, InteropSuite, make_topic
from tests.support.verify import read_all, read_all_raw


class TestConfluentKafka(InteropSuite, AdminScenarios):
    family_name = "confluent"

    @pytest.mark.timeout(60)
    def test_describe_cluster(self, client, shared_broker):
        d = client.describe_cluster(shared_broker.bootstrap)
        assert d["cluster_id"], "no cluster id"
        assert [(h, p) for _, h, p in d["nodes"]] == [(shared_broker.host, shared_broker.advertised_port)]
        # KIP-919: clients are told an alive broker as the controller (here the only one), never none.
        (node_id,) = [n for n, _, _ in d["nodes"]]
        assert d["controller"] == node_id, d

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

    @pytest.mark.timeout(90)
    def test_many_partitions_round_trip(self, client, shared_broker):
        """One Produce and one Fetch carry many partitions at once."""
        from tests.support.interop_suite import check_round_trip

        partitions = 48
        topic = make_topic(shared_broker, partitions, "wide")
        sent = keyed_records(2000, keys=200, prefix="wide")
        delivered = client.produce(shared_broker.bootstrap, topic, sent, compression="lz4", idempotent=True)
        got = read_all(shared_broker.bootstrap, topic, range(partitions))
        assert len({r.partition for r in got}) > partitions // 2, "keys did not spread over the partitions"
        check_round_trip(sent, delivered, got, partitions, True)

    @pytest.mark.timeout(60)
    def test_long_poll_fetch_wakes_on_new_data(self, client, shared_broker):
        """A consumer waiting at the end of the log (fetch.wait.max.ms=5000) gets a new record
        as soon as it is appended, not when its fetch times out."""
        from confluent_kafka import Consumer, TopicPartition

        topic = make_topic(shared_broker, 1, "longpoll")
        client.produce(shared_broker.bootstrap, topic, [("k", "warm-up")])
        c = Consumer(
            {
                "bootstrap.servers": shared_broker.bootstrap,
                "group.id": "unused",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 5000,
                "fetch.min.bytes": 1,
            }
        )
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            deadline = time.monotonic() + 20
            m = None
            while m is None or m.error():
                assert time.monotonic() < deadline, "warm-up record never arrived"
                m = c.poll(0.5)
            time.sleep(1.0)  # the consumer is now parked in a long-poll Fetch
            delays = []
            for i in range(3):
                start = time.monotonic()
                client.produce(shared_broker.bootstrap, topic, [("k", f"ping-{i}")])
                m = None
                while m is None or m.error():
                    assert time.monotonic() - start < 15, "record never arrived"
                    m = c.poll(0.05)
                assert m.value() == f"ping-{i}".encode()
                delays.append(time.monotonic() - start)
                time.sleep(0.7)
        finally:
            c.close()
        # Producing (new producer, metadata, ack) takes a fraction of a second; a broker that
        # only answers at fetch.wait.max.ms would show ~5 s.
        assert min(delays) < 2.5, f"new data waited for the fetch timeout: {delays}"

    @pytest.mark.timeout(60)
    def test_headers_null_keys_and_tombstones_round_trip(self, client, shared_broker):
        """Record headers (repeated keys, empty and null values), null keys and null values
        come back byte for byte, also inside a compressed batch."""
        from confluent_kafka import Producer

        topic = make_topic(shared_broker, 1, "headers")
        p = Producer({"bootstrap.servers": shared_broker.bootstrap, "compression.type": "zstd", "linger.ms": 20})
        sent = [
            (b"k1", b"v1", [("trace", b"abc"), ("trace", b"def"), ("empty", b""), ("none", None)]),
            (None, b"no-key", [("h", b"\x00\xff")]),
            (b"k2", None, []),  # a tombstone
            (b"", b"", [("\u00e9t\u00e9", "\u2603".encode())]),
        ]
        for key, value, headers in sent:
            p.produce(topic, key=key, value=value, headers=headers)
        assert p.flush(30) == 0
        got = [(m.key(), m.value(), m.headers()) for m in read_all_raw(shared_broker.bootstrap, topic)]
        assert got == [(k, v, h or None) for k, v, h in sent]
