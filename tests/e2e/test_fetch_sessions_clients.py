"""Fetch sessions with real clients: the Java client (kafka-clients, pinned in tests/java/client-check)
and kafka-python open sessions and fetch incrementally; librdkafka never opens one. The broker's
metrics show which kind of fetch each client made, and the eviction counter moves when, on a
one-slot cache, a new consumer displaces an idle session (rule 2) and a follower-style fetch
displaces a consumer's session (rule 1). The displaced consumer keeps consuming (it starts over,
sessionless while the slot is taken)."""

from __future__ import annotations

import time
from typing import Callable

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from tests.support.clients import family
from flotilla.testenv.fetch_client import INITIAL_EPOCH, exchange, fetch_request
from flotilla.testenv.kafka_wire import build_batch, unique_topic
from tests.support.prometheus import metric

pytestmark = pytest.mark.flotilla_only("reads Flotilla's fetch-session metrics")

KINDS = ("full", "incremental", "sessionless", "session_error")


def kinds(url: str) -> dict[str, float]:
    return {k: metric(url, "flotilla_fetch_requests_total", kind=k) for k in KINDS}


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.1)


def make_topic(bootstrap: str, partitions: int = 2) -> str:
    name = unique_topic("fsc")
    with kafka_wire.connect(bootstrap) as c:
        assert c.create_topic(name, partitions) == ErrorCode.none
    return name


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    with kafka_wire.connect(bootstrap) as c:
        assert c.produce(topic, partition, build_batch([(None, v) for v in values])).error_code == ErrorCode.none


class PythonConsumer:
    """kafka-python, partitions assigned (no group): it fetches only inside poll(), so not calling
    poll() leaves its session idle without closing it."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                               auto_offset_reset="earliest", request_timeout_ms=30000)
        self.c.assign([TopicPartition(topic, p) for p in range(partitions)])
        self.values: list[bytes] = []

    def poll_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for msgs in self.c.poll(timeout_ms=100).values():
                self.values += [m.value for m in msgs]

    def take(self, n: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.values) < n:
            assert time.monotonic() < deadline, f"kafka-python got {len(self.values)} of {n} records"
            self.poll_for(0.2)

    def close(self) -> None:
        self.c.close()


@pytest.mark.broker_config({"group.initial.rebalance.delay.ms": "0"})
def test_java_and_kafka_python_fetch_incrementally(broker):
    url = broker.metrics_url
    topic = make_topic(broker.bootstrap)
    produce(broker.bootstrap, topic, [b"a%d" % i for i in range(5)])
    before = kinds(url)
    py = PythonConsumer(broker.bootstrap, topic, 2)
    java = family("java").consumer(broker.bootstrap, topic)
    try:
        py.take(5)
        java.take(5, timeout=60)
        produce(broker.bootstrap, topic, [b"b%d" % i for i in range(3)], partition=1)
        py.take(8)
        java.take(8, timeout=30)
        py.poll_for(1.0)
        java.settle(1.0)
        assert metric(url, "flotilla_incremental_fetch_sessions") == 2  # one per consumer
        assert metric(url, "flotilla_incremental_fetch_partitions_cached") == 4
        after = kinds(url)
        assert after["full"] - before["full"] >= 2
        assert after["incremental"] - before["incremental"] >= 4  # both fetch incrementally
        assert after["session_error"] == before["session_error"]
    finally:
        py.close()
        java.close()
    assert metric(url, "flotilla_incremental_fetch_session_evictions_total") == 0


def test_librdkafka_fetches_sessionless(broker):
    url = broker.metrics_url
    topic = make_topic(broker.bootstrap)
    produce(broker.bootstrap, topic, [b"c%d" % i for i in range(4)])
    before = kinds(url)
    with family("confluent").consumer(broker.bootstrap, topic) as c:
        c.take(4)
        produce(broker.bootstrap, topic, [b"d%d" % i for i in range(2)])
        c.take(6)
    after = kinds(url)
    assert after["sessionless"] > before["sessionless"]
    assert (after["full"], after["incremental"]) == (before["full"], before["incremental"])
    assert metric(url, "flotilla_incremental_fetch_sessions") == 0


@pytest.mark.broker_config({"max.incremental.fetch.session.cache.slots": "1", "flotilla.fetch.session.eviction.ms": "1500",
                            "group.initial.rebalance.delay.ms": "0"})
def test_rule2_new_consumer_displaces_idle_session(broker):
    url = broker.metrics_url
    topic = make_topic(broker.bootstrap)
    produce(broker.bootstrap, topic, [b"e%d" % i for i in range(5)])
    py = PythonConsumer(broker.bootstrap, topic, 2)
    try:
        py.take(5)
        py.poll_for(1.0)
        assert metric(url, "flotilla_incremental_fetch_sessions") == 1
        assert metric(url, "flotilla_fetch_session_cache_slots_used") == 1
        time.sleep(2.0)  # kafka-python stops polling: its session idles past the eviction time
        before = kinds(url)
        with family("java").consumer(broker.bootstrap, topic) as java:
            java.take(5, timeout=60)
            java.settle(1.0)
            assert metric(url, "flotilla_incremental_fetch_session_evictions_total") == 1
            assert kinds(url)["incremental"] > before["incremental"]  # the Java client took the slot
            # The displaced consumer starts over and keeps consuming, sessionless: the slot is busy.
            produce(broker.bootstrap, topic, [b"f%d" % i for i in range(3)], partition=1)
            py.take(8)
            java.take(8, timeout=30)
            after = kinds(url)
            assert after["session_error"] > before["session_error"]  # FETCH_SESSION_ID_NOT_FOUND
            assert after["sessionless"] + after["full"] > before["sessionless"] + before["full"]
            assert metric(url, "flotilla_incremental_fetch_session_evictions_total") == 1
    finally:
        py.close()


@pytest.mark.broker_config({"max.incremental.fetch.session.cache.slots": "1"})
def test_rule1_follower_fetch_displaces_consumer_session(broker):
    url = broker.metrics_url
    topic = make_topic(broker.bootstrap)
    produce(broker.bootstrap, topic, [b"g%d" % i for i in range(3)])
    py = PythonConsumer(broker.bootstrap, topic, 2)
    try:
        py.take(3)
        py.poll_for(1.0)
        assert metric(url, "flotilla_incremental_fetch_sessions") == 1
        with kafka_wire.connect(broker.bootstrap) as c:
            follower = exchange(c, fetch_request(12, 0, INITIAL_EPOCH, {topic: {0: 0}}, replica_id=2)).response
        assert follower.session_id != 0
        assert metric(url, "flotilla_incremental_fetch_session_evictions_total") == 1
        before = kinds(url)
        produce(broker.bootstrap, topic, [b"h%d" % i for i in range(2)], partition=1)
        py.take(5)
        py.poll_for(1.0)
        after = kinds(url)
        assert after["session_error"] > before["session_error"], (before, after)
        assert after["full"] > before["full"]  # it starts over with a full request...
        # ...which gets no session: a consumer cannot take a young follower's slot.
        assert metric(url, "flotilla_incremental_fetch_session_evictions_total") == 1
        assert metric(url, "flotilla_incremental_fetch_sessions") == 1
        assert metric(url, "flotilla_incremental_fetch_partitions_cached") == 1  # the follower's one partition
        assert after["incremental"] == before["incremental"]
    finally:
        py.close()
