"""Test certificates made at test time (cryptography): a CA, a broker certificate for 127.0.0.1
and localhost, client certificates signed by that CA, and a second, untrusted CA with its own
client; plus an expired client certificate and an expired broker certificate (both signed by the
trusted CA: only their dates are wrong). Written as PEM files in Kafka's PEM keystore shape (private key and chain in one file,
optionally with the key encrypted), so the same files serve Flotilla, Apache Kafka and the clients.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "key-secret"


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Flotilla Tests")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


@dataclass
class Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def key_pem(self, password: str | None = None) -> bytes:
        enc = (serialization.BestAvailableEncryption(password.encode()) if password
               else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


def _issue(subject: x509.Name, issuer: Issued | None, *, ca: bool = False, server: bool = False,
           days: int = 2, expired: bool = False) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    if expired:  # valid for a day, ten days ago
        now -= datetime.timedelta(days=10)
        days = 1
    builder = (x509.CertificateBuilder()
               .subject_name(subject)
               .issuer_name(issuer.cert.subject if issuer else subject)
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
    else:
        usage = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    signer = issuer.key if issuer else key
    return Issued(key, builder.sign(signer, hashes.SHA256()))


@dataclass
class TestPki:
    """PEM files under `directory`: ca.pem, broker.pem (key + chain), broker-encrypted.pem (key
    encrypted with KEY_PASSWORD), broker-expired.pem (an expired certificate), and for each client
    `<name>.key`, `<name>.crt` and `<name>-keystore.pem` (both)."""

    directory: Path
    ca: Issued
    broker: Issued
    clients: dict[str, Issued]
    rogue_ca: Issued

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def broker_keystore_encrypted(self) -> Path:
        return self.directory / "broker-encrypted.pem"

    @property
    def broker_keystore_expired(self) -> Path:
        return self.directory / "broker-expired.pem"

    def client_key(self, name: str) -> Path:
        return self.directory / f"{name}.key"

    def client_cert(self, name: str) -> Path:
        return self.directory / f"{name}.crt"

    def client_keystore(self, name: str) -> Path:
        """Key and certificate in one file: the Java client's PEM keystore."""
        return self.directory / f"{name}-keystore.pem"


def make_pki(directory: Path, clients: tuple[str, ...] = ("alice",)) -> TestPki:
    """A CA, a broker certificate and client certificates CN=<name>,OU=clients,O=Flotilla Tests;
    plus `mallory`, signed by another CA the broker does not trust, and `expired`
    (CN=expired,OU=clients), signed by the CA but no longer valid."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _issue(_name("Flotilla Test CA"), None, ca=True, days=30)
    broker = _issue(_name("broker"), ca, server=True)
    issued = {name: _issue(_name(name, "clients"), ca) for name in clients}
    rogue_ca = _issue(_name("Rogue CA"), None, ca=True, days=30)
    issued["mallory"] = _issue(_name("mallory", "clients"), rogue_ca)
    issued["expired"] = _issue(_name("expired", "clients"), ca, expired=True)
    broker_expired = _issue(_name("broker"), ca, server=True, expired=True)
    (directory / "ca.pem").write_bytes(ca.cert_pem())
    (directory / "broker.pem").write_bytes(broker.key_pem() + broker.cert_pem() + ca.cert_pem())
    (directory / "broker-expired.pem").write_bytes(broker_expired.key_pem() + broker_expired.cert_pem() + ca.cert_pem())
    (directory / "broker-encrypted.pem").write_bytes(broker.key_pem(KEY_PASSWORD) + broker.cert_pem() + ca.cert_pem())
    for name, item in issued.items():
        (directory / f"{name}.key").write_bytes(item.key_pem())
        (directory / f"{name}.crt").write_bytes(item.cert_pem())
        (directory / f"{name}-keystore.pem").write_bytes(item.key_pem() + item.cert_pem())
    return TestPki(directory, ca, broker, issued, rogue_ca)
