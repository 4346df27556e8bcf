"""The operator's own Kafka identity per cluster, for clusters whose bootstrap listener requires SASL.

The operator's admin clients (ClientQuota, RecordDeletion, KafkaUser) reach a cluster through the
bootstrap listener, `spec.listeners[0]`; when its protocol is SASL_PLAINTEXT or SASL_SSL they
authenticate with SCRAM-SHA-512 as the user `flotilla-operator` (the same name as the admin
client's client.id, so a broker's logs and quotas show one identity). Per cluster:

- the Secret `<cluster>-operator-credentials` (owned by the KafkaCluster) holds a random password,
  generated once and kept: a re-created operator pod, or a second operator version, reads it;
- the operator writes that user's SCRAM-SHA-512 credential (salted, never the password) into the
  cluster's stored credentials, the Secret `<cluster>-scram-credentials` the brokers' metadata store
  watches (broker/security/kube_scram_store.py), in the brokers' own document format
  (broker/security/scram_store.py) and with the same compare-and-set. It cannot use
  AlterUserScramCredentials: that would need it to be authenticated already;
- with a SASL first listener the brokers reach each other there as `flotilla-broker`
  (`ensure_broker_credentials`: its password in `<cluster>-broker-credentials`, which the pods read,
  and its credential in the stored credentials, the same way);
- `User:flotilla-operator` is a super user: builders/configmap.py adds it to `super.users` of every
  cluster with a SASL listener, so ACLs never lock the operator out of the quotas and ACLs it manages.

For *_SSL the CA in `<cluster>-cluster-ca-cert` (key `ca.crt`, Strimzi's name for a cluster CA's
public certificate) is trusted when that Secret exists, else the system's CAs.

The pure functions are unit-tested; `ensure_admin_auth` does the reads and writes.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any, Mapping

from broker.metadata import kube_objects as ko
from broker.metadata.kube_document import document_of, object_data
from broker.metadata.names import broker_credentials_secret_name, operator_credentials_name
from broker.security.credentials import scram_credential
from broker.metadata.kube_scram_store import DATA_KEY, secret_name as scram_secret_name
from broker.security.scram_store import apply_changes, from_doc, to_doc

from ..builders import certificates as certs
from ..builders.common import BROKER_USER, OPERATOR_USER, Owner, metadata
from ..builders.configmap import OPERATOR_PRINCIPAL
from .kafka_admin import PLAINTEXT, AdminAuth

MECHANISM = "SCRAM-SHA-512"
CAS_ATTEMPTS = 5


class CredentialsError(Exception):
    """The operator's credential could not be set up; the message says which object and why."""


def bootstrap_protocol(kafka_cluster: Mapping[str, Any]) -> str:
    """The security protocol of the bootstrap listener (spec.listeners[0]; PLAINTEXT by default)."""
    listeners = (kafka_cluster.get("spec") or {}).get("listeners") or [{}]
    return listeners[0].get("protocol") or "PLAINTEXT"


def new_password() -> str:
    return secrets.token_urlsafe(32)


def build_credentials_secret(owner: Owner, password: str, name: str | None = None,
                             user: str = OPERATOR_USER) -> dict[str, Any]:
    """A user's password for one cluster (the operator's unless `name`/`user` say otherwise),
    owned by the KafkaCluster (gone with it)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": metadata(owner, name or operator_credentials_name(owner.name)),
            "data": {"username": _b64(user), "password": _b64(password)}}


def password_of(secret: Mapping[str, Any] | None) -> str | None:
    raw = ((secret or {}).get("data") or {}).get("password")
    return base64.b64decode(raw).decode() if raw else None


def credential_matches(document: Mapping[str, Any] | None, user: str, password: str) -> bool:
    """Whether the stored credentials hold `user`'s SCRAM-SHA-512 credential for `password` (salted
    again with the stored salt and iterations: the document never holds the password)."""
    held = from_doc(document or {}).get((user, MECHANISM))
    return held is not None and scram_credential(MECHANISM, password, held.iterations, held.salt) == held


def with_credential(document: Mapping[str, Any] | None, user: str, password: str | None) -> dict[str, Any]:
    """The document with `user`'s SCRAM-SHA-512 credential set for `password` (a fresh salt), or
    removed (None); every other credential as it was."""
    change = None if password is None else scram_credential(MECHANISM, password)
    return to_doc(apply_changes(from_doc(document or {}), {(user, MECHANISM): change}))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def store_secret(cluster: str, namespace: str, uid: str | None, document: dict[str, Any]) -> dict[str, Any]:
    """A new stored-credentials Secret, labelled and owned as the brokers create it (kube_document.py)."""
    meta: dict[str, Any] = {"name": scram_secret_name(cluster), "namespace": namespace,
                            "labels": ko.labels(cluster, **{ko.CREATED_BY_LABEL: ko.CREATED_BY_FLEET})}
    owners = ko.owner_references(cluster, uid)
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta,
            "data": object_data("Secret", DATA_KEY, document)}


async def update_stored_credential(kube: Any, kafka_cluster: Mapping[str, Any], user: str,
                                   password: str | None, *, force: bool = False) -> None:
    """Make the cluster's stored credentials hold `user`'s credential for `password` (None: remove
    it), compare-and-set against the brokers' own writes. Unchanged when it already does, unless
    `force` (a fresh salt)."""
    from .kube import ApiError

    meta = kafka_cluster["metadata"]
    cluster, ns = meta["name"], meta["namespace"]
    name = scram_secret_name(cluster)
    for _ in range(CAS_ATTEMPTS):
        current = await kube.get("Secret", ns, name)
        try:
            document = document_of("Secret", DATA_KEY, current)
            if password is None:
                if (user, MECHANISM) not in from_doc(document or {}):
                    return
            elif not force and credential_matches(document, user, password):
                return
            new = with_credential(document, user, password)
        except (ValueError, KeyError, TypeError) as exc:
            raise CredentialsError(f"Secret {name} does not parse: {exc}") from None
        try:
            if current is None:
                if await kube.create(store_secret(cluster, ns, meta.get("uid"), new)) is not None:
                    return
            else:
                await kube.replace({**current, "data": {**(current.get("data") or {}),
                                                        **object_data("Secret", DATA_KEY, new)}})
                return
        except ApiError as exc:
            if exc.status != 409:
                raise CredentialsError(f"writing Secret {name}: {exc}") from None
    raise CredentialsError(f"Secret {name}: {CAS_ATTEMPTS} concurrent writers won in a row; trying again later")


async def _password(kube: Any, kafka_cluster: Mapping[str, Any], name: str | None = None,
                    user: str = OPERATOR_USER) -> str:
    """A user's password for this cluster (the operator's by default): the kept Secret's, or a new
    one (created once)."""
    meta = kafka_cluster["metadata"]
    owner = Owner(name=meta["name"], namespace=meta["namespace"], uid=meta.get("uid") or "")
    name = name or operator_credentials_name(owner.name)
    secret = await kube.get("Secret", owner.namespace, name)
    if secret is None:
        await kube.create(build_credentials_secret(owner, new_password(), name, user))  # None: another writer won
        secret = await kube.get("Secret", owner.namespace, name)
    password = password_of(secret)
    if not password:
        raise CredentialsError(f"Secret {name} has no password")
    return password


async def ensure_admin_auth(kube: Any, kafka_cluster: Mapping[str, Any]) -> AdminAuth:
    """How to authenticate to this cluster: PLAINTEXT as before, or SCRAM-SHA-512 as the operator's
    user after making sure its password exists and the brokers' stored credentials hold it."""
    protocol = bootstrap_protocol(kafka_cluster)
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    from .kube import ApiError

    meta = kafka_cluster["metadata"]
    try:
        password = await _password(kube, kafka_cluster) if protocol.startswith("SASL_") else ""
        if password:
            await update_stored_credential(kube, kafka_cluster, OPERATOR_USER, password)
        ca_pem = None
        mine: dict[str, str] = {}
        if protocol.endswith("SSL"):
            ca = await kube.get("Secret", meta["namespace"], certs.cluster_ca_cert_name(meta["name"]))
            ca_pem = certs.decoded(ca).get(certs.CA_FILE)
        if protocol == "SSL":  # its certificate, where the operator has one (certificates.fleet_certificates)
            mine = certs.decoded(await kube.get("Secret", meta["namespace"], certs.operator_tls_name(meta["name"])))
    except ApiError as exc:
        raise CredentialsError(f"the operator's credentials for KafkaCluster {meta['name']}: {exc}") from None
    return AdminAuth(security_protocol=protocol, username=OPERATOR_USER if password else "", password=password,
                     ca_pem=ca_pem, client_cert_pem=mine.get("tls.crt"), client_key_pem=mine.get("tls.key"))


async def ensure_broker_credentials(kube: Any, kafka_cluster: Mapping[str, Any]) -> bool:
    """With a SASL first listener (the inter-broker one): the Secret `<cluster>-broker-credentials`
    holding the brokers' own password (the pods read it, builders/statefulset.py) and its SCRAM-SHA-512
    credential in the stored credentials, before the brokers start. False: nothing needed."""
    if not bootstrap_protocol(kafka_cluster).startswith("SASL_"):
        return False
    from .kube import ApiError

    meta = kafka_cluster["metadata"]
    try:
        password = await _password(kube, kafka_cluster, broker_credentials_secret_name(meta["name"]), BROKER_USER)
        await update_stored_credential(kube, kafka_cluster, BROKER_USER, password)
    except ApiError as exc:
        raise CredentialsError(f"the brokers' credentials for KafkaCluster {meta['name']}: {exc}") from None
    return True
