"""Which certificates a KafkaCluster's TLS listeners need, and when to issue or renew them (pure).

A listener with protocol SSL or SASL_SSL whose keystore spec.config does not set is served with
certificates the operator issues (pki.py). They live in Secrets owned by the KafkaCluster:

- `<cluster>-cluster-ca` (ca.key, ca.crt): the cluster CA, read by the operator only;
- `<cluster>-cluster-ca-cert` (ca.crt): what clients trust to reach the brokers;
- `<cluster>-clients-ca` and `<cluster>-clients-ca-cert`: the clients CA, which signs KafkaUser
  certificates and which mTLS listeners (`authentication: tls`) trust;
- `<cluster>-broker-certs`: `broker-<ordinal>.pem` (key and certificate, Kafka's PEM keystore) for
  every broker, `ca.crt` (the brokers' truststore for each other) and `clients-ca.crt`, mounted at
  TLS_DIR in every broker pod. Its annotation GENERATION_ANNOTATION goes on the pod template, so
  re-issuing the brokers' certificates rolls them through the operator's gated roll (roll.py).

Renewal: a certificate inside `renewBeforeDays` of its expiry is re-issued. A renewed CA keeps the
old one in the `ca.crt` bundles until it expires, so clients and brokers holding either trust both;
re-issuing for new broker ordinals (a scale-up) does not change the generation, so does not roll.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping

from broker.metadata.names import (broker_certs_name, clients_ca_cert_name, clients_ca_name, cluster_ca_cert_name,
                                   cluster_ca_name, operator_tls_name)

from .. import pki
from ..api.kafka_cluster import KafkaClusterSpec, Listener
from .common import OPERATOR_USER, Owner, bootstrap_service_name, headless_service_name, metadata, statefulset_name

TLS_DIR = "/etc/flotilla-tls"  # beside, not inside, the ConfigMap mounted at /etc/flotilla
CA_FILE = "ca.crt"
CLIENTS_CA_FILE = "clients-ca.crt"
CA_KEY = "ca.key"
GENERATION_ANNOTATION = "flotilla.io/certificate-generation"
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
# User names become certificate subjects: CN=<name>, mapped back to User:<name> on mTLS listeners.
PRINCIPAL_MAPPING_RULES = "RULE:^CN=([^,]+),OU=clients,O=flotilla.io$/$1/,DEFAULT"
CLIENTS_UNIT = "clients"
BROKERS_UNIT = "brokers"
OPERATOR_UNIT = "operator"
# On an SSL (not SASL) first listener the brokers and the operator present certificates there:
# every broker's is the brokers' principal, the operator's its own (configmap.py makes both super users).
FLEET_MAPPING_RULES = (f"RULE:^CN=[^,]+,OU={BROKERS_UNIT},O=flotilla.io$/flotilla-broker/,"
                       f"RULE:^CN=([^,]+),OU={OPERATOR_UNIT},O=flotilla.io$/$1/,{PRINCIPAL_MAPPING_RULES}")


def secret_names(cluster: str) -> tuple[str, ...]:
    """Every Secret of a cluster's certificates, CAs before what they sign."""
    return (cluster_ca_name(cluster), cluster_ca_cert_name(cluster), clients_ca_name(cluster),
            clients_ca_cert_name(cluster), broker_certs_name(cluster), operator_tls_name(cluster))


def keystore_file(ordinal: int | str) -> str:
    return f"broker-{ordinal}.pem"


def broker_ordinals(held: Mapping[str, str], replicas: int) -> set[int]:
    """Every ordinal below `replicas` and every one the brokers' Secret (`held`, decoded) already
    holds a keystore for (a broker removed by a scale-down keeps its certificate)."""
    return set(range(replicas)) | {int(k[len("broker-"):-len(".pem")]) for k in held
                                   if k.startswith("broker-") and k.endswith(".pem")}


def _user_keystore(config: Mapping[str, Any], listener: Listener) -> bool:
    prefix = f"listener.name.{listener.name.lower()}."
    keys = ("ssl.keystore.location", "ssl.keystore.key")
    return any(k in config or prefix + k in config for k in keys)


def managed_listeners(spec: KafkaClusterSpec) -> list[Listener]:
    """The TLS listeners the operator issues certificates for (those without a keystore in spec.config)."""
    return [l for l in spec.listeners if l.protocol in TLS_PROTOCOLS and not _user_keystore(spec.config, l)]


def managed_tls(spec: KafkaClusterSpec) -> bool:
    return bool(managed_listeners(spec))


def fleet_certificates(spec: KafkaClusterSpec) -> bool:
    """An SSL (not SASL) first listener with the operator's certificates: the brokers and the
    operator authenticate there with them rather than connect as User:ANONYMOUS."""
    first = spec.listeners[0]
    return first.protocol == "SSL" and first in managed_listeners(spec)


def broker_dns_names(owner: Owner, ordinal: int) -> tuple[str, ...]:
    """What a client may dial to reach broker `ordinal`: its own name (advertised.listeners) and the
    bootstrap Service, short and fully qualified."""
    pod = f"{statefulset_name(owner)}-{ordinal}.{headless_service_name(owner)}.{owner.namespace}"
    bootstrap = f"{bootstrap_service_name(owner)}.{owner.namespace}"
    return (f"{pod}.svc", f"{pod}.svc.cluster.local", f"{bootstrap}.svc", f"{bootstrap}.svc.cluster.local",
            bootstrap, bootstrap_service_name(owner))


def decoded(secret: Mapping[str, Any] | None) -> dict[str, str]:
    """A Secret's data as text."""
    return {k: base64.b64decode(v).decode() for k, v in (((secret or {}).get("data")) or {}).items()}


def _secret(owner: Owner, name: str, data: Mapping[str, str], annotations: Mapping[str, str] | None = None
            ) -> dict[str, Any]:
    meta = metadata(owner, name)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta,
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in sorted(data.items())}}


@dataclass
class CertificatePlan:
    """The Secrets to write (only those that change), the brokers' certificate generation, and a
    line per certificate issued (for the KafkaCluster's events)."""

    secrets: list[dict[str, Any]] = field(default_factory=list)
    generation: int = 0
    issued: list[str] = field(default_factory=list)
    #: With a cert-manager issuer: the broker ordinals it has not issued a certificate for yet.
    pending: list[int] = field(default_factory=list)


def _ca(existing: Mapping[str, str], common_name: str, spec: KafkaClusterSpec, now: dt.datetime
        ) -> tuple[pki.KeyPair, bool]:
    """The CA to sign with: the stored one, or a new one if it is missing or due (True)."""
    settings = spec.certificates
    if existing.get(CA_KEY) and existing.get(CA_FILE):
        held = pki.KeyPair(existing[CA_KEY], existing[CA_FILE])
        if not pki.renewal_due(held.cert_pem, now=now, renew_before_days=settings.renew_before_days):
            return held, False
    return pki.new_ca(common_name, now=now, days=settings.ca_validity_days), True


def trust_bundle(ca: pki.KeyPair, previous_bundle: str, now: dt.datetime) -> str:
    """The CA's certificate first, then every other certificate of the previous bundle that has
    not expired (a renewed CA's predecessor, until brokers and clients no longer need it)."""
    kept = [c for c in pki.pem_certificates(previous_bundle)
            if c != ca.cert_pem and pki.not_after(c) > now]
    return "".join([ca.cert_pem, *kept])


def names_file(ordinal: int) -> str:
    """The file listing the names broker `ordinal`'s certificate holds, one a line (its start script
    waits until its load balancer's address is among them)."""
    return f"broker-{ordinal}.names"


def plan_certificates(owner: Owner, spec: KafkaClusterSpec, *, replicas: int,
                      existing: Mapping[str, Mapping[str, Any] | None], now: dt.datetime,
                      external_addresses: Mapping[int, tuple[str, ...]] | None = None) -> CertificatePlan:
    """What to write so that every broker ordinal below `replicas` (and any higher one already
    issued) holds a valid certificate from the current cluster CA with its DNS names, and the
    addresses of its load balancers (`external_addresses` by ordinal, external_addresses.py).
    `existing`: the Secrets as read, by name (None: absent). Nothing when no listener is managed.

    A load balancer address that appears later (a new broker's, once the cloud provisions it)
    re-issues that broker's certificate alone without a roll: the broker waits for it to start."""
    plan = CertificatePlan()
    if not managed_tls(spec):
        return plan
    external = external_addresses or {}
    name = owner.name
    data = {n: decoded(existing.get(n)) for n in secret_names(name)}
    bundles = {}
    cas = {}
    for ca_name, cert_name, common in ((cluster_ca_name(name), cluster_ca_cert_name(name), f"{name} cluster CA"),
                                       (clients_ca_name(name), clients_ca_cert_name(name), f"{name} clients CA")):
        ca, new = _ca(data[ca_name], common, spec, now)
        cas[ca_name] = ca
        if new:
            plan.secrets.append(_secret(owner, ca_name, {CA_KEY: ca.key_pem, CA_FILE: ca.cert_pem}))
            plan.issued.append(f"{common} {'renewed' if data[ca_name] else 'created'}")
        bundle = trust_bundle(ca, data[cert_name].get(CA_FILE, ""), now)
        bundles[ca_name] = bundle
        if bundle != data[cert_name].get(CA_FILE):
            plan.secrets.append(_secret(owner, cert_name, {CA_FILE: bundle}))
    cluster_ca = cas[cluster_ca_name(name)]
    held = data[broker_certs_name(name)]
    secret = existing.get(broker_certs_name(name)) or {}
    generation = int(((secret.get("metadata") or {}).get("annotations") or {}).get(GENERATION_ANNOTATION) or 0)
    ordinals = broker_ordinals(held, replicas)
    settings = spec.certificates

    def wanted(ordinal: int) -> tuple[str, ...]:
        return broker_dns_names(owner, ordinal) + tuple(external.get(ordinal, ()))

    def sound(ordinal: int) -> bool:
        """From the current CA, with the cluster names, not due (the addresses may lag)."""
        pem = held.get(keystore_file(ordinal))
        if not pem:
            return False
        cert = pki.pem_certificates(pem)[0]
        return (pki.signed_by(cert, cluster_ca) and set(broker_dns_names(owner, ordinal)) <= set(pki.alt_names(cert))
                and not pki.renewal_due(cert, now=now, renew_before_days=settings.renew_before_days))

    def addresses_lag(ordinal: int) -> bool:
        pem = held.get(keystore_file(ordinal))
        return bool(pem) and set(pki.alt_names(pki.pem_certificates(pem)[0])) != set(wanted(ordinal))

    held_ordinals = [o for o in ordinals if held.get(keystore_file(o))]
    renew_all = generation == 0 or any(not sound(o) for o in held_ordinals)
    to_issue = sorted(ordinals) if renew_all else sorted(
        o for o in ordinals if not held.get(keystore_file(o)) or addresses_lag(o))
    keystores = {k: v for k, v in held.items() if k.startswith("broker-")}
    for ordinal in to_issue:
        pair = pki.issue(cluster_ca, f"{statefulset_name(owner)}-{ordinal}", now=now, days=settings.validity_days,
                         alt_names=wanted(ordinal), unit=BROKERS_UNIT, server=True)
        keystores[keystore_file(ordinal)] = pair.keystore_pem
        keystores[names_file(ordinal)] = "".join(f"{n}\n" for n in wanted(ordinal))
    trust = {CA_FILE: bundles[cluster_ca_name(name)], CLIENTS_CA_FILE: bundles[clients_ca_name(name)]}
    # The brokers read their truststores at start-up: a changed bundle rolls them as new keys do.
    new_trust = bool(held) and any(held.get(k) != v for k, v in trust.items())
    if renew_all or new_trust:
        generation += 1
    if to_issue:
        plan.issued.append(f"broker certificates {'renewed' if renew_all and held_ordinals else 'issued'} for "
                           f"ordinals {', '.join(map(str, to_issue))} (generation {generation})")
    files = {**keystores, **trust}
    if files != held or not secret:
        plan.secrets.append(_secret(owner, broker_certs_name(name), files, {GENERATION_ANNOTATION: str(generation)}))
    if fleet_certificates(spec):
        mine = data[operator_tls_name(name)]
        cert = mine.get("tls.crt")
        if not (cert and mine.get("tls.key") and pki.signed_by(cert, cluster_ca)
                and not pki.renewal_due(cert, now=now, renew_before_days=settings.renew_before_days)):
            pair = pki.issue(cluster_ca, OPERATOR_USER, now=now, days=settings.validity_days, unit=OPERATOR_UNIT)
            plan.secrets.append(_secret(owner, operator_tls_name(name), {"tls.crt": pair.cert_pem,
                                                                         "tls.key": pair.key_pem}))
            plan.issued.append(f"operator certificate {'renewed' if cert else 'issued'}")
    plan.generation = generation
    return plan


def plan_issued_certificates(owner: Owner, spec: KafkaClusterSpec, *, replicas: int,
                             existing: Mapping[str, Mapping[str, Any] | None],
                             issued: Mapping[int, Mapping[str, str]]) -> CertificatePlan:
    """With spec.certificates.issuerRef: copy what cert-manager issued (`issued`: each ordinal's
    Secret as decoded, cert_manager.py) into the brokers' Secret, and the issuer's CA into the
    bundles clients and the brokers trust. A certificate re-issued with the same names (a renewal)
    rolls the brokers (a new generation); one re-issued for new names (a load balancer's address)
    or for a new broker does not: that broker waits for it. `pending`: ordinals never issued."""
    from .cert_manager import issued_keystore

    plan = CertificatePlan()
    if not managed_tls(spec):
        return plan
    name = owner.name
    secret = existing.get(broker_certs_name(name)) or {}
    held = decoded(secret)
    generation = int(((secret.get("metadata") or {}).get("annotations") or {}).get(GENERATION_ANNOTATION) or 0)
    ordinals = broker_ordinals(held, replicas)
    files = {k: v for k, v in held.items() if k.startswith("broker-")}
    authorities: list[str] = []
    renewed, copied = False, []
    for ordinal in sorted(ordinals):
        got = issued_keystore(dict(issued.get(ordinal) or {}))
        if got is None:
            if not held.get(keystore_file(ordinal)):
                plan.pending.append(ordinal)
            continue
        keystore, ca = got
        authorities += [c for c in pki.pem_certificates(ca) if c not in authorities]
        before = held.get(keystore_file(ordinal))
        if before == keystore:
            continue
        names = pki.alt_names(pki.pem_certificates(keystore)[0])
        renewed = renewed or bool(before) and set(pki.alt_names(pki.pem_certificates(before)[0])) == set(names)
        files[keystore_file(ordinal)] = keystore
        files[names_file(ordinal)] = "".join(f"{n}\n" for n in names)
        copied.append(ordinal)
    if plan.pending:
        return plan  # the brokers start only once every one has its certificate
    bundle = "".join(authorities) or held.get(CA_FILE, "")
    trust = {CA_FILE: bundle, CLIENTS_CA_FILE: bundle}
    new_trust = bool(held) and any(held.get(k) != v for k, v in trust.items())
    if generation == 0 or renewed or new_trust:
        generation += 1
    if copied:
        plan.issued.append(f"broker certificates from cert-manager {'renewed' if renewed else 'issued'} for "
                           f"ordinals {', '.join(map(str, copied))} (generation {generation})")
    for public in (cluster_ca_cert_name(name), clients_ca_cert_name(name)):
        if decoded(existing.get(public)).get(CA_FILE) != bundle:
            plan.secrets.append(_secret(owner, public, {CA_FILE: bundle}))
    files.update(trust)
    if files != held or not secret or str(generation) != ((secret.get("metadata") or {}).get("annotations") or {}).get(
            GENERATION_ANNOTATION):
        plan.secrets.append(_secret(owner, broker_certs_name(name), files, {GENERATION_ANNOTATION: str(generation)}))
    plan.generation = generation
    return plan


def live_generation(statefulset: Mapping[str, Any] | None) -> int | None:
    """The certificate generation on a StatefulSet's pod template (what its pods were started with)."""
    template = (((statefulset or {}).get("spec") or {}).get("template") or {}).get("metadata") or {}
    value = (template.get("annotations") or {}).get(GENERATION_ANNOTATION)
    return int(value) if value and value.isdigit() else None


def user_certificate_due(secret_data: Mapping[str, str], clients_ca: pki.KeyPair, user: str, *,
                         now: dt.datetime, renew_before_days: int) -> bool:
    """Whether a KafkaUser's certificate must be (re-)issued: missing, for another name, not from
    the current clients CA, or inside its renewal window."""
    cert = secret_data.get("user.crt")
    if not cert or not secret_data.get("user.key"):
        return True
    subject = pki.pem_certificates(cert)[0]
    return (not pki.signed_by(subject, clients_ca) or pki.common_name(subject) != user
            or pki.renewal_due(subject, now=now, renew_before_days=renew_before_days))


def user_certificate_files(clients_ca: pki.KeyPair, cluster_ca_bundle: str, user: str, *, now: dt.datetime,
                           days: int) -> dict[str, str]:
    """A KafkaUser's TLS files: its key and certificate (CN=<user>), both in `user.pem` (Kafka's
    PEM keystore), and `ca.crt`, the cluster CA bundle to trust the brokers with."""
    pair = pki.issue(clients_ca, user, now=now, days=days, unit=CLIENTS_UNIT)
    return {"ca.crt": cluster_ca_bundle, "user.crt": pair.cert_pem, "user.key": pair.key_pem,
            "user.pem": pair.keystore_pem}
