"""cert-manager Certificates for a KafkaCluster whose spec.certificates names an issuerRef (pure).

cert-manager then holds the keys and the renewal schedule: one Certificate per broker (its
cluster DNS names and load balancer addresses) and one per tls KafkaUser, each written by
cert-manager to its own Secret (tls.key, tls.crt, ca.crt). The operator copies the brokers' into
the one Secret the broker pods mount (certificates.py: `<cluster>-broker-certs`, the same files as
with its own CAs), so a scale-up needs no new volume, and a renewal by cert-manager rolls the
brokers as the operator's own renewal does. Subjects follow the operator's own certificates
(OU=brokers or OU=clients, O=flotilla.io), so the principal mapping rules stay the same.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from broker.metadata import names

from ..api.kafka_cluster import Certificates, IssuerRef
from .common import OPERATOR_USER, Owner, metadata

API_VERSION = "cert-manager.io/v1"
ORGANIZATION = "flotilla.io"


def broker_certificate_name(owner: Owner, ordinal: int) -> str:
    return names.broker_certificate_name(owner.name, ordinal)


def broker_certificate_secret(owner: Owner, ordinal: int) -> str:
    """The Secret cert-manager writes broker `ordinal`'s key and certificate to."""
    return names.broker_certificate_secret(owner.name, ordinal)


def _split(names: tuple[str, ...]) -> tuple[list[str], list[str]]:
    dns, ips = [], []
    for name in names:
        try:
            ips.append(str(ipaddress.ip_address(name)))
        except ValueError:
            dns.append(name)
    return dns, ips


def _issuer(ref: IssuerRef) -> dict[str, str]:
    return {"name": ref.name, "kind": ref.kind, "group": ref.group}


def _lifetimes(settings: Certificates) -> dict[str, str]:
    return {"duration": f"{settings.validity_days * 24}h", "renewBefore": f"{settings.renew_before_days * 24}h"}


def build_broker_certificate(owner: Owner, settings: Certificates, ordinal: int, common_name: str,
                             alt_names: tuple[str, ...]) -> dict[str, Any]:
    """Broker `ordinal`'s Certificate: a server and client certificate (brokers present it to each
    other) for `alt_names`, host names and IP addresses, with a new key at each renewal."""
    assert settings.issuer_ref is not None
    dns, ips = _split(alt_names)
    spec: dict[str, Any] = {
        "secretName": broker_certificate_secret(owner, ordinal),
        "issuerRef": _issuer(settings.issuer_ref),
        "commonName": common_name,
        "subject": {"organizations": [ORGANIZATION], "organizationalUnits": ["brokers"]},
        "dnsNames": dns,
        **_lifetimes(settings),
        # PKCS#8: what Kafka's PEM keystore (and the Java client) reads.
        "privateKey": {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8", "rotationPolicy": "Always"},
        "usages": ["digital signature", "server auth", "client auth"],
    }
    if ips:
        spec["ipAddresses"] = ips
    return {"apiVersion": API_VERSION, "kind": "Certificate",
            "metadata": metadata(owner, broker_certificate_name(owner, ordinal)), "spec": spec}


def build_operator_certificate(owner: Owner, settings: Certificates) -> dict[str, Any]:
    """The operator's client certificate for an SSL first listener (CN=flotilla-operator, OU=operator),
    written by cert-manager to the Secret the operator reads it from (certificates.operator_tls_name)."""
    assert settings.issuer_ref is not None
    return {"apiVersion": API_VERSION, "kind": "Certificate",
            "metadata": metadata(owner, names.operator_certificate_name(owner.name)),
            "spec": {"secretName": names.operator_tls_name(owner.name), "issuerRef": _issuer(settings.issuer_ref),
                     "commonName": OPERATOR_USER,
                     "subject": {"organizations": [ORGANIZATION], "organizationalUnits": ["operator"]},
                     **_lifetimes(settings),
                     "privateKey": {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8",
                                    "rotationPolicy": "Always"},
                     "usages": ["digital signature", "client auth"]}}


def user_owner_reference(user_body: dict[str, Any]) -> dict[str, Any]:
    meta = user_body["metadata"]
    return {"apiVersion": user_body["apiVersion"], "kind": user_body["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": False, "blockOwnerDeletion": False}


def build_user_certificate(user_body: dict[str, Any], settings: Certificates, secret_name: str) -> dict[str, Any]:
    """A tls KafkaUser's Certificate (CN=<user>, OU=clients: User:<user> on mTLS listeners), owned by
    the KafkaUser, written by cert-manager to the user's Secret."""
    assert settings.issuer_ref is not None
    meta = user_body["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": "Certificate",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"],
            "labels": {"app.kubernetes.io/managed-by": "flotilla-operator"},
            "ownerReferences": [{"apiVersion": user_body["apiVersion"], "kind": user_body["kind"],
                                 "name": meta["name"], "uid": meta["uid"], "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "secretName": secret_name,
            "issuerRef": _issuer(settings.issuer_ref),
            "commonName": meta["name"],
            "subject": {"organizations": [ORGANIZATION], "organizationalUnits": ["clients"]},
            **_lifetimes(settings),
            "privateKey": {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8", "rotationPolicy": "Always"},
            "usages": ["digital signature", "client auth"],
        },
    }


def issued_keystore(data: dict[str, str]) -> tuple[str, str] | None:
    """(Kafka's PEM keystore: key then certificate chain, the issuer's CA) from a Secret cert-manager
    wrote (decoded); None until it holds all three."""
    key, chain, ca = data.get("tls.key"), data.get("tls.crt"), data.get("ca.crt")
    if not (key and chain and ca):
        return None
    return key.rstrip("\n") + "\n" + chain, ca
