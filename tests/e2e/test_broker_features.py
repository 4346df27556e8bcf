"""Broker behaviour beyond the client round trips: metrics, zero-copy, admin APIs, timestamps,
start-up errors and graceful shutdown. Real clients (confluent-kafka) over real sockets."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

pytestmark = pytest.mark.flotilla_only("Flotilla's own metrics, config and on-disk layout")

FLOTILLA = str(Path(sys.executable).with_name("flotilla"))


def metric(url: str, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


def produce(bootstrap: str, topic: str, n: int, timestamp_ms: int | None = None, **conf) -> list:
    p = Producer({"bootstrap.servers": bootstrap, **conf})
    delivered = []
    for i in range(n):
        kw = {"timestamp": timestamp_ms + i} if timestamp_ms else {}
        p.produce(topic, value=b"v%05d" % i, key=b"k%d" % (i % 3), partition=0,
                  on_delivery=lambda e, m: delivered.append((e, m.offset())), **kw)
    assert p.flush(30) == 0
    assert all(e is None for e, _ in delivered), delivered[:3]
    return [o for _, o in delivered]


def consume_all(bootstrap: str, topic: str, n: int, timeout: float = 30) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    c.close()
    return got


def create(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def test_metrics_and_zero_copy_fetch(broker):
    create(broker.bootstrap, "metered")
    produce(broker.bootstrap, "metered", 50)
    assert len(consume_all(broker.bootstrap, "metered", 50)) == 50
    url = broker.metrics_url
    assert metric(url, "flotilla_requests_total", api="produce") >= 1
    assert metric(url, "flotilla_request_latency_seconds_count", api="fetch") >= 1
    assert metric(url, "flotilla_topic_bytes_in_total", topic="metered") > 50 * 6
    assert metric(url, "flotilla_topic_bytes_out_total", topic="metered") > 0
    assert metric(url, "flotilla_log_end_offset", topic="metered", partition="0") == 50
    assert metric(url, "flotilla_log_size_bytes", topic="metered", partition="0") > 0
    # every record byte fetched went out through sendfile(), none through Python buffers
    assert metric(url, "flotilla_sendfile_bytes_total") == metric(url, "flotilla_topic_bytes_out_total", topic="metered")
    assert metric(url, "flotilla_connections") >= 0
    assert urllib.request.urlopen(url.replace("/metrics", "/healthz"), timeout=5).status == 200


def test_list_offsets_by_timestamp_and_admin_apis(broker):
    create(broker.bootstrap, "timed", config={"retention.ms": "86400000"})
    base = 1_700_000_000_000
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce("timed", value=b"x", partition=0, timestamp=base + i * 1000)
        p.flush(10)  # one batch per record: exact timestamp lookups
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ts"})
    [tp] = c.offsets_for_times([TopicPartition("timed", 0, base + 4500)], timeout=10)
    assert tp.offset == 5
    [tp] = c.offsets_for_times([TopicPartition("timed", 0, base + 99_000)], timeout=10)
    assert tp.offset == -1  # nothing that late: end of log
    assert c.get_watermark_offsets(TopicPartition("timed", 0), timeout=10) == (0, 10)
    c.close()

    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, "timed")
    configs = a.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "86400000"
    assert configs["cleanup.policy"].value == "delete"
    a.create_partitions([NewPartitions("timed", 3)])["timed"].result(30)
    assert len(a.list_topics(timeout=10).topics["timed"].partitions) == 3
    with pytest.raises(Exception, match="(?i)already exists"):
        a.create_topics([NewTopic("timed", 1, 1)])["timed"].result(30)
    with pytest.raises(Exception, match="(?i)replication factor"):
        a.create_topics([NewTopic("too-many-replicas", 1, 3)])["too-many-replicas"].result(30)
    a.delete_topics(["timed"])["timed"].result(30)
    assert "timed" not in a.list_topics(timeout=10).topics
    assert not any(p.name.startswith("timed-") for p in broker.log_dirs.iterdir())


def test_sigterm_flushes_and_checkpoints(broker):
    create(broker.bootstrap, "durable")
    offsets = produce(broker.bootstrap, "durable", 25)
    assert offsets == list(range(25))
    assert broker.stop() == 0
    ckpt = (broker.log_dirs / "recovery-point-offset-checkpoint").read_text().split("\n")
    assert "durable 0 25" in ckpt
    assert "durable 0 25" in (broker.log_dirs / "replication-offset-checkpoint").read_text().split("\n")
    assert list((broker.log_dirs / "durable-0").glob("*.snapshot"))
    log_text = broker.log_path.read_text()
    assert "shutdown complete" in log_text
    broker.start()
    assert [m.value() for m in consume_all(broker.bootstrap, "durable", 25)] == [b"v%05d" % i for i in range(25)]


@pytest.mark.parametrize("override,named", [
    ("no.such.key=1", "no.such.key"),
    ("num.partitions=lots", "num.partitions"),
    ("listeners=localhost", "listeners"),
])
def test_bad_config_stops_startup_naming_the_key(tmp_path, override, named):
    proc = subprocess.run([FLOTILLA, "broker", "--override", f"log.dirs={tmp_path}", "--override", override],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert repr(named) in proc.stderr
    assert not (tmp_path / "meta.properties").exists()


def test_all_topics_metadata_follows_every_change(broker):
    """The encoded all-topics Metadata answer is reused while the metadata image is unchanged;
    every create, grow and delete shows in the next answer, on every API version family."""
    from flotilla.testenv import kafka_wire

    def listed(conn) -> dict[str, int]:
        return {t.name: len(t.partitions) for t in conn.metadata(None).topics}

    with kafka_wire.connect(broker.bootstrap) as conn:
        before = listed(conn)
        topic = kafka_wire.unique_topic("md-cache")
        assert listed(conn) == before  # twice from the cache
        assert int(conn.create_topic(topic, 2)) == 0
        assert listed(conn)[topic] == 2
        a = AdminClient({"bootstrap.servers": broker.bootstrap})
        a.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
        assert listed(conn)[topic] == 5
        assert topic in a.list_topics(timeout=10).topics  # librdkafka's own version of the request
        a.delete_topics([topic])[topic].result(30)
        assert topic not in listed(conn)
