"""The X.509 arithmetic of the operator's certificate authorities (cryptography; pure, no I/O).

A KafkaCluster with TLS listeners and no keystore of its own gets two CAs, as Strimzi's users know
them: the cluster CA signs the brokers' server certificates (clients trust its `ca.crt`), the
clients CA signs KafkaUser certificates (the mTLS listeners trust it). Keys are ECDSA P-256 in
PKCS#8 PEM, the shape Kafka's PEM keystores read (`ssl.keystore.type=PEM`, broker/security/tls.py).
`builders/certificates.py` decides what to issue and when; this module only issues and reads.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ORGANIZATION = "flotilla.io"
# Issued a little in the past: a node whose clock lags the operator's still accepts a new certificate.
BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A private key and its certificate, both PEM text."""

    key_pem: str
    cert_pem: str

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem.encode())

    @property
    def private_key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem.encode(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key

    @property
    def keystore_pem(self) -> str:
        """Kafka's PEM keystore file: the private key, then the certificate."""
        return self.key_pem + self.cert_pem


def _name(common_name: str, unit: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION)]
    if unit:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _pair(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> KeyPair:
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return KeyPair(key_pem, cert.public_bytes(serialization.Encoding.PEM).decode())


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: dt.datetime,
             days: int) -> x509.CertificateBuilder:
    return (x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False))


def new_ca(common_name: str, *, now: dt.datetime, days: int) -> KeyPair:
    """A self-signed CA that signs end-entity certificates only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = (_builder(name, name, key.public_key(), now, days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return _pair(key, cert)


def _alt_name(name: str) -> x509.GeneralName:
    """An IP address SAN for an address (what a client dialling an IP verifies), else a DNS name."""
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def issue(ca: KeyPair, common_name: str, *, now: dt.datetime, days: int, alt_names: tuple[str, ...] = (),
          unit: str | None = None, server: bool = False) -> KeyPair:
    """An end-entity certificate signed by `ca`: a server certificate for `alt_names` (host names
    or IP addresses; brokers, which also present it as clients to each other), or a client
    certificate whose subject names the user (`CN=<common_name>`), never outliving the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = ca.certificate
    days = max(1, min(days, (not_after(ca.cert_pem) - now).days))
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server else [
        ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (_builder(_name(common_name, unit), ca_cert.subject, key.public_key(), now, days)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False,
                                            content_commitment=False, key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.private_key.public_key()),
                              critical=False))
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName([_alt_name(n) for n in alt_names]),
                                        critical=False)
    return _pair(key, builder.sign(ca.private_key, hashes.SHA256()))


def not_after(cert_pem: str) -> dt.datetime:
    return x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_after_utc


def _san(cert_pem: str) -> x509.SubjectAlternativeName | None:
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    try:
        return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def dns_names(cert_pem: str) -> tuple[str, ...]:
    """The DNS names of a certificate's SubjectAlternativeName (none: ())."""
    san = _san(cert_pem)
    return tuple(san.get_values_for_type(x509.DNSName)) if san else ()


def alt_names(cert_pem: str) -> tuple[str, ...]:
    """Its DNS names and IP addresses (as text), as issue() takes them."""
    san = _san(cert_pem)
    return (*san.get_values_for_type(x509.DNSName), *map(str, san.get_values_for_type(x509.IPAddress))) if san else ()


def common_name(cert_pem: str) -> str | None:
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else None


def signed_by(cert_pem: str, ca: KeyPair) -> bool:
    """Whether `ca` issued this certificate (its signature verifies with the CA's key)."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    try:
        cert.verify_directly_issued_by(ca.certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def renewal_due(cert_pem: str, *, now: dt.datetime, renew_before_days: int) -> bool:
    """Whether a certificate is inside its renewal window (or expired)."""
    return not_after(cert_pem) - now <= dt.timedelta(days=renew_before_days)


def pem_certificates(bundle: str) -> list[str]:
    """The certificates of a PEM bundle, each as its own PEM text."""
    return [c.public_bytes(serialization.Encoding.PEM).decode()
            for c in x509.load_pem_x509_certificates(bundle.encode())] if bundle.strip() else []
