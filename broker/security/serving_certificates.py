"""The certificate each TLS listener serves, read from the same keystore settings the listener's
context loads (broker/security/tls.py), so that /metrics can say when it expires.

Read once, when the broker starts, as the listener loads its keys: the certificate a running
broker serves is the one loaded then, whatever its keystore file holds now (a renewed Secret
reaches a listener only with a restart), and the metric must say what clients are shown. Only the
leaf (the first certificate of the chain) is reported. A keystore that cannot be read here leaves
the listener out of the metric; the listener itself then fails with the message tls.py gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from broker.config import BrokerConfig
from broker.security.tls import _PEM_BLOCK, normalize_pem

TLS_PROTOCOLS = ("SSL", "SASL_SSL")


@dataclass(frozen=True)
class ServingCertificate:
    listener: str
    subject: str
    not_before: float  # Unix time
    not_after: float


def leaf_certificate(get: Callable[[str], Any]) -> x509.Certificate | None:
    """The first certificate of a listener's keystore (inline PEM, a PEM file or PKCS12)."""
    kind = str(get("ssl.keystore.type") or "PEM").upper()
    chain, location = get("ssl.keystore.certificate.chain"), get("ssl.keystore.location")
    if chain:
        return _first_pem(normalize_pem(chain))
    if not location:
        return None
    if kind == "PKCS12":
        password = get("ssl.keystore.password")
        _, cert, _ = pkcs12.load_key_and_certificates(Path(location).read_bytes(),
                                                      password.encode() if password else None)
        return cert
    return _first_pem(Path(location).read_text())


def _first_pem(text: str) -> x509.Certificate | None:
    for m in _PEM_BLOCK.finditer(text):
        if m.group(1) == "CERTIFICATE":
            return x509.load_pem_x509_certificate(m.group(0).encode())
    return None


def serving_certificates(config: BrokerConfig) -> list[ServingCertificate]:
    """One entry per TLS listener whose certificate could be read."""
    out = []
    for listener in config.listeners:
        name = listener.name
        if config.protocol_of(name) not in TLS_PROTOCOLS:
            continue
        try:
            cert = leaf_certificate(lambda k, n=name: config.listener_value(n, k))
        except (OSError, ValueError):
            cert = None
        if cert is not None:
            out.append(ServingCertificate(name, cert.subject.rfc4514_string(),
                                          cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()))
    return out
