"""The operator's listeners (issue 23) against a real control plane, with kwok's fake kubelets and
the operator in-process: the certificates of TLS listeners and the Services of external ones, as
written to the API server, and how the fleet follows them.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_listeners.py

Covers: a KafkaCluster with a SASL_SSL first listener and an mTLS second one gets its cluster and
clients CAs and a certificate per broker for that broker's DNS names, in Secrets it owns, mounted
by the pods; a KafkaUser with `authentication: tls` gets a certificate CN=<name> from the clients
CA and the CA bundle to trust the brokers with (one whose name a foreign Secret holds is refused
with reason Conflict and the Secret left alone); a renewal (here: a renewal window in the spec
longer than what is left, as a user renews ahead of time) re-issues every broker certificate
and rolls the brokers one at a time; a scale-up issues the new broker's certificate and restarts
nobody. An external NodePort listener gets a bootstrap Service and one per broker, whose ports
follow the brokers as the fleet grows and shrinks (a removed broker's Service is deleted). No broker
runs on kwok: that the brokers serve these files (and clients connect with them) is shown by the
unit tests with the broker's own TLS code and on real pods (test_operator_in_cluster.py), as is a
client reaching every broker through its nodePort.
"""

from __future__ import annotations

import base64
import json

import pytest
from flotilla_operator import pki
from tests.e2e.test_operator import (PodWatch, apply, broker_pods, condition, get_json, kafkacluster,
                                     most_out_at_once, ready_at_generation)
from tests.e2e.test_operator_fleet_ops import operator, wait_event  # noqa: F401  (operator: the module's fixture)
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(600)]

NAME = "secure"
LISTENERS = [{"name": "SECURE", "port": 9093, "protocol": "SASL_SSL"},
             {"name": "MTLS", "port": 9094, "protocol": "SSL", "authentication": "tls"}]
GENERATION = "flotilla.io/certificate-generation"


def secret(kube_env, ns: str, name: str) -> dict[str, str]:
    obj = get_json(kube_env, "secret", name, "-n", ns, check=False)
    return {k: base64.b64decode(v).decode() for k, v in ((obj or {}).get("data") or {}).items()}


def template_generation(kube_env, ns: str) -> str | None:
    sts = get_json(kube_env, "statefulset", f"{NAME}-broker", "-n", ns, check=False) or {}
    return (((sts.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations", {}).get(GENERATION)


def test_tls_listeners_get_certificates_users_get_theirs_and_a_renewal_rolls_the_brokers(
        kube_env, kube_namespace, operator, tmp_path):
    ns = kube_namespace
    apply(kube_env, kafkacluster(NAME, ns, replicas=3, listeners=LISTENERS))
    wait_for("KafkaCluster Ready", ready_at_generation(kube_env, ns, NAME, 3), timeout=180)

    cluster_ca = secret(kube_env, ns, f"{NAME}-cluster-ca")
    ca = pki.KeyPair(cluster_ca["ca.key"], cluster_ca["ca.crt"])
    clients = secret(kube_env, ns, f"{NAME}-clients-ca")
    clients_ca = pki.KeyPair(clients["ca.key"], clients["ca.crt"])
    assert secret(kube_env, ns, f"{NAME}-cluster-ca-cert") == {"ca.crt": ca.cert_pem}
    assert secret(kube_env, ns, f"{NAME}-clients-ca-cert") == {"ca.crt": clients_ca.cert_pem}
    brokers = secret(kube_env, ns, f"{NAME}-broker-certs")
    assert sorted(brokers) == ["broker-0.names", "broker-0.pem", "broker-1.names", "broker-1.pem", "broker-2.names",
                               "broker-2.pem", "ca.crt", "clients-ca.crt"]
    for ordinal in range(3):
        cert = pki.pem_certificates(brokers[f"broker-{ordinal}.pem"])[0]
        assert pki.signed_by(cert, ca)
        assert f"{NAME}-broker-{ordinal}.{NAME}-brokers.{ns}.svc" in pki.dns_names(cert)
    owners = get_json(kube_env, "secret", f"{NAME}-broker-certs", "-n", ns)["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"]) for o in owners] == [("KafkaCluster", NAME)]
    wait_event(kube_env, ns, "KafkaCluster", NAME, "CertificatesIssued")
    pods = broker_pods(kube_env, ns, NAME)
    assert {p["metadata"]["annotations"].get(GENERATION) for p in pods} == {"1"}
    assert all({"name": "tls", "secret": {"secretName": f"{NAME}-broker-certs", "defaultMode": 0o440}}
               in p["spec"]["volumes"] for p in pods)
    config = get_json(kube_env, "configmap", f"{NAME}-config", "-n", ns)["data"]["server.properties"]
    assert "listener.name.mtls.ssl.client.auth=required" in config

    # A TLS user: its certificate from the clients CA, whatever the (unreachable, kwok) brokers say.
    apply(kube_env, {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser",
                     "metadata": {"name": "alice", "namespace": ns},
                     "spec": {"clusterRef": {"name": NAME}, "authentication": {"type": "tls"}}})
    alice = wait_for("alice's certificate", lambda: secret(kube_env, ns, "alice"),
                     until=lambda s: "user.crt" in s, timeout=60)
    assert pki.signed_by(alice["user.crt"], clients_ca) and pki.common_name(alice["user.crt"]) == "alice"
    assert alice["ca.crt"] == ca.cert_pem and alice["user.pem"] == alice["user.key"] + alice["user.crt"]
    assert "password" not in alice
    # A Secret of a TLS user's name that is not the operator's is left alone, and says so.
    kube_env.kubectl("create", "secret", "generic", "mallory", "-n", ns, "--from-literal=token=hers")
    apply(kube_env, {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser",
                     "metadata": {"name": "mallory", "namespace": ns},
                     "spec": {"clusterRef": {"name": NAME}, "authentication": {"type": "tls"}}})
    refused = wait_for("mallory Ready=False Conflict", lambda: condition(
        get_json(kube_env, "kafkauser", "mallory", "-n", ns, check=False), "Ready"),
        until=lambda c: c.get("reason") == "Conflict", timeout=60)
    assert "is not this KafkaUser's" in refused["message"], refused
    assert secret(kube_env, ns, "mallory") == {"token": "hers"}

    # Renewal ahead of time: a window longer than what is left re-issues every broker certificate
    # (the CA stays) and rolls the brokers, one at a time.
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    watch = PodWatch(kube_env, ns, NAME, tmp_path / "pod-events.json")
    try:
        wait_for("the pod watch to list the brokers", lambda: {e["object"]["metadata"]["name"] for e in watch.events()},
                 until=lambda seen: seen >= set(before), timeout=60)
        kube_env.kubectl("patch", "kafkacluster", NAME, "-n", ns, "--type=merge", "-p",
                         '{"spec": {"certificates": {"validityDays": 400, "renewBeforeDays": 366}}}')
        wait_for("generation 2 on the pod template", lambda: template_generation(kube_env, ns),
                 until=lambda g: g == "2", timeout=60)
        wait_for("every broker replaced with generation 2", lambda: broker_pods(kube_env, ns, NAME),
                 until=lambda got: len(got) == 3 and not {p["metadata"]["uid"] for p in got} & set(before.values())
                 and {p["metadata"]["annotations"].get(GENERATION) for p in got} == {"2"}, timeout=240)
        wait_for("Ready after the renewal", ready_at_generation(kube_env, ns, NAME, 3), timeout=120)
    finally:
        events = watch.stop()
    worst, out = most_out_at_once(events, sorted(before), set(before.values()))
    assert worst == 1, f"{worst} brokers out at once during the renewal roll: {out}"
    renewed = secret(kube_env, ns, f"{NAME}-broker-certs")
    for ordinal in range(3):
        old, new = (pki.pem_certificates(s[f"broker-{ordinal}.pem"])[0] for s in (brokers, renewed))
        assert old != new and pki.signed_by(new, ca)
        assert pki.not_after(new) > pki.not_after(old)
    assert secret(kube_env, ns, f"{NAME}-cluster-ca")["ca.crt"] == ca.cert_pem

    # A scale-up: the new broker's certificate, no restart of the others.
    kept = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(kube_env, ns, NAME)}
    kube_env.kubectl("patch", "kafkacluster", NAME, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 4}}')
    wait_for("KafkaCluster Ready with 4 brokers", ready_at_generation(kube_env, ns, NAME, 4), timeout=180)
    grown = secret(kube_env, ns, f"{NAME}-broker-certs")
    assert "broker-3.pem" in grown and {k: grown[k] for k in renewed} == renewed
    assert template_generation(kube_env, ns) == "2"
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(kube_env, ns, NAME)}
    assert {n: now[n] for n in kept} == kept, "a scale-up restarted a broker"
    ready = condition(get_json(kube_env, "kafkacluster", NAME, "-n", ns), "Ready")
    assert ready.get("status") == "True", ready


def test_external_node_port_services_follow_the_brokers(kube_env, kube_namespace, operator):
    ns, name = kube_namespace, "outside"
    listeners = [{"name": "PLAINTEXT", "port": 9092},
                 {"name": "EXTERNAL", "port": 9095, "external": {"type": "nodeport", "nodePort": 31190}}]
    apply(kube_env, kafkacluster(name, ns, replicas=3, listeners=listeners))
    wait_for("KafkaCluster Ready", ready_at_generation(kube_env, ns, name, 3), timeout=180)

    def node_ports():
        got = get_json(kube_env, "services", "-n", ns, "-l", "flotilla.io/external-listener")["items"]
        return {s["metadata"]["name"]: s["spec"]["ports"][0]["nodePort"] for s in got}
    assert node_ports() == {f"{name}-bootstrap-9095": 31190, f"{name}-broker-0-9095": 31191,
                            f"{name}-broker-1-9095": 31192, f"{name}-broker-2-9095": 31193}
    pod = broker_pods(kube_env, ns, name)[0]
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["HOST_IP"]["valueFrom"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}}

    kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 2}}')
    wait_for("the third broker's Service removed with the broker", node_ports,
             until=lambda got: set(got) == {f"{name}-bootstrap-9095", f"{name}-broker-0-9095", f"{name}-broker-1-9095"},
             timeout=120)
    # the listener made internal again: every external Service goes
    apply(kube_env, kafkacluster(name, ns, replicas=2, listeners=[listeners[0], {"name": "EXTERNAL", "port": 9095}]))
    wait_for("the external Services removed", node_ports, until=lambda got: got == {}, timeout=120)


def test_load_balancer_addresses_reach_the_brokers_as_the_cloud_assigns_them(kube_env, kube_namespace, operator):
    """A listener with `external: {type: loadbalancer}`: a LoadBalancer Service for bootstrapping and
    one per broker, with the spec's annotations; the test plays the cloud's controller and writes a
    load balancer's address into a broker Service's status, and the operator hands it to the brokers
    in the addresses ConfigMap their pods mount (within seconds: it watches the Services); a removed
    broker's Service and address go with it."""
    ns, name = kube_namespace, "cloudy"
    annotations = {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}
    listeners = [{"name": "PLAINTEXT", "port": 9092},
                 {"name": "CLOUD", "port": 9096, "external": {"type": "loadbalancer", "annotations": annotations}}]
    apply(kube_env, kafkacluster(name, ns, replicas=3, listeners=listeners))
    wait_for("KafkaCluster Ready", ready_at_generation(kube_env, ns, name, 3), timeout=180)

    def services():
        got = get_json(kube_env, "services", "-n", ns, "-l", "flotilla.io/external-listener")["items"]
        return {s["metadata"]["name"]: s for s in got}
    got = services()
    assert {n: s["spec"]["type"] for n, s in got.items()} == {
        f"{name}-bootstrap-9096": "LoadBalancer", f"{name}-broker-0-9096": "LoadBalancer",
        f"{name}-broker-1-9096": "LoadBalancer", f"{name}-broker-2-9096": "LoadBalancer"}
    assert all(s["metadata"]["annotations"][k] == v for s in got.values() for k, v in annotations.items())

    def addresses():
        return (get_json(kube_env, "configmap", f"{name}-external-addresses", "-n", ns, check=False) or {}).get(
            "data") or {}
    assert addresses() == {}, "an address before any load balancer had one"
    pod = broker_pods(kube_env, ns, name)[0]
    assert {"name": "external-addresses", "configMap": {"name": f"{name}-external-addresses", "defaultMode": 420}} in \
        pod["spec"]["volumes"]

    def assign(service: str, ingress: dict) -> None:
        kube_env.kubectl("patch", "service", service, "-n", ns, "--subresource=status", "--type=merge",
                         "-p", json.dumps({"status": {"loadBalancer": {"ingress": [ingress]}}}))
    assign(f"{name}-broker-1-9096", {"ip": "203.0.113.11"})
    wait_for("broker 1's address handed over", addresses, until=lambda got: got == {"CLOUD.1": "203.0.113.11"},
             timeout=30)
    assign(f"{name}-broker-0-9096", {"hostname": "b0.elb.example.com"})
    assign(f"{name}-broker-2-9096", {"ip": "203.0.113.12"})
    wait_for("every broker's address handed over", addresses,
             until=lambda got: got == {"CLOUD.0": "b0.elb.example.com", "CLOUD.1": "203.0.113.11",
                                       "CLOUD.2": "203.0.113.12"}, timeout=30)

    kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 2}}')
    wait_for("the third broker's load balancer and address removed with the broker",
             lambda: (set(services()), addresses()),
             until=lambda got: got[0] == {f"{name}-bootstrap-9096", f"{name}-broker-0-9096", f"{name}-broker-1-9096"}
             and got[1] == {"CLOUD.0": "b0.elb.example.com", "CLOUD.1": "203.0.113.11"}, timeout=120)
