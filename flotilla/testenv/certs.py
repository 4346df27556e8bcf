"""Certificates and keys for the test control plane, made with `cryptography`.

One CA signs the API server's serving certificate and a client certificate per identity (the admin
user in system:masters, the controller-manager and the scheduler under their built-in RBAC names).
The service-account key pair lets the API server sign tokens and the controller-manager mint them.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)

#: The first address of the service range, which the `kubernetes` Service gets.
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"

API_SERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
API_SERVER_IPS = ("127.0.0.1", KUBERNETES_SERVICE_IP)


@dataclass(frozen=True)
class ClientIdentity:
    """Who a client certificate says it is: CN is the user name, O the groups."""

    name: str
    common_name: str
    groups: tuple[str, ...] = ()


CLIENTS = (
    ClientIdentity("admin", "flotilla-admin", ("system:masters",)),
    ClientIdentity("controller-manager", "system:kube-controller-manager"),
    ClientIdentity("scheduler", "system:kube-scheduler"),
    # The API server's identity towards aggregated API servers (front proxy).
    ClientIdentity("front-proxy-client", "front-proxy-client"),
)


@dataclass(frozen=True)
class CertPaths:
    """Where `generate` wrote everything, by role."""

    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    def client_cert(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def client_key(self, name: str) -> Path:
        return self.dir / f"{name}.key"


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


def _name(common_name: str, groups: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, public_key, now: dt.datetime) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def make_ca(common_name: str = "flotilla-testenv-ca"):
    """A self-signed CA: (key, certificate)."""
    key = _new_key()
    now = dt.datetime.now(dt.timezone.utc)
    name = _name(common_name)
    cert = (
        _builder(name, name, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def issue(ca_key, ca_cert: x509.Certificate, common_name: str, *, groups: tuple[str, ...] = (),
          server: bool = False, dns_names: tuple[str, ...] = (), ips: tuple[str, ...] = ()):
    """A leaf certificate signed by the CA: (key, certificate)."""
    key = _new_key()
    now = dt.datetime.now(dt.timezone.utc)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        _builder(_name(common_name, groups), ca_cert.subject, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=True, key_cert_sign=False, crl_sign=False,
                content_commitment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()), critical=False
        )
    )
    if dns_names or ips:
        sans = [x509.DNSName(n) for n in dns_names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def generate(directory: Path, extra_ips: tuple[str, ...] = ()) -> CertPaths:
    """Write the CA, serving cert, client certs and service-account key pair under directory.

    extra_ips: more addresses the API server is reached on (a real node's bridge address)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = CertPaths(directory)
    ca_key, ca_cert = make_ca()
    _write(paths.ca_key, _key_pem(ca_key), private=True)
    _write(paths.ca_cert, _cert_pem(ca_cert))

    key, cert = issue(ca_key, ca_cert, "kube-apiserver", server=True,
                      dns_names=API_SERVER_NAMES, ips=API_SERVER_IPS + tuple(extra_ips))
    _write(paths.serving_key, _key_pem(key), private=True)
    _write(paths.serving_cert, _cert_pem(cert))

    for client in CLIENTS:
        key, cert = issue(ca_key, ca_cert, client.common_name, groups=client.groups)
        _write(paths.client_key(client.name), _key_pem(key), private=True)
        _write(paths.client_cert(client.name), _cert_pem(cert))

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(paths.sa_key, _key_pem(sa_key), private=True)
    _write(
        paths.sa_pub,
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return paths
