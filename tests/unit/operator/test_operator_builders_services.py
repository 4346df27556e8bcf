"""Headless and bootstrap Services."""

from __future__ import annotations

import pytest

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


# --- external (NodePort) listeners ---------------------------------------------------------------

def _external_spec(replicas: int = 3):
    from flotilla_operator.models import KafkaClusterSpec

    return KafkaClusterSpec.model_validate({"replicas": replicas, "listeners": [
        {"name": "PLAINTEXT", "port": 9092},
        {"name": "EXTERNAL", "port": 9095, "protocol": "SASL_PLAINTEXT", "external": {"type": "nodeport", "nodePort": 31090}}]})


def test_an_external_listener_gets_a_bootstrap_and_a_node_port_per_broker():
    from flotilla_operator.builders.common import Owner
    from flotilla_operator.builders.services import EXTERNAL_LABEL, build_external_services

    owner = Owner("demo", "ns", "uid-1")
    services = build_external_services(owner, _external_spec(), 3)
    got = {s["metadata"]["name"]: (s["spec"]["type"], s["spec"]["ports"][0]["nodePort"], s["spec"]["ports"][0]["targetPort"],
                                   s["spec"]["selector"].get("statefulset.kubernetes.io/pod-name"))
           for s in services}
    assert got == {"demo-bootstrap-9095": ("NodePort", 31090, 9095, None),
                   "demo-broker-0-9095": ("NodePort", 31091, 9095, "demo-broker-0"),
                   "demo-broker-1-9095": ("NodePort", 31092, 9095, "demo-broker-1"),
                   "demo-broker-2-9095": ("NodePort", 31093, 9095, "demo-broker-2")}
    assert all(s["metadata"]["labels"][EXTERNAL_LABEL] == "EXTERNAL" and s["spec"]["publishNotReadyAddresses"]
               for s in services)
    assert all(s["metadata"]["ownerReferences"][0]["uid"] == "uid-1" for s in services)


def test_each_broker_advertises_its_node_and_its_own_node_port():
    from flotilla_operator.builders.common import Owner
    from flotilla_operator.builders.statefulset import broker_command, build_statefulset

    owner = Owner("demo", "ns", "uid-1")
    script = broker_command(owner, _external_spec())[2]
    assert "EXTERNAL://${HOST_IP}:$((31091 + ordinal))" in script
    assert "PLAINTEXT://${HOSTNAME}.demo-brokers.ns.svc:9092" in script
    env = build_statefulset(owner, _external_spec(), image="i", config_hash="h")["spec"]["template"]["spec"][
        "containers"][0]["env"]
    assert {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in env
    # the shell arithmetic gives each ordinal its port, as the Services number them
    import subprocess
    out = subprocess.run(["sh", "-c", 'ordinal="${HOSTNAME##*-}"; echo "$((31091 + ordinal))"'],
                         env={"HOSTNAME": "demo-broker-2"}, capture_output=True, text=True)
    assert out.stdout.strip() == "31093"


def test_a_removed_brokers_and_listeners_external_services_are_stale():
    from flotilla_operator.builders.common import Owner
    from flotilla_operator.builders.services import build_external_services, stale_external_services

    owner = Owner("demo", "ns", "uid-1")
    existing = build_external_services(owner, _external_spec(4), 4) + [
        {"metadata": {"name": "demo-bootstrap", "labels": {}}}]
    assert stale_external_services(existing, build_external_services(owner, _external_spec(3), 3)) == ["demo-broker-3-9095"]
    assert stale_external_services(existing, []) == sorted(s["metadata"]["name"] for s in existing[:-1])


@pytest.mark.parametrize("listeners, message", [
    ([{"name": "A", "port": 9092, "external": {"type": "nodeport", "nodePort": 31000}}], "spec.listeners[0].external must be unset"),
    ([{"name": "A", "port": 9092}, {"name": "B", "port": 9093, "external": {"type": "nodeport", "nodePort": 31000}},
      {"name": "C", "port": 9094, "external": {"type": "nodeport", "nodePort": 31050}}], "nodePort ranges overlap"),
    ([{"name": "A", "port": 9092}, {"name": "B", "port": 9093, "external": {"type": "nodeport", "nodePort": 32760}}],
     "less than or equal to 32703"),
])
def test_external_listeners_that_cannot_work_are_refused(listeners, message):
    from flotilla_operator.models import KAFKA_CLUSTER, parse_spec

    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_spec(KAFKA_CLUSTER, {"listeners": listeners})
