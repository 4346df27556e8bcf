"""`spec.certificates.issuerRef` (issue 23) against a real control plane with kwok's fake kubelets,
the operator in-process and a real cert-manager controller (built from source by the testenv).

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_cert_manager.py

Covers: a CA Issuer made the way cert-manager's documentation makes one (a self-signed issuer, a CA
Certificate, an Issuer over its Secret); a KafkaCluster with TLS listeners naming it gets a
cert-manager Certificate per broker, and the brokers' mounted Secret holds what cert-manager issued
(signed by that CA, for the brokers' DNS names), the CA bundle clients trust is the issuer's, and the
operator keeps no CA of its own; the broker's own TLS code serves them to a client that verifies
the broker's name and presents another broker's certificate; a tls KafkaUser gets a Certificate from
the same issuer, whose Secret maps to User:<name> and goes with the KafkaUser; a renewal by cert-manager (as `cmctl renew` asks for it) rolls the
brokers onto the new certificates; a KafkaCluster naming an issuer before cert-manager has issued
anything says it waits (CertificatesPending) and applies no broker. No broker runs on kwok:
brokers serving an issuer's certificates to real clients is what test_operator_in_cluster.py shows
for the operator's own, with the same files.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from pathlib import Path

import pytest
from flotilla.testenv import cert_manager
from flotilla_operator import pki
from tests.e2e.test_operator import apply, condition, get_json, kafkacluster, ready_at_generation
from tests.e2e.test_operator_fleet_ops import operator  # noqa: F401  (operator: the module's fixture)
from tests.e2e.test_operator_listeners import secret, template_generation
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(600)]

NAME = "secure"  # test_operator_listeners.template_generation reads <NAME>-broker
LISTENERS = [{"name": "SECURE", "port": 9093, "protocol": "SASL_SSL"},
             {"name": "MTLS", "port": 9094, "protocol": "SSL", "authentication": "tls"}]


@pytest.fixture(scope="module")
def issuing(kube_env, tmp_path_factory):
    """cert-manager's CRDs and controller; yields its log's path."""
    cert_manager.install_crds(kube_env.kubectl)
    log = tmp_path_factory.mktemp("cert-manager") / "cert-manager.log"
    with cert_manager.running(kube_env.kubeconfig, log, kube_env.bin_dir) as path:
        yield path


@contextlib.contextmanager
def explained(kube_env, ns: str, log: Path):
    """On a failed wait: the Certificates' conditions and the end of cert-manager's log."""
    try:
        yield
    except BaseException:
        certs = get_json(kube_env, "certificates.cert-manager.io", "-n", ns, check=False) or {}
        for c in certs.get("items", []):
            print(c["metadata"]["name"], json.dumps((c.get("status") or {}).get("conditions")))
        print("--- cert-manager log (end) ---\n" + "\n".join(log.read_text().splitlines()[-60:]))
        raise


def ca_issuer(kube_env, ns: str) -> str:
    """A CA Issuer as cert-manager's documentation bootstraps one; returns the CA certificate."""
    ref = {"kind": "Issuer", "group": "cert-manager.io"}
    for obj in (
        {"kind": "Issuer", "metadata": {"name": "bootstrap"}, "spec": {"selfSigned": {}}},
        {"kind": "Certificate", "metadata": {"name": "root-ca"},
         "spec": {"isCA": True, "commonName": "flotilla test root", "secretName": "root-ca",
                  "privateKey": {"algorithm": "ECDSA", "size": 256}, "issuerRef": {"name": "bootstrap", **ref}}},
    ):
        apply(kube_env, {"apiVersion": "cert-manager.io/v1", **obj, "metadata": {**obj["metadata"], "namespace": ns}})
    root = wait_for("the root CA issued", lambda: secret(kube_env, ns, "root-ca"),
                    until=lambda got: bool(got.get("tls.crt")), timeout=60)
    apply(kube_env, {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                     "metadata": {"name": "ca", "namespace": ns}, "spec": {"ca": {"secretName": "root-ca"}}})
    return root["tls.crt"]


def test_cert_manager_issues_the_brokers_certificates_and_its_renewal_rolls_them(
        kube_env, kube_namespace, operator, issuing, tmp_path):
    ns = kube_namespace
    with explained(kube_env, ns, issuing):
        ca = ca_issuer(kube_env, ns)
        apply(kube_env, kafkacluster(NAME, ns, replicas=3, listeners=LISTENERS,
                                     certificates={"issuerRef": {"name": "ca"}}))
        wait_for("KafkaCluster Ready", ready_at_generation(kube_env, ns, NAME, 3), timeout=180)

    got = get_json(kube_env, "certificates.cert-manager.io", "-n", ns)["items"]
    ours = {c["metadata"]["name"]: c for c in got if c["metadata"]["name"].startswith(f"{NAME}-broker-")}
    assert sorted(ours) == [f"{NAME}-broker-0", f"{NAME}-broker-1", f"{NAME}-broker-2"]
    assert ours[f"{NAME}-broker-1"]["spec"]["issuerRef"] == {"name": "ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert ours[f"{NAME}-broker-1"]["metadata"]["ownerReferences"][0]["kind"] == "KafkaCluster"

    brokers = secret(kube_env, ns, f"{NAME}-broker-certs")
    ca_pair = pki.KeyPair(secret(kube_env, ns, "root-ca")["tls.key"], ca)
    for ordinal in range(3):
        issued = secret(kube_env, ns, f"{NAME}-broker-{ordinal}-tls")
        assert brokers[f"broker-{ordinal}.pem"].startswith(issued["tls.key"].rstrip("\n"))
        cert = pki.pem_certificates(brokers[f"broker-{ordinal}.pem"])[0]
        assert pki.signed_by(cert, ca_pair), "not issued by the named issuer's CA"
        assert f"{NAME}-broker-{ordinal}.{NAME}-brokers.{ns}.svc" in pki.dns_names(cert)
    assert brokers["ca.crt"] == brokers["clients-ca.crt"] == ca
    assert secret(kube_env, ns, f"{NAME}-cluster-ca-cert") == {"ca.crt": ca}
    assert secret(kube_env, ns, f"{NAME}-cluster-ca") == {}, "the operator made a CA of its own"
    assert template_generation(kube_env, ns) == "1"

    # The files as the broker's own TLS code loads them: a client trusting the cluster's CA bundle
    # reaches broker 0 by its DNS name, presenting broker 1's certificate (mTLS: the issuer's CA).
    from tests.unit.operator.test_operator_certificates import _serve_and_connect, broker_server

    server = broker_server(tmp_path, brokers, "clients-ca.crt", "listener MTLS", "required")
    issued1 = secret(kube_env, ns, f"{NAME}-broker-1-tls")
    (tmp_path / "b1.crt").write_text(issued1["tls.crt"])
    (tmp_path / "b1.key").write_text(issued1["tls.key"])
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    client.load_cert_chain(tmp_path / "b1.crt", tmp_path / "b1.key")
    principal = _serve_and_connect(tmp_path, server, client, f"{NAME}-broker-0.{NAME}-brokers.{ns}.svc")
    assert principal == f"User:CN={NAME}-broker-1,OU=brokers,O=flotilla.io", principal

    # A tls KafkaUser: a Certificate from the same issuer, CN=<user> mapped to User:<user>.
    apply(kube_env, {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser", "metadata": {"name": "alice",
                     "namespace": ns}, "spec": {"clusterRef": {"name": NAME}, "authentication": {"type": "tls"}}})
    with explained(kube_env, ns, issuing):
        alice = wait_for("alice's certificate from cert-manager, owned by the KafkaUser",
                         lambda: get_json(kube_env, "secret", "alice", "-n", ns, check=False) or {},
                         until=lambda got: any(r["kind"] == "KafkaUser" for r in
                                               got.get("metadata", {}).get("ownerReferences") or []), timeout=90)
    files = secret(kube_env, ns, "alice")
    assert pki.signed_by(files["tls.crt"], ca_pair) and files["ca.crt"] == ca
    (tmp_path / "alice.crt").write_text(files["tls.crt"])
    (tmp_path / "alice.key").write_text(files["tls.key"])
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    client.load_cert_chain(tmp_path / "alice.crt", tmp_path / "alice.key")
    assert _serve_and_connect(tmp_path, server, client, f"{NAME}-broker-0.{NAME}-brokers.{ns}.svc") == "User:alice"
    assert alice["metadata"]["annotations"]["cert-manager.io/certificate-name"] == "alice"

    # A renewal, as `cmctl renew` asks for one: the Issuing condition on the Certificate.
    before = brokers["broker-2.pem"]
    kube_env.kubectl("patch", "certificates.cert-manager.io", f"{NAME}-broker-2", "-n", ns, "--subresource=status",
                     "--type=merge", "-p", json.dumps({"status": {"conditions": [
                         {"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
                          "message": "renewal requested by the test", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
    with explained(kube_env, ns, issuing):
        wait_for("the renewed certificate in the brokers' Secret and a new generation on the pod template",
                 lambda: (secret(kube_env, ns, f"{NAME}-broker-certs").get("broker-2.pem") != before,
                          template_generation(kube_env, ns)),
                 until=lambda got: got == (True, "2"), timeout=150)
        wait_for("KafkaCluster Ready after the roll", ready_at_generation(kube_env, ns, NAME, 3), timeout=240)


def test_a_cluster_waits_for_cert_manager_and_starts_no_broker_before(kube_env, kube_namespace, operator, issuing):
    """An issuer that never issues (it does not exist): the KafkaCluster says what it waits for and
    no StatefulSet is applied, so no broker starts without its certificate."""
    ns, name = kube_namespace, "waiting"
    apply(kube_env, kafkacluster(name, ns, replicas=1, listeners=LISTENERS[:1],
                                 certificates={"issuerRef": {"name": "nowhere", "kind": "ClusterIssuer"}}))
    ready = wait_for("Ready=False CertificatesPending",
                     lambda: condition(get_json(kube_env, "kafkacluster", name, "-n", ns), "Ready"),
                     until=lambda c: c.get("reason") == "CertificatesPending", timeout=90)
    assert f"waiting for cert-manager (ClusterIssuer nowhere) to issue Certificate {name}-broker-0" in ready["message"]
    assert get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns, check=False) is None
