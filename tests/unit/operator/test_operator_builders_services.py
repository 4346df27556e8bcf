"""Headless and bootstrap Services."""

from __future__ import annotations

from flotilla_operator.builders.common import selector_labels
from flotilla_operator.builders.services import build_bootstrap_service, build_headless_service
from flotilla_operator.models import KafkaClusterSpec


def test_headless(owner, spec):
    svc = build_headless_service(owner, spec)
    assert svc["metadata"]["name"] == "demo-brokers"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == selector_labels(owner)
    assert {(p["name"], p["port"]) for p in svc["spec"]["ports"]} == {("kafka", 9092), ("metrics", 9404)}
    assert svc["metadata"]["ownerReferences"][0]["uid"] == owner.uid


def test_bootstrap(owner):
    spec = KafkaClusterSpec.model_validate({"listeners": [{"name": "PLAINTEXT", "port": 9092}, {"name": "EXTRA", "port": 9093}]})
    svc = build_bootstrap_service(owner, spec)
    assert svc["metadata"]["name"] == "demo-bootstrap"
    assert svc["spec"]["type"] == "ClusterIP" and "clusterIP" not in svc["spec"]
    assert [(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [("kafka", 9092, 9092), ("kafka-1", 9093, 9093)]
    assert svc["spec"]["selector"] == selector_labels(owner)
