"""KIP-13 client quotas with real clients.

Quotas are set as a user would: with AlterClientQuotas from kafka-python's admin client (its own
request classes over its admin connection; kafka-python has no public quota method) and from the
Java AdminClient in Apache Kafka's kafka-configs tool. Each client reports the throttle in its own
way: librdkafka's throttle callback, the Java client's produce/fetch-throttle-time metrics,
kafka-python's metrics. Rates are read from the clients' delivery reports and from the broker's own
byte-rate metric, over 20 s after the quota window has filled (the first window lets a new client
burst, as in Kafka). A shared machine can make any producer slower, never faster: rates are held
to upper bounds (the quota, with 15 % for the sampling windows) and compared with each other, never
required to reach an amount.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from flotilla.testenv.kafka_wire import unique_topic
from tests.support.prometheus import metric

MB = 1024 * 1024


# -- setting quotas ---------------------------------------------------------------------------------


def _admin(bootstrap):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def alter_quotas(bootstrap: str, entries: list[tuple[dict, dict]], validate_only: bool = False):
    """kafka-python: AlterClientQuotas; entries are ({entity_type: name|None}, {key: value|None})."""
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest as R

    req = R(entries=[R.EntryData(
        entity=[R.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[R.EntryData.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])
        for entity, ops in entries], validate_only=validate_only)
    admin = _admin(bootstrap)
    try:
        resp = admin._manager.run(admin._send_request_to_controller, req)
    finally:
        admin.close()
    # Kafka answers entries in no particular order: put them in request order by entity
    by_entity = {frozenset((e.entity_type, e.entity_name) for e in entry.entity): (entry.error_code, entry.error_message)
                 for entry in resp.entries}
    return [by_entity[frozenset(entity.items())] for entity, _ in entries]


def describe_quotas(bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool = False):
    """kafka-python: DescribeClientQuotas -> (error code, {frozenset(entity items): {key: value}})."""
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest as R

    req = R(components=[R.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict)
    admin = _admin(bootstrap)
    try:
        resp = admin._manager.run(admin._send_request_to_controller, req)
    finally:
        admin.close()
    entries = None if resp.entries is None else {
        frozenset((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
        for entry in resp.entries}
    return resp.error_code, entries


def set_client_quota(bootstrap: str, client_id: str | None, **values) -> None:
    assert alter_quotas(bootstrap, [({"client-id": client_id}, values)]) == [(0, None)]


# -- AlterClientQuotas / DescribeClientQuotas -----------------------------------------------------------


def test_alter_and_describe_with_kafka_python(broker):
    b = broker.bootstrap
    # validate_only checks without storing; a bad key or value is refused per entry
    assert alter_quotas(b, [({"client-id": "app"}, {"producer_byte_rate": 1024})], validate_only=True) == [(0, None)]
    assert describe_quotas(b, [("client-id", 2, None)]) == (0, {})
    results = alter_quotas(b, [
        ({"client-id": "app"}, {"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152}),
        ({"client-id": None}, {"request_percentage": 50}),
        ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 4096}),
        ({"client-id": "bad"}, {"no_such_quota": 1}),
        ({"client-id": "bad2"}, {"producer_byte_rate": -5}),
    ])
    assert [code for code, _ in results] == [0, 0, 0, ErrorCode.invalid_request, ErrorCode.invalid_request]
    assert results[3][1] and results[4][1]

    app, default = frozenset({("client-id", "app")}), frozenset({("client-id", None)})
    alice_app = frozenset({("user", "alice"), ("client-id", "app")})
    code, entries = describe_quotas(b, [("client-id", 2, None)])  # any client-id, not strict
    assert code == 0
    assert entries == {app: {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
                       default: {"request_percentage": 50.0}, alice_app: {"producer_byte_rate": 4096.0}}
    assert describe_quotas(b, [("client-id", 2, None)], strict=True)[1] == {
        app: entries[app], default: entries[default]}
    assert describe_quotas(b, [("client-id", 1, None)])[1] == {default: entries[default]}
    assert describe_quotas(b, [("client-id", 0, "app")], strict=True)[1] == {app: entries[app]}
    assert describe_quotas(b, [("user", 0, "alice")])[1] == {alice_app: entries[alice_app]}
    # a type twice in one filter: the whole answer is INVALID_REQUEST, no entries
    assert describe_quotas(b, [("client-id", 2, None), ("client-id", 1, None)])[0] == ErrorCode.invalid_request

    # removal (null value): one key, then the last one, and the entity disappears
    assert alter_quotas(b, [({"client-id": "app"}, {"producer_byte_rate": None})]) == [(0, None)]
    assert describe_quotas(b, [("client-id", 0, "app")], strict=True)[1] == {app: {"consumer_byte_rate": 2097152.0}}
    assert alter_quotas(b, [({"client-id": "app"}, {"consumer_byte_rate": None}),
                            ({"client-id": None}, {"request_percentage": None})]) == [(0, None), (0, None)]
    assert describe_quotas(b, [("client-id", 2, None)], strict=True)[1] == {}


def kafka_configs(bootstrap: str, *args: str) -> str:
    """Apache Kafka's kafka-configs tool (kafka.admin.ConfigCommand, the Java AdminClient)."""
    from flotilla.testenv.brokers.apache_kafka import ensure_kafka_libs, java

    libs = ensure_kafka_libs()
    cmd = [java(), "-Xmx256m", "-cp", f"{libs}/*", "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_java_admin_client_kafka_configs_sets_and_removes_quotas(broker):
    b = broker.bootstrap
    kafka_configs(b, "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2048",
                  "--entity-type", "clients", "--entity-name", "java-app")
    kafka_configs(b, "--alter", "--add-config", "request_percentage=25", "--entity-type", "clients",
                  "--entity-default")
    out = kafka_configs(b, "--describe", "--entity-type", "clients", "--entity-name", "java-app")
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate=2048.0" in out, out
    assert describe_quotas(b, [("client-id", 1, None)])[1] == {frozenset({("client-id", None)}): {"request_percentage": 25.0}}
    kafka_configs(b, "--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "clients",
                  "--entity-name", "java-app")
    out = kafka_configs(b, "--describe", "--entity-type", "clients", "--entity-name", "java-app")
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate" not in out, out


# -- produce quota --------------------------------------------------------------------------------------


class ConfluentProducer:
    """A producer that keeps its queue full and counts acknowledged bytes and throttle events."""

    def __init__(self, bootstrap: str, client_id: str, topic: str, value_size: int = 16 * 1024) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.value = b"x" * value_size
        self.acked: list[tuple[float, int]] = []
        self.throttles: list[float] = []
        self.p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                           "batch.size": 131072, "queue.buffering.max.kbytes": 4096, "acks": 1,
                           "throttle_cb": lambda ev: self.throttles.append(ev.throttle_time)})
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked.append((time.monotonic(), len(msg.value())))

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.p.produce(self.topic, self.value, on_delivery=self._on_delivery)
            except BufferError:
                self.p.poll(0.05)
                continue
            self.p.poll(0)
        self.p.flush(30)

    def bytes_between(self, t0: float, t1: float) -> int:
        return sum(n for t, n in self.acked if t0 <= t < t1)


def make_topic(bootstrap: str, partitions: int = 1) -> str:
    name = unique_topic("quota")
    with kafka_wire.connect(bootstrap) as c:
        assert c.create_topic(name, partitions) == ErrorCode.none
    return name


@pytest.mark.flotilla_only("reads Flotilla's quota metrics")
def test_produce_quota_holds_a_producer_at_1_mb_per_s_and_spares_others(broker):
    b = broker.bootstrap
    set_client_quota(b, "slow", producer_byte_rate=MB)
    topic = make_topic(b)
    slow = ConfluentProducer(b, "slow", topic)
    slow.thread.start()
    try:
        time.sleep(12)  # the 11-sample window fills; a new client's first window allows a burst
        t0 = time.monotonic()
        fast = ConfluentProducer(b, "fast", topic)
        fast.thread.start()
        broker_rates = []
        for _ in range(10):  # the broker's own measured rate, sampled through the 20 s
            time.sleep(2)
            broker_rates.append(metric(broker.metrics_url, "flotilla_quota_rate", quota_type="produce",
                                       client_id="slow"))
        t1 = time.monotonic()
        fast.stop.set()
        fast.thread.join(60)
        broker_rate = sum(broker_rates) / len(broker_rates)
        limit = metric(broker.metrics_url, "flotilla_quota_limit", quota_type="produce", client_id="slow")
        throttled = metric(broker.metrics_url, "flotilla_quota_throttled_requests_total", quota_type="produce",
                           client_id="slow")
    finally:
        slow.stop.set()
        slow.thread.join(60)
    slow_rate = slow.bytes_between(t0, t1) / (t1 - t0)
    fast_rate = fast.bytes_between(t0, t1) / (t1 - t0)
    assert limit == MB
    assert broker_rate <= 1.15 * MB, broker_rate           # held to its quota, as the broker measures
    assert slow_rate <= 1.15 * MB, (slow_rate, broker_rate)  # and as its delivery reports show
    assert 0.67 <= slow_rate / broker_rate <= 1.5, (slow_rate, broker_rate)  # the two measure the same bytes
    assert slow.throttles and max(slow.throttles) > 0       # librdkafka's throttle callback fired
    assert throttled > 0
    assert not fast.throttles                              # the other client-id was never throttled
    assert fast_rate > slow_rate, (fast_rate, slow_rate)   # and went past the throttled one


def java_perf_metrics(main: str, *args: str) -> dict[str, float]:
    """Run one of Apache Kafka's perf tools (the Java client) with --print-metrics; {group:name: max value}."""
    from bench.clients.javatools import _java_cmd, ensure_tools

    out = subprocess.run([*_java_cmd(ensure_tools(), f"org.apache.kafka.tools.{main}"), *args, "--print-metrics"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    metrics: dict[str, float] = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^(\S+?):(\S+):\{([^}]*)\}\s*:\s*(\S+)$", line.strip())
        if m:
            try:
                value = float(m.group(4))
            except ValueError:
                continue
            key = f"{m.group(1)}:{m.group(2)}"
            metrics[key] = max(metrics.get(key, 0.0), value)
    return metrics


def test_java_producer_and_consumer_report_the_throttle(broker, tmp_path):
    b = broker.bootstrap
    topic = make_topic(b)
    set_client_quota(b, "java-slow", producer_byte_rate=256 * 1024, consumer_byte_rate=256 * 1024)
    produced = java_perf_metrics("ProducerPerformance", "--topic", topic, "--num-records", "3000",
                                 "--record-size", "2000", "--throughput", "-1", "--producer-props",
                                 f"bootstrap.servers={b}", "client.id=java-slow", "linger.ms=5")
    assert produced["producer-metrics:produce-throttle-time-max"] > 0, produced.get("producer-metrics:produce-throttle-time-max")
    consumer_config = tmp_path / "consumer.properties"
    consumer_config.write_text("client.id=java-slow\nauto.offset.reset=earliest\n")
    consumed = java_perf_metrics("ConsumerPerformance", "--bootstrap-server", b, "--topic", topic,
                                 "--messages", "3000", "--timeout", "60000", "--consumer.config", str(consumer_config))
    assert consumed["consumer-fetch-manager-metrics:fetch-throttle-time-max"] > 0


def throttle_max(metrics: dict) -> float:
    """kafka-python's connection metrics: throttle-time-max of the client's responses."""
    return max((v for group in metrics.values() for k, v in group.items() if k.endswith("throttle-time-max")),
               default=0.0)


def test_kafka_python_producer_and_consumer_report_the_throttle(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    b = broker.bootstrap
    topic = make_topic(b)
    set_client_quota(b, "py-slow", producer_byte_rate=128 * 1024, consumer_byte_rate=128 * 1024)
    p = KafkaProducer(bootstrap_servers=b, client_id="py-slow", linger_ms=5)
    try:
        for _ in range(1200):
            p.send(topic, b"y" * 2000)
        p.flush(120)
        produce_throttle = throttle_max(p.metrics())
    finally:
        p.close()
    assert produce_throttle > 0
    c = KafkaConsumer(bootstrap_servers=b, client_id="py-slow", group_id=None, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    try:
        c.assign([TopicPartition(topic, 0)])
        got, deadline = 0, time.monotonic() + 90
        while got < 1200 and time.monotonic() < deadline:
            got += sum(len(v) for v in c.poll(1000).values())
        fetch_throttle = throttle_max(c.metrics())
    finally:
        c.close()
    assert got == 1200
    assert fetch_throttle > 0


@pytest.mark.flotilla_only("reads Flotilla's quota metrics")
def test_fetch_quota_holds_a_confluent_consumer_and_answers_empty_while_throttled(broker):
    from confluent_kafka import Consumer, TopicPartition

    b = broker.bootstrap
    topic = make_topic(b)
    with kafka_wire.connect(b) as c:
        batch = kafka_wire.build_batch([(None, b"z" * 60_000) for _ in range(16)])
        for _ in range(12):  # ~11.5 MB
            assert c.produce(topic, 0, batch).error_code == ErrorCode.none
    set_client_quota(b, "reader", consumer_byte_rate=512 * 1024)
    throttles = []
    cons = Consumer({"bootstrap.servers": b, "client.id": "reader", "group.id": "quota-readers",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        got = 0
        deadline = time.monotonic() + 16
        while time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got += len(m.value())
    finally:
        cons.close()
    rate = metric(broker.metrics_url, "flotilla_quota_rate", quota_type="fetch", client_id="reader")
    assert throttles and max(throttles) > 0
    # 16 s at 512 KiB/s, plus the first window's allowance (bound x (samples - 1) windows)
    assert got <= 512 * 1024 * (16 + 10) * 1.15, got
    assert rate <= 512 * 1024 * 1.15, rate


def test_request_percentage_throttles_a_client_flooding_metadata(broker):
    from kio.schema.metadata.v12.request import MetadataRequest

    b = broker.bootstrap
    assert alter_quotas(b, [({"client-id": "flooder"}, {"request_percentage": 1})]) == [(0, None)]
    throttles = []
    deadline = time.monotonic() + 30
    with kafka_wire.KafkaConnection(b, client_id="flooder") as conn:
        while time.monotonic() < deadline:
            resp = conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
            ms = resp.throttle_time.total_seconds() * 1000
            if ms >= 100:  # a throttle long enough to time (the first ones are a few ms)
                throttles.append(ms)
                started = time.monotonic()
                conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
                # KIP-219: the broker muted the connection for the throttle time after answering
                waited = (time.monotonic() - started) * 1000
                break
    assert throttles, "30 s of Metadata requests at 1 % of the broker never drew a throttle"
    assert waited >= throttles[0] * 0.9, (waited, throttles[0])
    # another client-id is not throttled
    with kafka_wire.KafkaConnection(b, client_id="calm") as conn:
        resp = conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False))
        assert resp.throttle_time.total_seconds() == 0


@pytest.mark.flotilla_only("idle expiry of muted connections is Flotilla's choice")
@pytest.mark.broker_config({"connections.max.idle.ms": "1500"})
def test_a_muted_connection_is_not_reaped_as_idle(broker):
    """A throttle longer than connections.max.idle.ms: the connection stays open through its mute
    and answers the next request once the mute is over."""
    from kio.schema.metadata.v12.request import MetadataRequest

    from bench.clients.quota_neighbours import produce_request

    b = broker.bootstrap
    topic = make_topic(b)
    set_client_quota(b, "muted", producer_byte_rate=20165)  # 256 KiB at once: about 3 s of throttle
    with kafka_wire.KafkaConnection(b, client_id="muted") as conn:
        resp = conn.request(produce_request(topic, kafka_wire.build_batch([(None, b"m" * 1024) for _ in range(256)])))
        throttle_s = resp.throttle_time.total_seconds()
        assert 2.0 < throttle_s < 4.0, throttle_s
        time.sleep(2.5)  # longer than the idle timeout, shorter than the mute
        md = conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False))
        assert md.brokers
