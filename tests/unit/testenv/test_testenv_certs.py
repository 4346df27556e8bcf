"""Certificates: a chain the API server accepts, identities RBAC understands."""

import ipaddress

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from flotilla.testenv import certs, kubeconfig


def _load(path):
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_generate_writes_a_chain_signed_by_the_ca(tmp_path):
    paths = certs.generate(tmp_path)
    ca = _load(paths.ca_cert)
    for leaf in (paths.serving_cert, paths.client_cert("admin"), paths.client_cert("scheduler")):
        _load(leaf).verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_serving_cert_covers_loopback_and_the_kubernetes_service(tmp_path):
    san = _load(certs.generate(tmp_path).serving_cert).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address(certs.KUBERNETES_SERVICE_IP) in san.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in san.get_values_for_type(x509.DNSName)


def test_client_identities(tmp_path):
    paths = certs.generate(tmp_path)
    admin = _load(paths.client_cert("admin"))
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    usage = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage
    cm = _load(paths.client_cert("controller-manager"))
    assert cm.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:kube-controller-manager"


def test_private_keys_are_not_world_readable(tmp_path):
    paths = certs.generate(tmp_path)
    for key in (paths.ca_key, paths.sa_key, paths.client_key("admin")):
        assert key.stat().st_mode & 0o077 == 0


def test_kubeconfig_embeds_credentials(tmp_path):
    paths = certs.generate(tmp_path)
    config = kubeconfig.render("https://127.0.0.1:6443", paths.ca_cert, paths.client_cert("admin"),
                               paths.client_key("admin"), user="admin")
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert config["users"][0]["user"]["client-certificate-data"]
    assert config["contexts"][0]["context"] == {"cluster": config["current-context"], "user": "admin"}
