"""server.properties in the brokers' ConfigMap."""

from __future__ import annotations

from flotilla_operator.builders.configmap import build_configmap, kafka_cluster_id, operator_config, server_properties
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_configmap(owner, spec):
    cm = build_configmap(owner, spec)
    assert cm["metadata"]["name"] == "demo-config"
    props = _props(cm["data"]["server.properties"])
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:9092"
    assert props["log.dirs"] == "/var/lib/flotilla/data"
    assert props["flotilla.metrics.listener"] == "0.0.0.0:9404"
    assert props["log.retention.ms"] == "3600000"
    assert props["cluster.id"] == kafka_cluster_id(owner)
    # The brokers form one cluster with their metadata in this namespace's Leases and KafkaTopics.
    assert props["flotilla.metadata.store"] == "kubernetes"
    assert props["flotilla.cluster.name"] == owner.name and props["flotilla.kubernetes.namespace"] == owner.namespace
    assert "node.id" not in props and "advertised.listeners" not in props  # per pod
    # Brokers would reject keys they do not know: only what is needed is written.
    assert "listener.security.protocol.map" not in props and "inter.broker.listener.name" not in props


def test_cluster_id_is_kafka_shaped_and_stable(owner):
    cid = kafka_cluster_id(owner)
    assert len(cid) == 22 and "=" not in cid
    assert cid == kafka_cluster_id(owner)
    assert kafka_cluster_id(owner.__class__("demo", "kafka", "not-a-uuid")) != cid


def test_rendering_is_deterministic_and_sorted(owner):
    a = KafkaClusterSpec.model_validate({"config": {"b.key": "1", "a.key": 2}})
    b = KafkaClusterSpec.model_validate({"config": {"a.key": 2, "b.key": "1"}})
    assert server_properties(owner, a) == server_properties(owner, b)
    lines = server_properties(owner, a).splitlines()
    assert lines.index("a.key=2") < lines.index("b.key=1")


def test_values_cannot_inject_lines(owner):
    spec = KafkaClusterSpec.model_validate({"config": {"log.retention.ms": "1\nnode.id=9"}})
    assert "node.id=9" not in server_properties(owner, spec).splitlines()


def test_named_listeners_get_protocol_map(owner):
    spec = KafkaClusterSpec.model_validate({"listeners": [{"name": "INTERNAL", "port": 9092}, {"name": "CLIENTS", "port": 9094}]})
    cfg = operator_config(owner, spec)
    assert cfg["listeners"] == "INTERNAL://0.0.0.0:9092,CLIENTS://0.0.0.0:9094"
    assert cfg["listener.security.protocol.map"] == "INTERNAL:PLAINTEXT,CLIENTS:PLAINTEXT"
    assert cfg["inter.broker.listener.name"] == "INTERNAL"
