"""A broker serving TLS exports the validity of the certificate each TLS listener serves on
/metrics (flotilla_broker_certificate_expiry_timestamp_seconds and ..._not_before_...), the
series the FlotillaCertificateExpiring alert reads, so that it fires from the brokers themselves
even while the operator is down. One Flotilla broker with the secure suites' listeners
(tests/support/secure_broker.py): SSL and SASL_SSL from a PEM file, MTLS inline, EXPIRED with a
certificate that ran out ten days ago; PLAINTEXT reports nothing.

    pytest tests/e2e/test_broker_certificate_metrics.py
"""

from __future__ import annotations

import ssl
import socket
import time
import urllib.request

from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from tests.support.secure_broker import TLS_LISTENERS, running_secure_broker


def served_certificate(port: int) -> x509.Certificate:
    """The certificate a TLS handshake with the listener is shown (not checked: one is expired)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))


def test_each_tls_listener_reports_the_certificate_it_serves(tmp_path):
    with running_secure_broker("flotilla", tmp_path) as sb:
        with urllib.request.urlopen(sb.broker.metrics_url, timeout=10) as resp:
            text = resp.read().decode()
        samples = {(s.name, s.labels.get("listener")): s.value for f in text_string_to_metric_families(text)
                   for s in f.samples if s.name.startswith("flotilla_broker_certificate_")}
        assert {listener for _, listener in samples} == set(TLS_LISTENERS), samples
        for listener in TLS_LISTENERS:
            cert = served_certificate(sb.ports[listener])
            assert samples[("flotilla_broker_certificate_expiry_timestamp_seconds", listener)] == \
                cert.not_valid_after_utc.timestamp(), listener
            assert samples[("flotilla_broker_certificate_not_before_timestamp_seconds", listener)] == \
                cert.not_valid_before_utc.timestamp(), listener
        now = time.time()
        assert samples[("flotilla_broker_certificate_expiry_timestamp_seconds", "EXPIRED")] < now
        assert samples[("flotilla_broker_certificate_expiry_timestamp_seconds", "SSL")] > now
