"""Headless and bootstrap Services."""

from __future__ import annotations

import pytest

from flotilla_operator.builders.common import selector_labels
from flotilla_operator.builders.services import build_bootstrap_service, build_headless_service
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec


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
    from flotilla_operator.api.kafka_cluster import KafkaClusterSpec

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
    ([{"name": "A", "port": 9092}, {"name": "B", "port": 9093, "external": {"type": "nodeport"}}],
     "spec.listeners[].external.nodePort is required with type nodeport"),
    ([{"name": "A", "port": 9092}, {"name": "B", "port": 9093, "external": {"type": "loadbalancer", "nodePort": 31000}}],
     "spec.listeners[].external.nodePort must be unset with type loadbalancer"),
])
def test_external_listeners_that_cannot_work_are_refused(listeners, message):
    from flotilla_operator.api.common import parse_spec
    from flotilla_operator.api.kafka_cluster import KAFKA_CLUSTER

    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_spec(KAFKA_CLUSTER, {"listeners": listeners})


# --- external (LoadBalancer) listeners ------------------------------------------------------------

def _lb_spec(replicas: int = 3):
    return KafkaClusterSpec.model_validate({"replicas": replicas, "listeners": [
        {"name": "PLAINTEXT", "port": 9092},
        {"name": "EXTERNAL", "port": 9095, "external": {"type": "nodeport", "nodePort": 31090}},
        {"name": "CLOUD", "port": 9096, "protocol": "SASL_SSL", "external": {
            "type": "loadbalancer", "annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}}}]})


def test_a_load_balancer_listener_gets_a_load_balancer_per_broker_beside_a_node_port_one():
    from flotilla_operator.builders.common import Owner
    from flotilla_operator.builders.services import build_external_services

    services = build_external_services(Owner("demo", "ns", "uid-1"), _lb_spec(), 2)
    got = {s["metadata"]["name"]: (s["spec"]["type"], s["spec"]["ports"][0].get("nodePort"), s["spec"]["ports"][0]["port"],
                                   s["spec"]["selector"].get("statefulset.kubernetes.io/pod-name"))
           for s in services}
    assert got == {"demo-bootstrap-9095": ("NodePort", 31090, 9095, None),
                   "demo-broker-0-9095": ("NodePort", 31091, 9095, "demo-broker-0"),
                   "demo-broker-1-9095": ("NodePort", 31092, 9095, "demo-broker-1"),
                   "demo-bootstrap-9096": ("LoadBalancer", None, 9096, None),
                   "demo-broker-0-9096": ("LoadBalancer", None, 9096, "demo-broker-0"),
                   "demo-broker-1-9096": ("LoadBalancer", None, 9096, "demo-broker-1")}
    annotations = {s["metadata"]["name"]: (s["metadata"].get("annotations") or {}) for s in services}
    assert annotations["demo-broker-1-9096"] == {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}
    assert annotations["demo-broker-1-9095"] == {}


def test_load_balancer_addresses_are_read_from_the_services_status_and_handed_over_in_a_configmap():
    from flotilla_operator.builders import build_all
    from flotilla_operator.builders.common import Owner
    from flotilla_operator.builders.external_addresses import broker_addresses, certificate_addresses, pending_brokers
    from flotilla_operator.builders.services import build_external_services

    owner = Owner("demo", "ns", "uid-1")
    services = build_external_services(owner, _lb_spec(), 3)
    by_name = {s["metadata"]["name"]: s for s in services}
    by_name["demo-broker-0-9096"]["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}
    by_name["demo-broker-2-9096"]["status"] = {"loadBalancer": {"ingress": [{"hostname": "b2.elb.example.com"}]}}
    by_name["demo-bootstrap-9096"]["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}]}}
    by_name["demo-broker-1-9096"]["status"] = {"loadBalancer": {}}  # still being provisioned
    addresses = broker_addresses(owner, _lb_spec(), 3, services)
    assert addresses == {"CLOUD.bootstrap": "203.0.113.1", "CLOUD.0": "203.0.113.10", "CLOUD.2": "b2.elb.example.com"}
    assert pending_brokers(_lb_spec(), 3, addresses) == ["CLOUD.1"]
    # CLOUD is SASL_SSL: each certificate names the bootstrap load balancer and the broker's own
    assert certificate_addresses(_lb_spec(), 3, addresses) == {
        0: ("203.0.113.1", "203.0.113.10"), 1: ("203.0.113.1",), 2: ("203.0.113.1", "b2.elb.example.com")}

    objects = build_all(owner, _lb_spec(), image="i", external_addresses=addresses).objects
    configmaps = {o["metadata"]["name"]: o["data"] for o in objects if o["kind"] == "ConfigMap"}
    assert configmaps["demo-external-addresses"] == addresses
    kinds = [o["kind"] for o in objects]
    assert kinds.index("StatefulSet") == len(kinds) - 1, "the brokers start after their addresses' ConfigMap"
    # no load balancer listener: no ConfigMap and no mount
    plain = build_all(owner, _external_spec(), image="i").objects
    assert [o["metadata"]["name"] for o in plain if o["kind"] == "ConfigMap"] == ["demo-config"]


def _start_script(tmp_path, spec, hostname: str):
    """The broker's start script run by sh, with the mounted directories under tmp_path and the
    broker replaced by printing its arguments."""
    import os
    import subprocess

    from flotilla_operator.builders.certificates import TLS_DIR
    from flotilla_operator.builders.common import Owner
    from flotilla_operator.builders.external_addresses import EXTERNAL_ADDRESSES_DIR
    from flotilla_operator.builders.statefulset import broker_command

    (tmp_path / "external").mkdir()
    (tmp_path / "tls").mkdir()
    script = (broker_command(Owner("demo", "ns", "uid-1"), spec)[2]
              .replace(EXTERNAL_ADDRESSES_DIR, str(tmp_path / "external")).replace(TLS_DIR, str(tmp_path / "tls"))
              .replace("exec flotilla broker", "printf '%s\\n'"))
    return subprocess.Popen(["sh", "-c", script], env={"HOSTNAME": hostname, "HOST_IP": "192.0.2.7",
                                                        "PATH": os.environ["PATH"]},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _advertised(child) -> tuple[str, str]:
    out, err = child.communicate(timeout=10)
    assert child.returncode == 0, err
    return next(line for line in out.splitlines() if line.startswith("advertised.listeners=")), err


def _still_waiting(child) -> bool:
    import time

    time.sleep(1.5)
    return child.poll() is None


def test_a_broker_waits_for_its_load_balancer_address_then_advertises_it(tmp_path):
    """The start script itself: it waits (and says so) until its file appears, as when kubelet
    refreshes the ConfigMap volume, then advertises that address at the listener's port."""
    from flotilla_operator.builders.common import Owner
    from flotilla_operator.builders.external_addresses import EXTERNAL_ADDRESSES_DIR
    from flotilla_operator.builders.statefulset import build_statefulset

    spec = KafkaClusterSpec.model_validate({"replicas": 3, "listeners": [
        {"name": "PLAINTEXT", "port": 9092},
        {"name": "EXTERNAL", "port": 9095, "external": {"type": "nodeport", "nodePort": 31090}},
        {"name": "CLOUD", "port": 9096, "protocol": "SASL_PLAINTEXT", "external": {"type": "loadbalancer"}}]})
    pod = build_statefulset(Owner("demo", "ns", "uid-1"), spec, image="i", config_hash="h")["spec"]["template"]["spec"]
    assert {"name": "external-addresses", "configMap": {"name": "demo-external-addresses"}} in pod["volumes"]
    assert {"name": "external-addresses", "mountPath": EXTERNAL_ADDRESSES_DIR, "readOnly": True} in pod[
        "containers"][0]["volumeMounts"]

    child = _start_script(tmp_path, spec, "demo-broker-1")
    assert _still_waiting(child), "the broker started before its load balancer had an address"
    (tmp_path / "external" / "CLOUD.0").write_text("203.0.113.10")  # another broker's address
    assert _still_waiting(child)
    (tmp_path / "external" / "CLOUD.1").write_text("b1.elb.example.com")
    advertised, err = _advertised(child)
    assert advertised == ("advertised.listeners=PLAINTEXT://demo-broker-1.demo-brokers.ns.svc:9092,"
                          "EXTERNAL://192.0.2.7:31092,CLOUD://b1.elb.example.com:9096")
    assert "waiting for the load balancer address CLOUD.1 (Service demo-broker-1-9096)" in err


def test_on_a_tls_load_balancer_listener_a_broker_also_waits_for_a_certificate_naming_its_addresses(tmp_path):
    """Kubelet refreshes the ConfigMap and the certificates' Secret separately: the broker starts
    only once the certificate it mounts names its own and the bootstrap load balancer's address."""
    child = _start_script(tmp_path, _lb_spec(), "demo-broker-1")
    (tmp_path / "external" / "CLOUD.1").write_text("203.0.113.11")
    (tmp_path / "tls" / "broker-1.names").write_text("demo-broker-1.demo-brokers.ns.svc\n")  # issued before
    assert _still_waiting(child), "the broker started with a certificate without its address"
    (tmp_path / "tls" / "broker-1.names").write_text("demo-broker-1.demo-brokers.ns.svc\n203.0.113.11\n")
    assert _still_waiting(child), "the broker started before the bootstrap load balancer had an address"
    (tmp_path / "external" / "CLOUD.bootstrap").write_text("203.0.113.1")
    assert _still_waiting(child), "the broker started with a certificate without the bootstrap address"
    (tmp_path / "tls" / "broker-1.names").write_text("demo-broker-1.demo-brokers.ns.svc\n203.0.113.11\n203.0.113.1\n")
    advertised, err = _advertised(child)
    assert advertised.endswith(",CLOUD://203.0.113.11:9096")
    assert "waiting for a certificate that names 203.0.113.11" in err
    assert "waiting for the load balancer address CLOUD.bootstrap (Service demo-bootstrap-9096)" in err
