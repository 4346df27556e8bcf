"""The certificate each TLS listener serves, as broker/security/serving_certificates.py reads it
for /metrics: from a PEM keystore file, inline PEM, and PKCS12; the leaf, not the CA after it; no
entry for plaintext listeners; and the two gauges BrokerMetrics exports from them."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.config import parse_config
from broker.security.serving_certificates import serving_certificates
from broker.server.metrics import BrokerMetrics
from flotilla.testenv.brokers.tls_certs import make_pki


def test_each_tls_listener_reports_its_leaf_certificate(tmp_path):
    pki = make_pki(tmp_path / "pki")
    p12 = tmp_path / "broker.p12"
    p12.write_bytes(pkcs12.serialize_key_and_certificates(b"b", pki.broker.key, pki.broker.cert, [pki.ca.cert],
                                                          serialization.BestAvailableEncryption(b"pw")))
    cfg = parse_config({
        "listeners": "PLAINTEXT://127.0.0.1:0,FILE://127.0.0.1:0,INLINE://127.0.0.1:0,P12://127.0.0.1:0,OLD://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,FILE:SSL,INLINE:SASL_SSL,P12:SSL,OLD:SSL",
        "ssl.keystore.type": "PEM",
        "listener.name.file.ssl.keystore.location": str(pki.broker_keystore),
        "listener.name.inline.ssl.keystore.certificate.chain": (pki.broker.cert_pem() + pki.ca.cert_pem()).decode(),
        "listener.name.inline.ssl.keystore.key": pki.broker.key_pem().decode(),
        "listener.name.p12.ssl.keystore.type": "PKCS12",
        "listener.name.p12.ssl.keystore.location": str(p12),
        "listener.name.p12.ssl.keystore.password": "pw",
        "listener.name.old.ssl.keystore.location": str(pki.broker_keystore_expired),
    })
    certs = {c.listener: c for c in serving_certificates(cfg)}
    assert set(certs) == {"FILE", "INLINE", "P12", "OLD"}
    want = (pki.broker.cert.not_valid_before_utc.timestamp(), pki.broker.cert.not_valid_after_utc.timestamp())
    for name in ("FILE", "INLINE", "P12"):
        assert (certs[name].not_before, certs[name].not_after) == want, name
        assert certs[name].subject == pki.broker.cert.subject.rfc4514_string()  # the leaf, not the CA
    assert certs["OLD"].not_after < want[0]  # the expired one, ten days ago

    metrics = BrokerMetrics()
    metrics.watch_certificates(certs.values())
    samples = {(s.name, s.labels["listener"]): s.value
               for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
               for s in family.samples if s.name.startswith("flotilla_broker_certificate")}
    assert samples[("flotilla_broker_certificate_expiry_timestamp_seconds", "FILE")] == want[1]
    assert samples[("flotilla_broker_certificate_not_before_timestamp_seconds", "P12")] == want[0]
    assert len(samples) == 8  # two per TLS listener, none for PLAINTEXT


def test_an_unreadable_keystore_is_left_out(tmp_path):
    cfg = parse_config({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                        "ssl.keystore.location": str(tmp_path / "missing.pem")})
    assert serving_certificates(cfg) == []
